//! `lockwise lab`: the lesson's exercises, reproduced with real processes.
//!
//! Each scenario starts `lockwise lab-actor` child processes, tells them what to do step by
//! step, freezes them with SIGSTOP/SIGCONT (a real pause: the renewal task stops too), and
//! collects the events each actor reports about itself. The verdict comes from
//! [`lockwise::history::check`] over those events, never from this script of what should have
//! happened.

pub(crate) mod actor;
mod fenced_file;
mod proto;
mod scenarios;
mod timeline;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockwise::history::{Event, Verdict, What, check};
use lockwise::lease::boottime_nanos;
use lockwise::url::{BackendUrl, redact_url};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

use self::proto::{Line, Op};
use crate::{duration, exit};

/// The scenarios, in the lesson's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Scenario {
    /// Exercise 1: a lock expires while its holder is paused; two processes inside.
    Expiry,
    /// Exercise 2: a release without the owner token deletes someone else's lock.
    UnsafeRelease,
    /// GET then DEL (two commands) against the atomic script, raced against expiry.
    CheckThenDelete,
    /// A fencing token stops the paused holder's stale write.
    Fencing,
    /// SKIP LOCKED workers, one SIGKILLed: every job is done exactly once (PostgreSQL).
    QueueCrash,
}

impl Scenario {
    const ALL: [Scenario; 5] = [
        Scenario::Expiry,
        Scenario::UnsafeRelease,
        Scenario::CheckThenDelete,
        Scenario::Fencing,
        Scenario::QueueCrash,
    ];

    fn name(self) -> &'static str {
        match self {
            Scenario::Expiry => "expiry",
            Scenario::UnsafeRelease => "unsafe-release",
            Scenario::CheckThenDelete => "check-then-delete",
            Scenario::Fencing => "fencing",
            Scenario::QueueCrash => "queue-crash",
        }
    }
}

/// Arguments of `lockwise lab`.
#[derive(Debug, clap::Args)]
#[command(
    about = "See the lesson happen: real processes, real pauses, a verdict from the recorded events",
    after_help = "\
Every scenario runs on the embedded file backend unless --url names another (redis://,
postgres://, mysql://). queue-crash needs PostgreSQL: --queue-url, else --url when it is a
postgres:// URL, else postgres://postgres@127.0.0.1:5432/postgres; without one it is reported
as NOT RUN. --ttl 5s --pause 10s gives the lesson's own numbers.

Exit status: 0 when every scenario that ran showed what the lesson predicts (including the
violations it predicts), 1 when one did not, 64 on bad arguments, 69 when the lock server
does not answer or the one scenario asked for could not run."
)]
pub(crate) struct LabArgs {
    /// The scenario to run (default: all of them, with a summary)
    #[arg(value_enum)]
    scenario: Option<Scenario>,
    /// The lock backend (default: the file backend in a fresh temporary directory)
    #[arg(long)]
    url: Option<String>,
    /// The lock's TTL
    #[arg(long, default_value = "1s", value_parser = duration::parse)]
    ttl: Duration,
    /// How long a holder is frozen (must be longer than --ttl)
    #[arg(long, default_value = "2s", value_parser = duration::parse)]
    pause: Duration,
    /// expiry: only the variants with renewal
    #[arg(long)]
    renew: bool,
    /// expiry: only the variants that re-check ownership before working
    #[arg(long)]
    recheck: bool,
    /// check-then-delete: how many races to run per release method
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    iterations: u32,
    /// check-then-delete: the delay injected between GET and DEL
    #[arg(long, default_value = "5ms", value_parser = duration::parse)]
    gap: Duration,
    /// queue-crash: the PostgreSQL server for the queue
    #[arg(long, env = "LOCKWISE_LAB_QUEUE_URL", hide_env_values = true)]
    queue_url: Option<String>,
    /// Print one JSON document (and nothing else) on stdout
    #[arg(long)]
    json: bool,
}

/// The lock backend the lab runs on.
#[derive(Debug, Clone)]
enum Kind {
    File(PathBuf),
    Redis(String),
    Postgres(String),
    Mysql,
}

