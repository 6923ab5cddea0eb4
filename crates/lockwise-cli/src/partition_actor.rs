//! `lockwise partition-actor` (hidden): one member process of a partition group for the
//! tests and the lab. It works on each key it owns (one fenced write with the generation when
//! it starts the key, then nothing until the key is lost), and prints one line per event on
//! stdout:
//!
//! - `E <history event JSON>`: Enter/Exit of a key's work and every fenced Write, stamped on
//!   `CLOCK_BOOTTIME` (see `lockwise_bench::history`);
//! - `A <assignment JSON>`: `{"generation", "settled", "members", "owned": [key indexes]}` on
//!   every assignment change.
//!
//! When its membership is lost it makes the writes it would have had in flight — one per key
//! it was working on, with that key's generation — prints them, and exits 70: what a process
//! frozen in the middle of its writes does when it wakes. The fence must reject them.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use lockwise::partition::{Group, MemberOptions};
use lockwise::url::BackendUrl;
use lockwise::{Error, FencingToken};
use lockwise_bench::history::{Event, What};

use crate::exit;
use crate::lab::fenced_file::FencedFile;

/// Internal: one member process of a partition group (tests, lab).
#[derive(Debug, Args)]
pub(crate) struct ActorArgs {
    /// file://, redis:// or postgres:// URL (the lab passes it in the environment, where `ps`
    /// does not show a password)
    #[arg(long, env = "LOCKWISE_PARTITION_ACTOR_URL", hide_env_values = true)]
    url: String,
    /// The group
    #[arg(long)]
    group: String,
    /// This member's id
    #[arg(long)]
    id: String,
    /// Key space: keys "0" to "N-1"
    #[arg(long, default_value_t = 1000)]
    keys: u32,
    /// The member lease
    #[arg(long, default_value = "1s", value_parser = crate::duration::parse)]
    ttl: Duration,
    /// PostgreSQL: the schema of the fences (default `lockwise`)
    #[arg(long)]
    schema: Option<String>,
    /// etcd: the directory of the fenced files (etcd holds no fenced value of its own)
    #[arg(long)]
    fence_dir: Option<std::path::PathBuf>,
}

/// The fenced file of `resource` in the lock directory `dir`.
pub(crate) fn fenced_file(dir: &std::path::Path, resource: &str) -> FencedFile {
    FencedFile::new(dir.join(format!("fenced-{}", resource.replace('/', "_"))))
}

/// Where the fenced writes go: the Redis fenced value, the PostgreSQL fence row or a fenced
/// file of `<group>/key/<k>` (in the lock directory, or `--fence-dir` on etcd).
#[derive(Clone)]
enum Fence {
    Redis(lockwise::backend::redis::RedisBackend),
    Postgres(lockwise_bench::lab::Fence),
    /// A fenced file per resource in the lock directory (the lab's).
    File(std::path::PathBuf),
}

impl Fence {
    async fn open(
        url: &str,
        schema: Option<&str>,
        fence_dir: Option<&std::path::Path>,
    ) -> lockwise::Result<Fence> {
        Ok(match BackendUrl::parse(url)? {
            BackendUrl::Redis(url) => {
                Fence::Redis(lockwise::backend::redis::RedisBackend::connect(&url).await?)
            }
            BackendUrl::Postgres(url) => {
                let fence = lockwise_bench::lab::Fence::open(&url, schema, 4)
                    .await
                    .map_err(into_lockwise)?;
                Fence::Postgres(fence)
            }
            BackendUrl::File(dir) => Fence::File(dir),
            BackendUrl::Etcd(_) => match fence_dir {
                Some(dir) => Fence::File(dir.to_owned()),
                None => {
                    return Err(Error::InvalidConfig {
                        reason: "partition-actor on etcd needs --fence-dir".into(),
                    });
                }
            },
            _ => {
                return Err(Error::InvalidConfig {
                    reason: "partition-actor needs file://, redis://, postgres:// or etcd://"
                        .into(),
                });
            }
        })
    }

