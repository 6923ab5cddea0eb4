//! `lockwise lab-actor`: one process of a lab scenario. It takes [`Op`]s on stdin, does them
//! with the real library against the real backend, and reports every event it lives, stamped
//! with its own pid and `CLOCK_BOOTTIME`.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lockwise::backend::Attempt;
use lockwise::backend::file::FileBackend;
use lockwise::backend::postgres::PostgresBackend;
use lockwise::backend::redis::RedisBackend;
use lockwise::lease::boottime_nanos;
use lockwise::queue::{Job, JobId, Queue};
use lockwise::url::BackendUrl;
use lockwise::{Error, FencingToken, Guard, LockOptions, Locker, OwnerToken, Retry};
use lockwise_bench::history::{Event, What};
use lockwise_bench::lab::{Database, Effects, FencedData};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::fenced_file::FencedFile;
use super::proto::{How, Line, Op, Race};
use crate::exit;

/// Arguments of the hidden `lab-actor` subcommand.
#[derive(Debug, clap::Args)]
pub(crate) struct ActorArgs {
    /// The actor's role in the scenario (A, B, C, W1, …).
    #[arg(long)]
    role: String,
    /// The lock backend (from the environment, so that no password shows in `ps`).
    #[arg(long, env = "LOCKWISE_LAB_ACTOR_URL", hide_env_values = true)]
    url: String,
    /// The lock's key (also the fenced resource's name).
    #[arg(long)]
    key: String,
    /// PostgreSQL schema for locks, fence and queue.
    #[arg(long)]
    schema: Option<String>,
    /// The fenced resource: `file:<path>`, `redis` or `postgres`.
    #[arg(long)]
    fence: Option<String>,
    /// The queue's PostgreSQL URL (from the environment, like `--url`).
    #[arg(long, env = "LOCKWISE_LAB_ACTOR_QUEUE_URL", hide_env_values = true)]
    queue_url: Option<String>,
}

/// Runs one actor until its stdin closes.
pub(crate) async fn run(args: ActorArgs) -> u8 {
    let mut actor = match Actor::new(args).await {
        Ok(actor) => actor,
        Err(e) => {
            emit(&Line::Failed(e.to_string()));
            return exit::BACKEND;
        }
    };
    emit(&Line::Done); // ready
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let reply = match serde_json::from_str::<Op>(&line) {
            Ok(op) => match actor.apply(op).await {
                Ok(()) => Line::Done,
                Err(e) => Line::Failed(e.to_string()),
            },
            Err(e) => Line::Failed(format!("not an op: {e}")),
        };
        emit(&reply);
    }
    actor.quiet();
    0
}

/// The backend as a concrete type, for the wrong-way releases the `Backend` trait (rightly)
/// does not offer.
enum Raw {
    File(FileBackend),
    Redis(RedisBackend),
    #[cfg(feature = "etcd")]
    Etcd(lockwise::backend::etcd::EtcdBackend),
    /// Session locks (PostgreSQL, MariaDB): no other session can delete them.
    Session,
}

enum Fence {
    File(FencedFile),
    Redis(RedisBackend),
    Postgres(FencedData),
}

/// A grant held through a `Guard`, a switch that silences its lost-signal report once the
/// actor lets go of it on purpose, and whether that report was made.
struct Held {
    guard: Guard,
    letting_go: Arc<AtomicBool>,
    reported: Arc<AtomicBool>,
}

struct Actor {
    role: String,
    key: String,
    locker: Locker,
    raw: Raw,
    fence: Option<Fence>,
    queue: Option<(Queue, Effects)>,
    held: Option<Held>,
    /// A grant made with one bare backend call (no guard).
    bare: Option<(OwnerToken, FencingToken)>,
    /// What the last ownership check said.
    proceed: Option<bool>,
    /// Inside the critical section (an `Exit` is only reported after an `Enter`).
    inside: bool,
}

type AnyResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