impl Kind {
    fn name(&self) -> &'static str {
        match self {
            Kind::File(_) => "file",
            Kind::Redis(_) => "redis",
            Kind::Postgres(_) => "postgres",
            Kind::Mysql => "mysql",
        }
    }
}

/// What one variant showed.
#[derive(Debug)]
struct Variant {
    name: String,
    /// What the lesson predicts, in one sentence.
    predicts: String,
    events: Vec<Event>,
    verdict: Verdict,
    /// `Ok(what was seen)` when it matches the prediction, `Err(what differed)` otherwise.
    outcome: Result<String, String>,
    /// Extra lines for the text report (counts, the stored value, …).
    remarks: Vec<String>,
    /// The actor processes the lab started for it: role and pid.
    actors: Vec<(String, u32)>,
}

/// What one scenario showed.
#[derive(Debug)]
struct Report {
    scenario: Scenario,
    backend: String,
    not_run: Option<String>,
    variants: Vec<Variant>,
}

impl Report {
    fn passed(&self) -> bool {
        self.not_run.is_none() && self.variants.iter().all(|v| v.outcome.is_ok())
    }
}

/// An error that stops a scenario (an actor failed or went silent, a server went away).
#[derive(Debug)]
struct LabError(String);

impl std::fmt::Display for LabError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl<E: std::error::Error> From<E> for LabError {
    fn from(e: E) -> Self {
        LabError(e.to_string())
    }
}

type LabResult<T> = Result<T, LabError>;

/// Children the lab may have frozen: resumed and killed on SIGINT/SIGTERM/SIGHUP.
static CHILDREN: Mutex<Vec<i32>> = Mutex::new(Vec::new());
/// A directory the lab created, removed on the way out.
static SCRATCH: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Resumes and kills every actor still running (a stopped one included).
fn kill_children() {
    let pids: Vec<i32> = CHILDREN
        .lock()
        .map(|mut c| std::mem::take(&mut *c))
        .unwrap_or_default();
    for pid in pids {
        let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

fn remove_scratch() {
    if let Some(dir) = SCRATCH.lock().ok().and_then(|mut d| d.take()) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Runs `lockwise lab`.
pub(crate) async fn run(args: LabArgs) -> u8 {
    if args.pause <= args.ttl {
        eprintln!(
            "lockwise lab: --pause must be longer than --ttl (the lab pauses a holder past its lease)"
        );
        return exit::USAGE;
    }
    if args.ttl < lockwise::MIN_TTL || args.ttl > Duration::from_secs(60) {
        eprintln!("lockwise lab: --ttl must be between 100ms and 60s");
        return exit::USAGE;
    }
    if args.pause > Duration::from_secs(120)
        || args.gap > Duration::from_secs(1)
        || args.gap < Duration::from_micros(100)
    {
        eprintln!("lockwise lab: --pause is at most 120s, --gap between 100us and 1s");
        return exit::USAGE;
    }
    let (url, kind) = match resolve_url(args.url.as_deref()) {
        Ok(found) => found,
        Err(message) => {
            eprintln!("lockwise lab: {message}");
            return exit::USAGE;
        }
    };
    // A lock server that does not answer stops the lab before any scenario, rather than
    // turning every scenario into a failure.
    match tokio::time::timeout(Duration::from_secs(10), lockwise::Locker::connect(&url)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            eprintln!("lockwise lab: cannot use {}: {e}", redact_url(&url));
            return exit::for_error(&e);
        }
        Err(_) => {
            eprintln!(
                "lockwise lab: {} did not answer within 10 s",
                redact_url(&url)
            );
            return exit::BACKEND;
        }
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("lockwise lab: cannot find the lockwise executable: {e}");
            return exit::BACKEND;
        }
    };
    tokio::spawn(async {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) else {
            return;
        };
        let code = tokio::select! {
            _ = int.recv() => 130,
            _ = term.recv() => 143,
            _ = hup.recv() => 129,
        };
        kill_children();
        remove_scratch();
        eprintln!("lockwise lab: interrupted; every actor was resumed and killed");
        std::process::exit(code);
    });
    let queue_url = args.queue_url.clone().unwrap_or_else(|| match &kind {
        Kind::Postgres(url) => url.clone(),
        _ => "postgres://postgres@127.0.0.1:5432/postgres".to_owned(),
    });
    let lab = Lab {
        exe,
        url,
        kind,
        queue_url,
        ttl: args.ttl,
        pause: args.pause,
        gap: args.gap,
        iterations: args.iterations,
        renew_only: args.renew,
        recheck_only: args.recheck,
        run_id: format!(
            "{}-{:06x}",
            std::process::id(),
            rand::random::<u32>() & 0xff_ffff
        ),
        log: Mutex::new(Arc::new(Mutex::new(Vec::new()))),
        text: !args.json,
        clock: timeline::Clock::now(),
        keys: Mutex::new(Vec::new()),
        spawned: Mutex::new(Vec::new()),
    };
    let scenarios: Vec<Scenario> = match args.scenario {
        Some(one) => vec![one],
        None => Scenario::ALL.to_vec(),
    };
    if lab.text {
        println!(
            "lockwise lab: backend {} ({}), TTL {}, pause {}; times are UTC\n",
            lab.kind.name(),
            redact_url(&lab.url),
            humantime::format_duration(lab.ttl),
            humantime::format_duration(lab.pause),
        );
    }
    let mut reports = Vec::new();
    for scenario in scenarios {
        let report = lab.scenario(scenario).await;
        if lab.text {
            timeline::print_report(&lab.clock, &report);
        }
        reports.push(report);
    }
    lab.clean_up().await;
    if lab.text && reports.len() > 1 {
        timeline::print_summary(&reports);
    }
    if !lab.text {
        let docs: Vec<serde_json::Value> = reports.iter().map(report_json).collect();
        let doc = if docs.len() == 1 {
            docs.into_iter().next().unwrap_or_default()
        } else {
            json!({ "scenarios": docs })
        };
        println!("{doc}");
    }
    let failed = reports.iter().any(|r| r.not_run.is_none() && !r.passed());
    let unavailable = reports.len() == 1 && reports.iter().any(|r| r.not_run.is_some());
    if failed {
        1
    } else if unavailable {
        exit::BACKEND
    } else {
        0
    }
}

