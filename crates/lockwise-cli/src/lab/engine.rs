//! The lab's engine: runs a scenario, starts its actors, freezes and thaws them, keeps the
//! events they report, and concludes each variant with the checker's verdict.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockwise::lease::boottime_nanos;
use lockwise_bench::history::{Event, Verdict, What, check};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::backend::LabBackend;
use super::client::Proc;
use super::error::{LabError, LabResult};
use super::judge::is_acquired;
use super::report::{Outcome, Variant};
use super::timeline;

/// What an actor needs besides its role, the lock backend and the key.
#[derive(Debug, Default, Clone)]
pub(super) struct Extra {
    /// PostgreSQL schema for locks, fence and queue.
    pub(super) schema: Option<String>,
    /// The fenced resource: `file:<path>`, `redis` or `postgres`.
    pub(super) fence: Option<String>,
    /// The queue's PostgreSQL URL.
    pub(super) queue_url: Option<String>,
}

/// The lab's settings and the state of the variant being run.
pub(super) struct Lab {
    pub(super) exe: PathBuf,
    pub(super) url: String,
    pub(super) backend: LabBackend,
    pub(super) queue_url: String,
    pub(super) ttl: Duration,
    pub(super) pause: Duration,
    pub(super) gap: Duration,
    pub(super) iterations: u32,
    pub(super) round: Duration,
    pub(super) renew_only: bool,
    pub(super) recheck_only: bool,
    pub(super) run_id: String,
    pub(super) text: bool,
    pub(super) clock: timeline::Clock,
    /// This variant's events. Replaced (not emptied) when a variant ends, so that a reader
    /// of an actor from a variant that failed can never add to the next one's.
    log: Mutex<Arc<Mutex<Vec<Event>>>>,
    /// Every key used, to clean up after.
    keys: Mutex<Vec<String>>,
    /// The actors started for the current variant.
    spawned: Mutex<Vec<(String, u32)>>,
}

impl Lab {
    /// A lab with no variant run yet; `run_id` is unique to this process.
    pub(super) fn new(
        exe: PathBuf,
        url: String,
        backend: LabBackend,
        queue_url: String,
        args: &super::LabArgs,
    ) -> Self {
        Lab {
            exe,
            url,
            backend,
            queue_url,
            ttl: args.ttl,
            pause: args.pause,
            gap: args.gap,
            iterations: args.iterations,
            round: args.round,
            renew_only: args.renew,
            recheck_only: args.recheck,
            run_id: format!(
                "{}-{:06x}",
                std::process::id(),
                rand::random::<u32>() & 0xff_ffff
            ),
            text: !args.json,
            clock: timeline::Clock::now(),
            log: Mutex::new(Arc::new(Mutex::new(Vec::new()))),
            keys: Mutex::new(Vec::new()),
            spawned: Mutex::new(Vec::new()),
        }
    }

    /// A key for variant `n` of the scenario `scenario`, unique to this run.
    pub(super) fn key(&self, scenario: &str, n: usize) -> String {
        let key = format!("lab:{scenario}:{n}:{}", self.run_id);
        if let Ok(mut keys) = self.keys.lock() {
            keys.push(key.clone());
        }
        key
    }

    /// The PostgreSQL schema of this run's locks and fences, on the PostgreSQL backend.
    pub(super) fn pg_schema(&self) -> Option<String> {
        matches!(self.backend, LabBackend::Postgres(_))
            .then(|| format!("lockwise_lab_{}", self.run_id.replace('-', "_")))
    }

    /// What an actor that takes locks needs.
    pub(super) fn lock_extra(&self) -> Extra {
        Extra {
            schema: self.pg_schema(),
            ..Extra::default()
        }
    }

    /// Records something the lab itself did (a freeze, a kill): shown in the timeline, ignored
    /// by the checker.
    pub(super) fn note(&self, text: impl Into<String>) {
        let event = Event::new(
            "lab",
            std::process::id(),
            boottime_nanos().unwrap_or(0),
            What::Note { text: text.into() },
        );
        if let Ok(mut log) = self.current_log().lock() {
            log.push(event);
        }
    }

    /// Where the current variant's events go, for actors the lab does not drive through
    /// [`Proc`] (the partition members).
    pub(super) fn log(&self) -> Arc<Mutex<Vec<Event>>> {
        self.current_log()
    }

    /// Lists an actor the scenario started itself (role and pid) with the variant's actors.
    pub(super) fn started(&self, name: &str, pid: u32) {
        if let Ok(mut spawned) = self.spawned.lock() {
            spawned.push((name.to_owned(), pid));
        }
    }

    /// Remembers a key the run used on the lock backend, to wipe it after the run.
    pub(super) fn remember_key(&self, key: String) {
        if let Ok(mut keys) = self.keys.lock() {
            keys.push(key);
        }
    }

    fn current_log(&self) -> Arc<Mutex<Vec<Event>>> {
        self.log.lock().map(|log| log.clone()).unwrap_or_default()
    }

    /// Ends the variant's log and returns its events in time order.
    pub(super) fn take_events(&self) -> Vec<Event> {
        let old = self
            .log
            .lock()
            .map(|mut log| std::mem::take(&mut *log))
            .unwrap_or_default();
        let mut events = old
            .lock()
            .map(|mut log| std::mem::take(&mut *log))
            .unwrap_or_default();
        events.sort_by_key(|e| e.at);
        events
    }

    pub(super) fn take_actors(&self) -> Vec<(String, u32)> {
        self.spawned
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default()
    }

    /// `process`'s latest event that `pick` accepts.
    pub(super) fn last(&self, process: &str, pick: impl Fn(&What) -> bool) -> Option<Event> {
        let log = self.current_log();
        let log = log.lock().ok()?;
        log.iter()
            .rev()
            .find(|e| e.process == process && pick(&e.what))
            .cloned()
    }