impl Actor {
    async fn new(args: ActorArgs) -> AnyResult<Self> {
        let (locker, raw) = match BackendUrl::parse(&args.url)? {
            BackendUrl::File(dir) => {
                let b = FileBackend::open(dir)?;
                (Locker::new(b.clone()), Raw::File(b))
            }
            BackendUrl::Redis(url) => {
                let b = RedisBackend::connect(&url).await?;
                (Locker::new(b.clone()), Raw::Redis(b))
            }
            BackendUrl::Postgres(url) => {
                let mut builder = PostgresBackend::builder(url);
                if let Some(schema) = &args.schema {
                    builder = builder.schema(schema.clone());
                }
                (Locker::new(builder.connect().await?), Raw::Session)
            }
            #[cfg(feature = "etcd")]
            BackendUrl::Etcd(url) => {
                let b = lockwise::backend::etcd::EtcdBackend::connect(&url).await?;
                (Locker::new(b.clone()), Raw::Etcd(b))
            }
            _ => (Locker::connect(&args.url).await?, Raw::Session),
        };
        let fence = match args.fence.as_deref() {
            None => None,
            Some("redis") => match &raw {
                Raw::Redis(b) => Some(Fence::Redis(b.clone())),
                _ => return Err("a Redis fence needs a Redis lock url".into()),
            },
            Some("postgres") => {
                let schema = args
                    .schema
                    .clone()
                    .ok_or("a PostgreSQL fence needs --schema")?;
                let db = database(&args.url, &schema).await?;
                Some(Fence::Postgres(db.fenced_data()?))
            }
            Some(other) => match other.strip_prefix("file:") {
                Some(path) => Some(Fence::File(FencedFile::new(PathBuf::from(path)))),
                None => return Err(format!("unknown fence {other:?}").into()),
            },
        };
        let queue = match (&args.queue_url, &args.schema) {
            (Some(url), Some(schema)) => {
                let db = database(url, schema).await?;
                Some((db.queue("lab")?, db.effects()))
            }
            _ => None,
        };
        Ok(Actor {
            role: args.role,
            key: args.key,
            locker,
            raw,
            fence,
            queue,
            held: None,
            bare: None,
            proceed: None,
            inside: false,
        })
    }

    fn event(&self, what: What) {
        emit(&Line::Event(stamp(&self.role, what)));
    }

    fn resource(&self) -> String {
        self.key.clone()
    }

