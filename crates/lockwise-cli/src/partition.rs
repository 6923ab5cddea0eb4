//! `lockwise partition`: join a partition group and run a command over this member's keys,
//! restarting it on every generation change — the partitioning analogue of `lockwise run`.

use std::ffi::OsString;
use std::io;
use std::time::Duration;

use lockwise::partition::{Group, KeyHold, Member, MemberOptions};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::{Instant, sleep};

use crate::exit::Failure;
use crate::{duration, exit};

const EXIT_CODES: &str = "\
Exit codes:
  the command's own    it exited by itself (128+N if signal N killed it); lockwise leaves the group
  126, 127             the command could not be executed / was not found
  64                   usage error: arguments, group, id, TTL or URL; --keys 0; --keys other than
                       the group's (its first member's)
  69                   backend failure: refused, authentication, TLS, protocol, timeout
  70                   the membership was lost (the lease ran out): the command got SIGKILL
  75                   member id in use: a live member of the group has this --id
  128+N                lockwise got signal N (SIGINT, SIGTERM, SIGHUP): the command got it too,
                       then lockwise left the group

The command gets LOCKWISE_GROUP, LOCKWISE_MEMBER, LOCKWISE_GENERATION and LOCKWISE_KEYS (the
owned key indexes among 0..N-1, comma-separated) in its environment. It starts only once its
generation is settled (every live member stopped the work on the keys it lost), and on every
generation change it gets SIGTERM (SIGKILL after --kill-after) and starts again with its new
keys. Pass LOCKWISE_GENERATION as the fencing token of your writes: a member frozen past its
lease keeps running until it wakes, and only the fence stops its late writes.";

/// Run a command over this member's keys of a partition group, restarting it on every
/// generation change.
#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub(crate) struct PartitionArgs {
    /// The group's server: file:///dir (processes on one machine), redis://…, postgres://… or
    /// mysql://…
    #[arg(long, env = "LOCKWISE_URL", hide_env_values = true, value_name = "URL")]
    url: String,
    /// The group's name
    #[arg(long, value_name = "G")]
    group: String,
    /// The key space: keys 0 to N-1 (at least 1). The group stores its first member's N and
    /// refuses a member with another
    #[arg(long, default_value_t = 1000, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    keys: u32,
    /// This member's id [default: the process id and a random suffix]
    #[arg(long, value_name = "ID")]
    id: Option<String>,
    /// The membership lease (100ms to 24h), renewed every TTL/3
    #[arg(long, default_value = "10s", value_parser = duration::parse, value_name = "DURATION")]
    ttl: Duration,
    /// How long the command has between SIGTERM and SIGKILL when its keys change
    #[arg(long, default_value = "5s", value_parser = duration::parse, value_name = "DURATION")]
    kill_after: Duration,
    /// The command and its arguments
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

impl PartitionArgs {
    /// The URL, for `--password-file`.
    pub(crate) fn urls_mut(&mut self) -> Vec<&mut String> {
        vec![&mut self.url]
    }
}

pub(crate) async fn run(args: PartitionArgs) -> u8 {
    match partition(args).await {
        Ok(code) => code,
        Err(failure) => failure.report(),
    }
}

/// Why the command stopped.
enum Stop {
    /// A new generation: start again.
    Generation,
    /// The membership is gone.
    Lost,
    /// lockwise got this signal.
    Signal(Signal),
    /// The command exited by itself.
    Exited(u8),
}

async fn partition(args: PartitionArgs) -> Result<u8, Failure> {
    let mut signals = Signals::install().map_err(|e| Failure {
        code: exit::BACKEND,
        message: format!("cannot install signal handlers: {e}"),
    })?;
    if args.url.trim() == "memory:" {
        return Err(Failure::usage(
            "memory: cannot share a group between processes; use redis:// or postgres://",
        ));
    }
    let group = Group::connect(&args.url, &args.group).await?;
    let mut opts = MemberOptions::ttl(args.ttl).key_space(u64::from(args.keys));
    if let Some(id) = &args.id {
        opts = opts.id(id);
    }
    let member = group.join(&opts).await.map_err(|e| match e {
        lockwise::Error::KeySpaceMismatch {
            group,
            stored,
            requested,
        } => Failure::usage(format!(
            "group {group:?} partitions {stored} keys (its members run with --keys {stored}), \
             not --keys {requested}"
        )),
        e => Failure::from(e),
    })?;
    let keys: Vec<String> = (0..args.keys).map(|k| k.to_string()).collect();
    let mut changes = member.assignment();
    loop {
        // Wait for a settled generation.
        let assignment = loop {
            let a = changes.borrow_and_update().clone();
            if a.lost || member.is_lost() {
                return Err(lost(&member));
            }
            if a.settled {
                break a;
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return Err(lost(&member)) },
                sig = signals.recv() => return Ok(leave(member, sig).await),
            }
        };
        let holds: Option<Vec<KeyHold>> = keys
            .iter()
            .filter(|k| assignment.owns(k))
            .map(|k| member.hold(k))
            .collect();
        let Some(holds) = holds else {
            continue; // the assignment moved on meanwhile
        };
        let owned: Vec<&str> = holds.iter().map(KeyHold::key).collect();
        let child = spawn(
            &args,
            &member,
            assignment.generation.get(),
            &owned.join(","),
        )
        .map_err(|e| {
            let name = args.command[0].to_string_lossy();
            Failure {
                code: match e.kind() {
                    io::ErrorKind::NotFound => exit::NOT_FOUND,
                    _ => exit::CANNOT_EXECUTE,
                },
                message: format!("cannot run {name}: {e}"),
            }
        })?;
        let generation = assignment.generation;
        let stop = supervise(
            child,
            &holds,
            &member,
            &mut changes,
            generation,
            &mut signals,
            args.kill_after,
        )
        .await;
        // Only now, with the command's group gone, may the member acknowledge a new generation.
        drop(holds);
        match stop {
            Stop::Generation => {}
            Stop::Lost => return Err(lost(&member)),
            Stop::Signal(sig) => return Ok(leave(member, sig).await),
            Stop::Exited(code) => {
                if let Err(e) = member.leave().await {
                    eprintln!("lockwise: leaving the group failed ({e}); the lease will end it");
                }
                return Ok(code);
            }
        }
    }
}