fn report_json(report: &Report) -> serde_json::Value {
    let variants: Vec<serde_json::Value> = report
        .variants
        .iter()
        .map(|v| {
            json!({
                "name": v.name,
                "predicts": v.predicts,
                "as_predicted": v.outcome.is_ok(),
                "outcome": match &v.outcome { Ok(s) | Err(s) => s },
                "events": v.events,
                "verdict": v.verdict,
                "remarks": v.remarks,
                "actors": v.actors.iter().map(|(name, pid)| (name.clone(), json!(pid))).collect::<serde_json::Map<_, _>>(),
            })
        })
        .collect();
    let mut doc = json!({
        "scenario": report.scenario.name(),
        "backend": report.backend,
        "as_predicted": report.passed(),
        "variants": variants,
    });
    if let Some(reason) = &report.not_run {
        doc["not_run"] = json!(reason);
    }
    doc
}

fn resolve_url(url: Option<&str>) -> Result<(String, Kind), String> {
    let Some(url) = url else {
        let dir = tempfile::Builder::new()
            .prefix("lockwise-lab-")
            .tempdir()
            .map_err(|e| format!("cannot create a temporary directory: {e}"))?
            .keep();
        if let Ok(mut scratch) = SCRATCH.lock() {
            *scratch = Some(dir.clone());
        }
        return Ok((format!("file://{}", dir.display()), Kind::File(dir)));
    };
    let kind = match BackendUrl::parse(url).map_err(|e| e.to_string())? {
        BackendUrl::File(dir) => Kind::File(dir),
        BackendUrl::Redis(u) => Kind::Redis(u),
        BackendUrl::Postgres(u) => Kind::Postgres(u),
        BackendUrl::Mysql(_) => Kind::Mysql,
        BackendUrl::Memory => {
            return Err(
                "memory: locks live inside one process, and the lab needs several: use \
                 file:// (the default), redis://, postgres:// or mysql://"
                    .into(),
            );
        }
        _ => return Err(format!("the lab cannot use {}", redact_url(url))),
    };
    Ok((url.to_owned(), kind))
}

/// Extra settings for an actor.
#[derive(Debug, Default, Clone)]
struct Extra {
    schema: Option<String>,
    fence: Option<String>,
    queue_url: Option<String>,
}