    async fn apply(&mut self, op: Op) -> AnyResult<()> {
        match op {
            Op::Acquire {
                ttl_ms,
                renew,
                wait_ms,
            } => {
                let mut opts = LockOptions::ttl(Duration::from_millis(ttl_ms)).renew(renew);
                if wait_ms > 0 {
                    opts = opts
                        .wait(Duration::from_millis(wait_ms))
                        .retry(Retry::linear(Duration::from_millis(10)));
                }
                let guard = if wait_ms > 0 {
                    match self.locker.acquire(&self.key, &opts).await {
                        Ok(guard) => Some(guard),
                        Err(Error::WaitTimeout { .. }) => None,
                        Err(e) => return Err(e.into()),
                    }
                } else {
                    self.locker.try_acquire(&self.key, &opts).await?
                };
                self.granted(guard);
            }
            Op::RawAcquire { ttl_ms } => {
                let owner = OwnerToken::random();
                let ttl = Duration::from_millis(ttl_ms);
                match self
                    .locker
                    .backend()
                    .try_acquire(&self.key, owner, ttl)
                    .await?
                {
                    Attempt::Granted(token) => {
                        self.bare = Some((owner, token));
                        self.event(What::Acquired {
                            resource: self.resource(),
                            token: Some(token.get()),
                            owner: Some(owner.to_hex()),
                        });
                    }
                    _ => self.event(What::Refused {
                        resource: self.resource(),
                    }),
                }
            }
            Op::Check => {
                let held = match &self.held {
                    Some(held) => held.guard.is_held().await?,
                    None => false,
                };
                self.proceed = Some(held);
                self.event(What::Checked {
                    resource: self.resource(),
                    held,
                });
            }
            Op::Enter => {
                let holding = self.held.is_some() || self.bare.is_some();
                if self.proceed.take() == Some(false) || !holding {
                    self.event(What::Aborted {
                        resource: self.resource(),
                    });
                } else {
                    if self.held.as_ref().is_some_and(|h| h.guard.is_lost()) {
                        self.event(What::Note {
                            text: "(its guard already knows the lease ran out; this code does \
                                   not look: it checked nothing after the pause)"
                                .into(),
                        });
                    }
                    self.inside = true;
                    self.event(What::Enter {
                        resource: self.resource(),
                    });
                }
            }
            Op::Exit => {
                if std::mem::take(&mut self.inside) {
                    self.event(What::Exit {
                        resource: self.resource(),
                    });
                }
            }
            Op::Write { value } => self.write(&value).await?,
            Op::Read => {
                let found = self.read().await?;
                self.event(What::Read {
                    resource: self.resource(),
                    found,
                });
            }
            Op::Release { how } => self.release(how).await?,
            Op::RaceRelease { at, delay_us, how } => self.race_release(at, delay_us, how).await?,
            Op::Grab { from, until } => {
                sleep_until(from).await;
                let opts = LockOptions::ttl(Duration::from_secs(5));
                loop {
                    if let Some(guard) = self.locker.try_acquire(&self.key, &opts).await? {
                        self.granted(Some(guard));
                        break;
                    }
                    if boottime_nanos()? >= until {
                        self.granted(None);
                        break;
                    }
                    tokio::task::yield_now().await;
                }
            }
            Op::Enqueue { jobs, max_attempts } => {
                let (queue, _) = self.queue.as_ref().ok_or("no queue")?;
                let ids = queue
                    .enqueue_many((0..jobs).map(|n| {
                        Job::new(serde_json::json!({ "n": n })).max_attempts(max_attempts)
                    }))
                    .await?;
                for id in ids {
                    self.event(What::JobEnqueued {
                        job: id.0.to_string(),
                    });
                }
            }
            Op::Work {
                batch,
                lease_ms,
                job_ms,
            } => self.work(batch, lease_ms, job_ms).await?,
        }
        Ok(())
    }

    fn granted(&mut self, guard: Option<Guard>) {
        self.quiet();
        let Some(guard) = guard else {
            self.event(What::Refused {
                resource: self.resource(),
            });
            return;
        };
        self.event(What::Acquired {
            resource: self.resource(),
            token: Some(guard.token().get()),
            owner: Some(guard.owner().to_hex()),
        });
        let letting_go = Arc::new(AtomicBool::new(false));
        let reported = Arc::new(AtomicBool::new(false));
        let lost = guard.lost_token();
        let (quiet, done) = (letting_go.clone(), reported.clone());
        let (role, resource) = (self.role.clone(), self.resource());
        tokio::spawn(async move {
            lost.cancelled().await;
            if !quiet.load(Ordering::SeqCst) && !done.swap(true, Ordering::SeqCst) {
                emit(&Line::Event(stamp(&role, What::Lost { resource })));
            }
        });
        self.held = Some(Held {
            guard,
            letting_go,
            reported,
        });
    }

    /// Lets go of the grant. A lost signal that fired before is reported first (the watcher
    /// task may not have run yet); the one the release or drop itself fires is not.
    fn quiet(&mut self) -> Option<Guard> {
        let held = self.held.take()?;
        if held.guard.is_lost() && !held.reported.swap(true, Ordering::SeqCst) {
            self.event(What::Lost {
                resource: self.resource(),
            });
        }
        held.letting_go.store(true, Ordering::SeqCst);
        Some(held.guard)
    }