    /// Whether the resource accepted the write.
    async fn write(
        &self,
        resource: &str,
        value: &str,
        token: FencingToken,
    ) -> lockwise::Result<bool> {
        let done = match self {
            Fence::File(dir) => {
                // The write waits for the file's flock, which a frozen writer may hold until it
                // is thawed: on a blocking thread, so that the member's own work (renewals,
                // roster, other keys) goes on meanwhile.
                let (file, value) = (fenced_file(dir, resource), value.to_owned());
                let written = tokio::task::spawn_blocking(move || file.write(&value, token.get()))
                    .await
                    .map_err(std::io::Error::other)
                    .and_then(|written| written);
                return written.map_err(|e| Error::Backend {
                    backend: "file",
                    message: format!("fenced write of {resource:?} failed: {e}"),
                    source: None,
                });
            }
            Fence::Redis(redis) => redis.fenced_set(resource, value.as_bytes(), token).await,
            Fence::Postgres(fence) => {
                return fence.write(resource, token).await.map_err(into_lockwise);
            }
        };
        match done {
            Ok(()) => Ok(true),
            Err(Error::StaleToken { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// The tooling's error as lockwise's: what lockwise said as it was, the rest as a backend
/// failure of PostgreSQL (the one database the fence is on).
fn into_lockwise(e: lockwise_bench::Error) -> Error {
    match e {
        lockwise_bench::Error::Lockwise(e) => e,
        lockwise_bench::Error::Config(reason) => Error::InvalidConfig { reason },
        e => Error::Backend {
            backend: "postgres",
            message: e.to_string(),
            source: Some(Box::new(e)),
        },
    }
}

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn now() -> u64 {
    lockwise::lease::boottime_nanos().unwrap_or(0)
}

fn event(id: &str, what: What) {
    event_at(id, now(), what);
}

/// `W <json>`: a fenced write with the moments it was issued and answered, so that a checker
/// can tell a stale write (issued after a higher token's write was answered) from two writes
/// whose order at the resource the stamps cannot tell (the higher one still in flight, e.g.
/// waiting for a pooled connection, when the lower one was issued).
fn timed_write(resource: &str, token: u64, accepted: bool, issued: u64) {
    let line = serde_json::json!({
        "resource": resource,
        "token": token,
        "accepted": accepted,
        "issued": issued,
        "answered": now(),
    });
    say(format!("W {line}"));
}

/// An event stamped `at`: a write is stamped when it was issued, which orders it right
/// against the other members' writes (a member frozen between issuing a write and reporting
/// it would otherwise report, late, a write the resource accepted before the handoff).
fn event_at(id: &str, at: u64, what: What) {
    let event = Event::new(id, std::process::id(), at, what);
    if let Ok(json) = serde_json::to_string(&event) {
        say(format!("E {json}"));
    }
}

pub(crate) async fn run(args: ActorArgs) -> u8 {
    match actor(args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("lockwise partition-actor: {e}");
            exit::BACKEND
        }
    }
}

async fn actor(args: ActorArgs) -> lockwise::Result<u8> {
    let fence = Fence::open(&args.url, args.schema.as_deref(), args.fence_dir.as_deref()).await?;
    let group = Group::connect(&args.url, &args.group).await?;
    let member = group
        .join(&MemberOptions::ttl(args.ttl).id(&args.id))
        .await?;
    let keys: Vec<String> = (0..args.keys).map(|k| k.to_string()).collect();
    // The keys being worked on, with the generation each started in.
    let working: Arc<Mutex<BTreeMap<String, FencingToken>>> = Arc::default();
    let mut changes = member.assignment();
    let report = {
        let keys = keys.clone();
        async move {
            loop {
                let a = changes.borrow_and_update().clone();
                let owned: Vec<u32> = keys
                    .iter()
                    .filter(|k| a.owns(k))
                    .filter_map(|k| k.parse().ok())
                    .collect();
                say(format!(
                    "A {}",
                    serde_json::json!({
                        "generation": a.generation.get(),
                        "settled": a.settled,
                        "lost": a.lost,
                        "members": a.members.len(),
                        "owned": owned,
                    })
                ));
                if changes.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        }
    };
    let prefix = args.group.clone();
    let id = args.id.clone();
    let work = member.run(keys, |key, generation| {
        let (fence, working, id, resource) = (
            fence.clone(),
            working.clone(),
            id.clone(),
            format!("{prefix}/key/{key}"),
        );
        async move {
            event(
                &id,
                What::Enter {
                    resource: resource.clone(),
                },
            );
            working
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(key.clone(), generation);
            // Exit is recorded when the handler is dropped (the key was lost).
            let _exit = OnDrop(Some(Box::new({
                let (id, resource, working, key) =
                    (id.clone(), resource.clone(), working.clone(), key.clone());
                move || {
                    event(&id, What::Exit { resource });
                    working
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .remove(&key);
                }
            })));
            let issued = now();
            match fence.write(&resource, &id, generation).await {
                Ok(accepted) => {
                    timed_write(&resource, generation.get(), accepted, issued);
                    event_at(
                        &id,
                        issued,
                        What::Write {
                            resource,
                            token: generation.get(),
                            accepted,
                        },
                    )
                }
                Err(e) => eprintln!("lockwise partition-actor: write failed: {e}"),
            }
            std::future::pending::<()>().await;
        }
    });
    // The keys in flight when the membership is lost, kept before the handlers are dropped.
    let in_flight = working.clone();
    let snapshot = Arc::new(Mutex::new(BTreeMap::new()));
    let keep = snapshot.clone();
    let watch_loss = async {
        let mut changes = member.assignment();
        loop {
            {
                let a = changes.borrow_and_update();
                if a.lost {
                    break;
                }
            }
            let now = in_flight
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            *keep
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = now;
            tokio::select! {
                _ = changes.changed() => {}
                () = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
        }
    };
    tokio::select! {
        () = report => {}
        result = work => {
            if let Err(e) = result && !matches!(e, Error::LockLost { .. }) {
                return Err(e);
            }
        }
        () = watch_loss => {}
    }
    // Lost: the writes a process frozen mid-way would make when it wakes.
    let late = snapshot
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    for (key, generation) in late {
        let resource = format!("{}/key/{key}", args.group);
        let issued = now();
        let accepted = fence.write(&resource, &args.id, generation).await?;
        timed_write(&resource, generation.get(), accepted, issued);
        event_at(
            &args.id,
            issued,
            What::Write {
                resource,
                token: generation.get(),
                accepted,
            },
        );
    }
    Ok(exit::LOST)
}

struct OnDrop(Option<Box<dyn FnOnce() + Send>>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}