/// The lab's shared state.
struct Lab {
    exe: PathBuf,
    url: String,
    kind: Kind,
    queue_url: String,
    ttl: Duration,
    pause: Duration,
    gap: Duration,
    iterations: u32,
    renew_only: bool,
    recheck_only: bool,
    run_id: String,
    /// This variant's events. Replaced (not emptied) when a variant ends, so that a reader
    /// of an actor from a variant that failed can never add to the next one's.
    log: Mutex<Arc<Mutex<Vec<Event>>>>,
    text: bool,
    clock: timeline::Clock,
    /// Every key used, to clean up after.
    keys: Mutex<Vec<String>>,
    /// The actors started for the current variant.
    spawned: Mutex<Vec<(String, u32)>>,
}

impl Lab {
    /// A key for variant `n` of `scenario`, unique to this run.
    fn key(&self, scenario: Scenario, n: usize) -> String {
        let key = format!("lab:{}:{n}:{}", scenario.name(), self.run_id);
        if let Ok(mut keys) = self.keys.lock() {
            keys.push(key.clone());
        }
        key
    }

    fn now() -> u64 {
        boottime_nanos().unwrap_or(0)
    }

    /// Records something the lab itself did (a freeze, a kill): shown in the timeline, ignored
    /// by the checker.
    fn note(&self, text: impl Into<String>) {
        let event = Event::new(
            "lab",
            std::process::id(),
            Self::now(),
            What::Note { text: text.into() },
        );
        if let Ok(mut log) = self.current_log().lock() {
            log.push(event);
        }
    }

    fn current_log(&self) -> Arc<Mutex<Vec<Event>>> {
        self.log.lock().map(|log| log.clone()).unwrap_or_default()
    }