    async fn write(&mut self, value: &str) -> AnyResult<()> {
        let token = match (&self.held, self.bare) {
            (Some(held), _) => held.guard.token(),
            (None, Some((_, token))) => token,
            (None, None) => return Err("write without a grant".into()),
        };
        let resource = self.resource();
        let accepted = match self.fence.as_ref().ok_or("no fenced resource")? {
            Fence::File(file) => {
                let file = file.clone();
                let value = value.to_owned();
                tokio::task::spawn_blocking(move || file.write(&value, token.get())).await??
            }
            Fence::Redis(b) => match b.fenced_set(&resource, value.as_bytes(), token).await {
                Ok(()) => true,
                Err(Error::StaleToken { .. }) => false,
                Err(e) => return Err(e.into()),
            },
            Fence::Postgres(data) => data.write(&resource, value, token).await?,
        };
        self.event(What::Write {
            resource,
            token: token.get(),
            accepted,
        });
        Ok(())
    }

    async fn read(&self) -> AnyResult<Option<(String, u64)>> {
        let resource = self.resource();
        Ok(match self.fence.as_ref().ok_or("no fenced resource")? {
            Fence::File(file) => file.read()?.map(|s| (s.value, s.token)),
            Fence::Redis(b) => b
                .fenced_get(&resource)
                .await?
                .map(|(v, t)| (String::from_utf8_lossy(&v).into_owned(), t.get())),
            Fence::Postgres(data) => data.read(&resource).await?,
        })
    }

    async fn release(&mut self, how: How) -> AnyResult<()> {
        let removed = match how {
            How::Token => match (self.quiet(), self.bare.take()) {
                (Some(guard), _) => {
                    let owner = guard.owner();
                    guard.release().await?.then_some(owner)
                }
                (None, Some((owner, _))) => self
                    .locker
                    .backend()
                    .release(&self.key, owner)
                    .await?
                    .then_some(owner),
                // Nothing was granted (the acquire was refused): nothing to release.
                (None, None) => return Ok(()),
            },
            How::Del => {
                self.event(What::Note {
                    text: "releases with a plain DEL, no owner check (THE WRONG WAY)".into(),
                });
                let removed = self.unchecked_delete().await?;
                // The guard's own compare-and-delete on drop finds nothing of its own left.
                drop(self.quiet());
                self.bare = None;
                removed
            }
        };
        self.event(What::Released {
            resource: self.resource(),
            removed: removed.map(OwnerToken::to_hex),
        });
        Ok(())
    }

    async fn unchecked_delete(&self) -> AnyResult<Option<OwnerToken>> {
        Ok(match &self.raw {
            Raw::File(b) => b.unchecked_delete(&self.key).await?,
            Raw::Redis(b) => b.unchecked_delete(&self.key).await?,
            #[cfg(feature = "etcd")]
            Raw::Etcd(b) => b.unchecked_delete(&self.key).await?,
            Raw::Session => return Err(NO_DEL.into()),
        })
    }

    async fn race_release(&mut self, at: u64, delay_us: u64, how: Race) -> AnyResult<()> {
        let (owner, _) = self.bare.take().ok_or("race release without a grant")?;
        let delay = Duration::from_micros(delay_us);
        sleep_until(at).await;
        let removed = match how {
            Race::TwoCommands => {
                let current = match &self.raw {
                    Raw::File(b) => b.unchecked_owner(&self.key).await?,
                    Raw::Redis(b) => b.unchecked_owner(&self.key).await?,
                    #[cfg(feature = "etcd")]
                    Raw::Etcd(b) => b.unchecked_owner(&self.key).await?,
                    Raw::Session => return Err(NO_DEL.into()),
                };
                let mine = current == Some(owner);
                self.event(What::Note {
                    text: if mine {
                        format!("GET returns its own token; the DEL follows {delay:?} later")
                    } else {
                        "GET: the lock is not its own any more; nothing to delete".into()
                    },
                });
                if !mine {
                    return Ok(());
                }
                tokio::time::sleep(delay).await;
                self.unchecked_delete().await?
            }
            Race::Script => {
                // Issued when the two-command version would send its DEL.
                tokio::time::sleep(delay).await;
                self.event(What::Note {
                    text: "releases with the compare-and-delete script (one atomic step)".into(),
                });
                let released = self.locker.backend().release(&self.key, owner).await?;
                released.then_some(owner)
            }
        };
        self.event(What::Released {
            resource: self.resource(),
            removed: removed.map(OwnerToken::to_hex),
        });
        Ok(())
    }