fn lost(member: &Member) -> Failure {
    Failure {
        code: exit::LOST,
        message: format!(
            "the membership of {:?} in group {:?} was lost",
            member.id(),
            member.group()
        ),
    }
}

async fn leave(member: Member, sig: Signal) -> u8 {
    if let Err(e) = member.leave().await {
        eprintln!("lockwise: leaving the group failed ({e}); the lease will end it");
    }
    128 + sig as u8
}

fn spawn(args: &PartitionArgs, member: &Member, generation: u64, keys: &str) -> io::Result<Child> {
    let mut supervised = Command::new(std::env::current_exe()?);
    supervised
        .args(["supervise", "--forwarded", "--kill-after"])
        .arg(format!("{}ms", args.kill_after.as_millis()))
        .arg("--")
        .args(&args.command)
        .env("LOCKWISE_GROUP", &args.group)
        .env("LOCKWISE_MEMBER", member.id())
        .env("LOCKWISE_GENERATION", generation.to_string())
        .env("LOCKWISE_KEYS", keys)
        // The URL may carry a password; the command has no use for it.
        .env_remove("LOCKWISE_URL")
        .process_group(0);
    crate::child::stop_with_parent(&mut supervised, Signal::SIGTERM);
    supervised.spawn()
}

/// Runs until the command's process group is gone, stopping it (SIGTERM, SIGKILL after
/// `grace`) on a new generation, a lost key, a lost membership (SIGKILL at once) or a signal.
async fn supervise(
    mut child: Child,
    holds: &[KeyHold],
    member: &Member,
    changes: &mut tokio::sync::watch::Receiver<lockwise::partition::Assignment>,
    generation: lockwise::FencingToken,
    signals: &mut Signals,
    grace: Duration,
) -> Stop {
    let group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    let signal_group = |sig: Signal| {
        if let Some(group) = group {
            let _ = killpg(group, sig);
        }
    };
    let any_lost = futures_lost(holds);
    tokio::pin!(any_lost);
    let mut stop: Option<Stop> = None;
    let mut kill_at: Option<Instant> = None;
    let mut exited = None;
    loop {
        if exited.is_some() && !group.is_some_and(|g| crate::child::group_alive(g, None)) {
            break;
        }
        let mut decided: Option<(Stop, Signal)> = None;
        tokio::select! {
            biased;
            () = &mut any_lost, if stop.is_none() => {
                decided = Some(if member.is_lost() {
                    (Stop::Lost, Signal::SIGKILL)
                } else {
                    (Stop::Generation, Signal::SIGTERM)
                });
            }
            changed = changes.changed(), if stop.is_none() => {
                let a = changes.borrow_and_update().clone();
                if changed.is_err() || a.lost {
                    decided = Some((Stop::Lost, Signal::SIGKILL));
                } else if a.generation != generation {
                    decided = Some((Stop::Generation, Signal::SIGTERM));
                }
            }
            sig = signals.recv() => {
                if stop.is_some() {
                    signal_group(sig);
                } else {
                    decided = Some((Stop::Signal(sig), sig));
                }
            }
            () = sleep(kill_at.map_or(Duration::ZERO, |at| at.saturating_duration_since(Instant::now()))), if kill_at.is_some() => {
                signal_group(Signal::SIGKILL);
                kill_at = None;
            }
            status = child.wait(), if exited.is_none() => {
                exited = Some(status.map(crate::run::exit_code).unwrap_or(exit::BACKEND));
            }
            () = sleep(Duration::from_millis(50)), if exited.is_some() => {}
        }
        if let Some((why, sig)) = decided
            && stop.is_none()
        {
            stop = Some(why);
            signal_group(sig);
            // A lost membership gets SIGKILL at once; otherwise SIGKILL after the grace.
            kill_at = (sig != Signal::SIGKILL).then(|| Instant::now() + grace);
        }
    }
    stop.unwrap_or(Stop::Exited(exited.unwrap_or(exit::BACKEND)))
}

/// Resolves when any hold's key is lost.
async fn futures_lost(holds: &[KeyHold]) {
    if holds.is_empty() {
        return std::future::pending().await;
    }
    futures_util_select(holds).await;
}

async fn futures_util_select(holds: &[KeyHold]) {
    let mut all: Vec<_> = holds.iter().map(|h| Box::pin(h.lost())).collect();
    std::future::poll_fn(|cx| {
        for f in &mut all {
            if f.as_mut().poll(cx).is_ready() {
                return std::task::Poll::Ready(());
            }
        }
        std::task::Poll::Pending
    })
    .await;
}

/// The signals forwarded to the command.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> io::Result<Self> {
        Ok(Signals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    async fn recv(&mut self) -> Signal {
        tokio::select! {
            _ = self.int.recv() => Signal::SIGINT,
            _ = self.term.recv() => Signal::SIGTERM,
            _ = self.hup.recv() => Signal::SIGHUP,
        }
    }
}