    /// Ends the variant's log and returns its events in time order.
    fn take_events(&self) -> Vec<Event> {
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

    fn take_actors(&self) -> Vec<(String, u32)> {
        self.spawned
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default()
    }

    /// The time of `process`'s latest event that `pick` accepts.
    fn last(&self, process: &str, pick: impl Fn(&What) -> bool) -> Option<Event> {
        let log = self.current_log();
        let log = log.lock().ok()?;
        log.iter()
            .rev()
            .find(|e| e.process == process && pick(&e.what))
            .cloned()
    }

    /// Freezes an actor, the way a GC pause, a VM migration or swapping would: every thread
    /// stops, its renewal task included.
    fn freeze(&self, proc: &Proc, how_long: Duration, renewing: bool) {
        let _ = kill(Pid::from_raw(proc.pid), Signal::SIGSTOP);
        if let Kind::File(dir) = &self.kind {
            // A renewing actor holds the key's flock for a few microseconds every ttl/3; frozen
            // inside that window it would block everyone else until thawed. Never leave it so.
            let stem = lockwise::backend::file::FileBackend::file_stem(&proc.key);
            let path = dir.join(format!("{stem}.lock"));
            for _ in 0..1000 {
                let free = std::fs::File::open(&path).map_or(true, |f| f.try_lock().is_ok());
                if free {
                    break;
                }
                let _ = kill(Pid::from_raw(proc.pid), Signal::SIGCONT);
                std::thread::sleep(Duration::from_millis(1));
                let _ = kill(Pid::from_raw(proc.pid), Signal::SIGSTOP);
            }
        }
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

    fn thaw(&self, proc: &Proc) {
        self.note(format!("{} resumed with SIGCONT", proc.name));
        let _ = kill(Pid::from_raw(proc.pid), Signal::SIGCONT);
    }

    async fn spawn(&self, name: &str, key: &str, extra: &Extra) -> LabResult<Proc> {
        let mut cmd = tokio::process::Command::new(&self.exe);
        cmd.arg("lab-actor")
            .args(["--role", name, "--url", &self.url, "--key", key]);
        if let Some(schema) = &extra.schema {
            cmd.args(["--schema", schema]);
        }
        if let Some(fence) = &extra.fence {
            cmd.args(["--fence", fence]);
        }
        if let Some(url) = &extra.queue_url {
            cmd.args(["--queue-url", url]);
        }
        if std::env::var_os("LOCKWISE_LOG").is_none() {
            cmd.env("LOCKWISE_LOG", "error");
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        crate::child::stop_with_parent(&mut cmd, Signal::SIGKILL);
        let mut child = cmd
            .spawn()
            .map_err(|e| LabError(format!("cannot start actor {name}: {e}")))?;
        let pid = child
            .id()
            .and_then(|p| i32::try_from(p).ok())
            .ok_or_else(|| LabError(format!("actor {name} exited at once")))?;
        if let Ok(mut children) = CHILDREN.lock() {
            children.push(pid);
        }
        if let Ok(mut spawned) = self.spawned.lock() {
            spawned.push((name.to_owned(), pid.unsigned_abs()));
        }
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| LabError("no stdout".into()))?;
        let (tx, rx) = mpsc::unbounded_channel();
        let log = self.current_log();
        let reader = tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(parsed) = serde_json::from_str::<Line>(&line) else {
                    continue;
                };
                if let Line::Event(e) = &parsed
                    && let Ok(mut log) = log.lock()
                {
                    log.push(e.clone());
                }
                let _ = tx.send(parsed);
            }
        });
        let mut proc = Proc {
            name: name.to_owned(),
            key: key.to_owned(),
            pid,
            stdin: child.stdin.take(),
            child,
            rx,
            reader: Some(reader),
        };
        proc.done().await?; // ready: connected to the backend
        Ok(proc)
    }

    /// Runs one scenario and reports it.
    async fn scenario(&self, scenario: Scenario) -> Report {
        let mut report = Report {
            scenario,
            backend: self.kind.name().to_owned(),
            not_run: None,
            variants: Vec::new(),
        };
        if let Some(reason) = self.not_applicable(scenario) {
            report.not_run = Some(reason);
            return report;
        }
        let result = match scenario {
            Scenario::Expiry => scenarios::expiry(self, &mut report.variants).await,
            Scenario::UnsafeRelease => scenarios::unsafe_release(self, &mut report.variants).await,
            Scenario::CheckThenDelete => {
                scenarios::check_then_delete(self, &mut report.variants).await
            }
            Scenario::Fencing => scenarios::fencing(self, &mut report.variants).await,
            Scenario::QueueCrash => scenarios::queue_crash(self, &mut report).await,
        };
        if let Err(e) = result {
            kill_children();
            let events = self.take_events();
            report.variants.push(Variant {
                name: "(stopped)".into(),
                predicts: String::new(),
                verdict: check(&events),
                events,
                outcome: Err(format!("the scenario could not finish: {e}")),
                remarks: Vec::new(),
                actors: self.take_actors(),
            });
        }
        report
    }

    fn not_applicable(&self, scenario: Scenario) -> Option<String> {
        let session = matches!(self.kind, Kind::Postgres(_) | Kind::Mysql);
        match scenario {
            Scenario::UnsafeRelease | Scenario::CheckThenDelete if session => Some(format!(
                "not applicable on {}: its locks belong to a database session, and no other \
                 session can release them, so this mistake cannot be made there",
                self.kind.name()
            )),
            _ => None,
        }
    }

    /// Finishes a variant: waits for the actors to exit, then checks what they recorded.
    async fn conclude(
        &self,
        procs: Vec<Proc>,
        name: &str,
        predicts: &str,
        judge: impl FnOnce(&[Event], &Verdict) -> (Result<String, String>, Vec<String>),
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

    /// Removes what the run left on the backend: best effort, a failure only leaves keys
    /// named `lab:*` behind.
    async fn clean_up(&self) {
        remove_scratch();
        let keys: Vec<String> = self.keys.lock().map(|k| k.clone()).unwrap_or_default();
        match &self.kind {
            Kind::Redis(url) => {
                let Ok(backend) = lockwise::backend::redis::RedisBackend::connect(url).await else {
                    return;
                };
                let Ok(client) = redis::Client::open(url.as_str()) else {
                    return;
                };
                let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
                    return;
                };
                for key in keys {
                    let _: Result<(), _> = redis::cmd("DEL")
                        .arg(backend.lock_name(&key))
                        .arg(backend.fence_name(&key))
                        .arg(backend.fenced_name(&key))
                        .query_async(&mut conn)
                        .await;
                }
            }
            Kind::Postgres(url) => {
                if let (Some(schema), Ok(pool)) = (
                    self.pg_schema(),
                    sqlx::postgres::PgPoolOptions::new()
                        .max_connections(1)
                        .connect(url)
                        .await,
                ) {
                    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                        "DROP SCHEMA IF EXISTS {schema} CASCADE"
                    )))
                    .execute(&pool)
                    .await;
                }
            }
            Kind::File(dir) => {
                for key in keys {
                    let stem = lockwise::backend::file::FileBackend::file_stem(&key);
                    for ext in ["lock", "lease", "fence", "tmp"] {
                        let _ = std::fs::remove_file(dir.join(format!("{stem}.{ext}")));
                    }
                }
            }
            Kind::Mysql => {}
        }
    }
}