    async fn work(&mut self, batch: u32, lease_ms: u64, job_ms: u64) -> AnyResult<()> {
        let (queue, effects) = self.queue.as_ref().ok_or("no queue")?;
        let lease = Duration::from_millis(lease_ms);
        loop {
            let claimed = queue
                .protocol()
                .claim(&self.role, batch as usize, lease, &[])
                .await?;
            if claimed.is_empty() {
                let rescued = queue.protocol().reap().await?;
                if rescued > 0 {
                    self.event(What::Note {
                        text: format!(
                            "reaper: {rescued} job(s) whose lease expired are ready again"
                        ),
                    });
                }
                let stats = queue.stats().await?;
                if stats.unfinished() == 0 {
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            // Run only what the store knows we received: a claim whose reply is lost is not
            // counted as an attempt.
            let pairs: Vec<_> = claimed.iter().map(|j| (j.id, j.attempt)).collect();
            let confirmed = queue.protocol().confirm_started(&pairs).await?;
            let claimed: Vec<_> = claimed
                .into_iter()
                .filter(|j| confirmed.contains(&j.id))
                .collect();
            let ids: Vec<String> = claimed.iter().map(|j| j.id.0.to_string()).collect();
            self.event(What::Note {
                text: format!(
                    "claims job(s) {} with one UPDATE … FOR UPDATE SKIP LOCKED, leased for {}",
                    ids.join(", "),
                    humantime::format_duration(lease)
                ),
            });
            for job in claimed {
                let id = job.id.0.to_string();
                self.event(What::JobAttempt {
                    job: id.clone(),
                    attempt: u32::try_from(job.attempt).unwrap_or(0),
                    max_attempts: u32::try_from(job.max_attempts).unwrap_or(0),
                });
                tokio::time::sleep(Duration::from_millis(job_ms)).await;
                // The effect is idempotent: a unique key, not a lock, makes it happen once.
                if effects.record(job.id.0, &self.role).await? {
                    self.event(What::JobEffect { job: id });
                } else {
                    self.event(What::Note {
                        text: format!("job {id}: effect already there (unique key), skipped"),
                    });
                }
                queue
                    .protocol()
                    .complete(&[(JobId(job.id.0), job.attempt)])
                    .await?;
            }
        }
    }
}

const NO_DEL: &str = "session locks cannot be deleted by another session: no wrong way here";

/// The lab's scratch schema on `url`, through a pool of two connections.
async fn database(url: &str, schema: &str) -> AnyResult<Database> {
    Ok(Database::connect(url, schema, 2, Duration::from_secs(5)).await?)
}

/// Sleeps until `at` on `CLOCK_BOOTTIME`.
pub(crate) async fn sleep_until(at: u64) {
    if let Ok(now) = boottime_nanos()
        && at > now
    {
        tokio::time::sleep(Duration::from_nanos(at - now)).await;
    }
}

fn stamp(role: &str, what: What) -> Event {
    Event::new(
        role,
        std::process::id(),
        boottime_nanos().unwrap_or(0),
        what,
    )
}

fn emit(line: &Line) {
    if let Ok(text) = serde_json::to_string(line) {
        let mut out = std::io::stdout().lock();
        // The lab reads these; if it is gone there is no one to tell.
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }
}