    /// When `process` was last granted the lock.
    pub(super) fn granted_at(&self, process: &str) -> LabResult<u64> {
        self.last(process, is_acquired)
            .map(|e| e.at)
            .ok_or_else(|| LabError(format!("{process} was not granted the lock")))
    }

    /// Starts actor `name` on `key` and waits until it is ready.
    pub(super) async fn spawn(&self, name: &str, key: &str, extra: &Extra) -> LabResult<Proc> {
        let mut cmd = tokio::process::Command::new(&self.exe);
        // URLs go through the environment: a password on a command line shows in `ps`.
        cmd.arg("lab-actor")
            .args(["--role", name, "--key", key])
            .env("LOCKWISE_LAB_ACTOR_URL", &self.url);
        if let Some(schema) = &extra.schema {
            cmd.args(["--schema", schema]);
        }
        if let Some(fence) = &extra.fence {
            cmd.args(["--fence", fence]);
        }
        if let Some(url) = &extra.queue_url {
            cmd.env("LOCKWISE_LAB_ACTOR_QUEUE_URL", url);
        }
        if std::env::var_os("LOCKWISE_LOG").is_none() {
            cmd.env("LOCKWISE_LOG", "error");
        }
        let mut proc = Proc::start(cmd, name, key, self.current_log())?;
        if let Ok(mut spawned) = self.spawned.lock() {
            spawned.push((name.to_owned(), proc.pid.unsigned_abs()));
        }
        proc.done().await?; // ready: connected to the backend
        Ok(proc)
    }

    /// Freezes an actor, the way a GC pause, a VM migration or swapping would: every thread
    /// stops, its renewal task included.
    pub(super) fn freeze(&self, proc: &Proc, how_long: Duration, renewing: bool) {
        self.stop_outside(proc.pid, || {
            self.in_operation(std::slice::from_ref(&proc.key))
        });
        self.note(format!(
            "{} frozen with SIGSTOP for {} (a GC pause, a VM migration, swapping){}",
            proc.name,
            humantime::format_duration(how_long),
            if renewing {
                "; its renewal task freezes with it"
            } else {
                ""
            }
        ));
    }

    /// Stops process `pid` with SIGSTOP at a moment `busy` is false: while it is true, the
    /// process runs on for a millisecond and is stopped again (a thousand tries at most). `busy` says
    /// whether the process may hold a flock of the file backend or of a fenced file
    /// ([`Lab::in_operation`]): it holds one for a few microseconds per operation (a renewal
    /// every ttl/3, a roster read, a fenced write and its fsync), and frozen inside that
    /// window it would stall every other process on the file until thawed, which no lease on
    /// a server does. `busy` is asked only once every thread of the process has stopped: a
    /// signal is delivered asynchronously, and a thread still running on the other core can
    /// take a flock after `kill` returned. Another process's operation looks the same from
    /// here and only costs a retry.
    pub(super) fn stop_outside(&self, pid: i32, busy: impl Fn() -> bool) {
        let signal = |s| {
            let _ = kill(Pid::from_raw(pid), s);
        };
        signal(Signal::SIGSTOP);
        for _ in 0..1000 {
            wait_stopped(pid);
            if !busy() {
                break;
            }
            signal(Signal::SIGCONT);
            std::thread::sleep(Duration::from_millis(1));
            signal(Signal::SIGSTOP);
        }
    }

    /// Whether some process holds the file backend's flock of one of `keys` (false on
    /// servers).
    pub(super) fn in_operation(&self, keys: &[String]) -> bool {
        self.backend.files().is_some_and(|files| {
            keys.iter()
                .any(|key| files.in_operation(key).unwrap_or(false))
        })
    }

    pub(super) fn thaw(&self, proc: &Proc) {
        self.note(format!("{} resumed with SIGCONT", proc.name));
        proc.signal(Signal::SIGCONT);
    }

    /// Finishes a variant: waits for the actors to exit, then checks what they recorded.
    pub(super) async fn conclude(
        &self,
        procs: Vec<Proc>,
        name: &str,
        predicts: &str,
        judge: impl FnOnce(&[Event], &Verdict) -> (Outcome, Vec<String>),
    ) -> Variant {
        for proc in procs {
            proc.finish().await;
        }
        let events = self.take_events();
        let verdict = check(&events);
        let (outcome, remarks) = judge(&events, &verdict);
        Variant {
            name: name.to_owned(),
            predicts: predicts.to_owned(),
            events,
            verdict,
            outcome,
            remarks,
            actors: self.take_actors(),
        }
    }

    /// Removes what the run left: the scratch directory, and every key and schema it used on
    /// the backend (best effort).
    pub(super) async fn clean_up(&self) {
        let keys: Vec<String> = self.keys.lock().map(|k| k.clone()).unwrap_or_default();
        self.backend.wipe(&keys, self.pg_schema().as_deref()).await;
        // After the wipe: opening the file backend would create the directory again.
        super::scratch::remove();
    }
}

/// Waits (up to 200 ms) until every thread of process `pid` is stopped (state `T` in
/// `/proc/<pid>/task/*/stat`), or the process is gone.
fn wait_stopped(pid: i32) {
    let stopped = || {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return true; // gone
        };
        tasks.flatten().all(|task| {
            std::fs::read_to_string(task.path().join("stat")).map_or(true, |stat| {
                // `pid (comm) S …`: the state follows the last ')' (comm may hold one).
                stat.rsplit_once(')').is_none_or(|(_, rest)| {
                    matches!(
                        rest.trim_start().chars().next(),
                        Some('T' | 't' | 'Z' | 'X')
                    )
                })
            })
        })
    };
    for _ in 0..200 {
        if stopped() {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