/// One actor process.
struct Proc {
    name: String,
    key: String,
    pid: i32,
    child: Child,
    stdin: Option<ChildStdin>,
    rx: mpsc::UnboundedReceiver<Line>,
    reader: Option<tokio::task::JoinHandle<()>>,
}

/// Longest wait for an actor's answer; a pause is never longer than 120 s.
const ANSWER_WITHIN: Duration = Duration::from_secs(180);

impl Proc {
    async fn send(&mut self, op: &Op) -> LabResult<()> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| LabError(format!("{} is closed", self.name)))?;
        let mut line = serde_json::to_string(op)?;
        line.push('\n');
        stdin
            .write_all(line.as_bytes())
            .await
            .map_err(|e| LabError(format!("{} is gone: {e}", self.name)))?;
        stdin.flush().await?;
        Ok(())
    }

    /// Waits for the answer to the last op.
    async fn done(&mut self) -> LabResult<()> {
        let name = self.name.clone();
        let wait = async {
            loop {
                match self.rx.recv().await {
                    Some(Line::Done) => return Ok(()),
                    Some(Line::Failed(e)) => return Err(LabError(format!("{name}: {e}"))),
                    Some(Line::Event(_)) => {}
                    None => return Err(LabError(format!("{name} exited unexpectedly"))),
                }
            }
        };
        tokio::time::timeout(ANSWER_WITHIN, wait)
            .await
            .map_err(|_| LabError(format!("{} did not answer", self.name)))?
    }

    async fn call(&mut self, op: Op) -> LabResult<()> {
        self.send(&op).await?;
        self.done().await
    }

    /// Ends the work and releases the lock with the owner token.
    async fn end_work(&mut self) -> LabResult<()> {
        self.call(Op::Exit).await?;
        self.call(Op::Release {
            how: proto::How::Token,
        })
        .await
    }

    /// Waits for an event of this actor that `pick` accepts.
    async fn wait_for(&mut self, pick: impl Fn(&What) -> bool) -> LabResult<Event> {
        let name = self.name.clone();
        let wait = async {
            loop {
                match self.rx.recv().await {
                    Some(Line::Event(e)) if pick(&e.what) => return Ok(e),
                    Some(Line::Failed(e)) => return Err(LabError(format!("{name}: {e}"))),
                    Some(_) => {}
                    None => return Err(LabError(format!("{name} exited unexpectedly"))),
                }
            }
        };
        tokio::time::timeout(ANSWER_WITHIN, wait)
            .await
            .map_err(|_| LabError(format!("{} never did what was expected", self.name)))?
    }

    fn kill(&self) {
        let _ = kill(Pid::from_raw(self.pid), Signal::SIGKILL);
    }

    /// Closes stdin (the actor exits), waits for it and for the last of its events.
    async fn finish(mut self) {
        drop(self.stdin.take());
        let _ = kill(Pid::from_raw(self.pid), Signal::SIGCONT);
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.start_kill();
            let _ = self.child.wait().await;
        }
        if let Some(reader) = self.reader.take() {
            let _ = reader.await;
        }
    }
}

impl Drop for Proc {
    /// `kill_on_drop` kills and reaps the child; forget its pid first, so that no later
    /// signal can reach a process that reused it.
    fn drop(&mut self) {
        if let Ok(mut children) = CHILDREN.lock() {
            children.retain(|p| *p != self.pid);
        }
    }
}
