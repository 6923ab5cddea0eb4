//! `lockwise partition`: join a partition group and run a command over this member's keys,
//! restarting it when a generation changes them — the partitioning analogue of `lockwise run`.

use std::ffi::OsString;
use std::io;
use std::time::Duration;

use lockwise::partition::hash::NAMED_KEY_SET;
use lockwise::partition::{Group, KeyHold, Member, MemberOptions};
use lockwise::url::BackendUrl;
use nix::sys::signal::Signal;
use tokio::process::Child;
use tokio::time::{Instant, sleep};

use crate::child::{DECIDE_AHEAD, DeadlineFeed, ProcessGroup, Signals, Supervision, exit_code};
use crate::exit::Failure;
use crate::metrics::MetricsArgs;
use crate::{duration, exit};

const EXIT_CODES: &str = "\
Exit codes:
  the command's own    it exited by itself (128+N if signal N killed it); lockwise leaves the group
  126, 127             the command could not be executed / was not found
  64                   usage error: arguments, group, id, TTL or URL; --keys 0; a key space other
                       than the group's (its first member's --keys, --key or --keys-file); a
                       named key that is empty or holds a comma or a control character
  69                   backend failure: refused, authentication, TLS, protocol, timeout
  70                   the membership was lost (the lease ran out): the command got SIGKILL
  75                   member id in use: a live member of the group has this --id
  128+N                lockwise got signal N (SIGINT, SIGTERM, SIGHUP): the command got it too,
                       then lockwise left the group

The command gets LOCKWISE_GROUP, LOCKWISE_MEMBER, LOCKWISE_GENERATION and LOCKWISE_KEYS (the
owned keys, comma-separated: indexes among 0..N-1, or the names given with --key or
--keys-file) in its environment. It starts only once its generation is settled (every live
member stopped the work on the keys it lost). When a new generation changes this member's keys
the command gets SIGTERM (SIGKILL after --kill-after) and starts again with its new keys; when
its keys stay the same it runs on (its LOCKWISE_GENERATION, the one it started in, still fences
its keys: a key that moves away stops it first). If lockwise itself is frozen (SIGSTOP, starved of CPU) while the command runs on, the
command still dies by the membership lease's local deadline (SIGTERM --kill-after before it, at
most TTL/4; SIGKILL at it), before another member can take its keys. Pass LOCKWISE_GENERATION
as the fencing token of your writes: the fence stops the late writes of anything that outlives
its generation.";

/// Run a command over this member's keys of a partition group, restarting it on every
/// generation change.
#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub(crate) struct PartitionArgs {
    /// The group's server: file:///dir (processes on one machine), redis://…, postgres://…,
    /// mysql://… or (built with the feature etcd) etcd://…
    #[arg(long, env = "LOCKWISE_URL", hide_env_values = true, value_name = "URL")]
    url: String,
    /// The group's name
    #[arg(long, value_name = "G")]
    group: String,
    /// The key space: keys 0 to N-1 (at least 1). The group stores its first member's N and
    /// refuses a member with another
    #[arg(long, default_value_t = 1000, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    keys: u32,
    /// A named key of the key space instead of 0..N-1 (repeat it: --key eu --key us); every
    /// member must give the same set
    #[arg(long = "key", value_name = "K", conflicts_with_all = ["keys", "keys_file"])]
    key: Vec<String>,
    /// A file of named keys, one per line (blank lines skipped), instead of 0..N-1
    #[arg(long, value_name = "PATH", conflicts_with = "keys")]
    keys_file: Option<std::path::PathBuf>,
    /// This member's id [default: the process id and a random suffix]
    #[arg(long, value_name = "ID")]
    id: Option<String>,
    /// The membership lease (100ms to 24h), renewed every TTL/3
    #[arg(long, default_value = "10s", value_parser = duration::parse, value_name = "DURATION")]
    ttl: Duration,
    /// How long the command has between SIGTERM and SIGKILL when its keys change
    #[arg(long, default_value = "5s", value_parser = duration::parse, value_name = "DURATION")]
    kill_after: Duration,
    #[command(flatten)]
    metrics: MetricsArgs,
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
    let mut signals = Signals::install(&[Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP])
        .map_err(|e| Failure {
            code: exit::BACKEND,
            message: format!("cannot install signal handlers: {e}"),
        })?;
    if args.url.trim() == "memory:" {
        return Err(Failure::usage(
            "memory: cannot share a group between processes; use redis:// or postgres://",
        ));
    }
    let named = named_keys(&args)?;
    args.metrics.install()?;
    let group = Group::connect(&args.url, &args.group).await?;
    let mut opts = MemberOptions::ttl(args.ttl);
    opts = match &named {
        Some(names) => opts.key_set(names),
        None => opts.key_space(u64::from(args.keys)),
    };
    if let Some(id) = &args.id {
        opts = opts.id(id);
    }
    let member = group.join(&opts).await.map_err(|e| match e {
        lockwise::Error::KeySpaceMismatch {
            group,
            stored,
            requested,
        } if (stored | requested) & NAMED_KEY_SET != 0 => Failure::usage(format!(
            "group {group:?} partitions another key space than this member's (its members run \
             with other --keys, --key or --keys-file)"
        )),
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
    // The command must be gone before the server can expire the membership: its supervisor
    // sends SIGTERM `lease_grace` before the local deadline and SIGKILL at it.
    let lease_grace = args.kill_after.min(args.ttl / 4);
    let keys: Vec<String> =
        named.unwrap_or_else(|| (0..args.keys).map(|k| k.to_string()).collect());
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
        let started = spawn(
            &args,
            &member,
            assignment.generation.get(),
            &owned.join(","),
            lease_grace,
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
        let (child, mut feed) = started;
        let stop = supervise(
            child,
            &holds,
            &keys,
            &member,
            &mut changes,
            generation,
            &mut signals,
            Grace {
                restart: args.kill_after,
                lease: lease_grace,
                feed_every: (args.ttl / 12).clamp(Duration::from_millis(1), Duration::from_secs(1)),
            },
            &mut feed,
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

/// Starts the command under `lockwise supervise --forwarded`, in a process group of its own,
/// with the membership's deadline in the returned feed (its first value is there before the
/// supervisor starts), so that the command dies by it even while lockwise is frozen.
fn spawn(
    args: &PartitionArgs,
    member: &Member,
    generation: u64,
    keys: &str,
    lease_grace: Duration,
) -> io::Result<(Child, DeadlineFeed)> {
    let mut feed = DeadlineFeed::new(member.deadline())?;
    let supervision = Supervision {
        kill_after: lease_grace,
        // A dead member's lock is free at once on these backends (a file lock's flock, a
        // session lock's connection), and another member may take its keys: no grace after
        // its death.
        lock_dies_with_parent: BackendUrl::parse(&args.url)
            .is_ok_and(|url| url.held_by_session() || matches!(url, BackendUrl::File(_))),
    };
    let child = supervision
        .command(&feed, &args.command)?
        .env("LOCKWISE_GROUP", &args.group)
        .env("LOCKWISE_MEMBER", member.id())
        .env("LOCKWISE_GENERATION", generation.to_string())
        .env("LOCKWISE_KEYS", keys)
        .spawn()?;
    feed.started();
    Ok((child, feed))
}

/// How the command is given time to stop.
#[derive(Debug, Clone, Copy)]
struct Grace {
    /// Between SIGTERM and SIGKILL on a new generation or a lost key.
    restart: Duration,
    /// Before the membership's deadline, when the lease cannot be renewed: SIGTERM this long
    /// before it, SIGKILL at it (the supervisor's `--kill-after`).
    lease: Duration,
    /// How often the renewed deadline is fed to the supervisor.
    feed_every: Duration,
}

/// Runs until the command's process group is gone, stopping it (SIGTERM, SIGKILL after
/// `grace.restart`) on a new generation, a lost key or a signal, and at once (SIGKILL) on a
/// lost membership.
///
/// The supervisor holds the membership's deadline, fed here after each renewal (see
/// [`crate::child`]): when renewals stall, or lockwise is frozen, it sends the group SIGTERM
/// `grace.lease` before the deadline and SIGKILL at it on its own. On a lost membership it is
/// sent `now`, so it kills the group at once even if lockwise's own SIGKILL does not reach it.
#[allow(clippy::too_many_arguments)]
async fn supervise(
    mut child: Child,
    holds: &[KeyHold],
    keys: &[String],
    member: &Member,
    changes: &mut tokio::sync::watch::Receiver<lockwise::partition::Assignment>,
    generation: lockwise::FencingToken,
    signals: &mut Signals,
    grace: Grace,
    feed: &mut DeadlineFeed,
) -> Stop {
    let group = ProcessGroup::led_by(&child);
    let signal_group = |sig: Signal| group.signal(sig);
    let any_lost = futures_lost(holds);
    tokio::pin!(any_lost);
    let mut stop: Option<Stop> = None;
    let mut kill_at: Option<Instant> = None;
    let mut exited = None;
    // Set once the membership is lost or runs out unrenewed: nothing more is fed then.
    let mut ending = false;
    let mut feeding = tokio::time::interval(grace.feed_every);
    feeding.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if exited.is_some() && !group.alive() {
            break;
        }
        let decide_at = feed
            .fed()
            .checked_sub(grace.lease + DECIDE_AHEAD)
            .unwrap_or_else(Instant::now);
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
                } else if a.generation != generation && !same_keys(&a, keys, holds) {
                    // This member's keys changed; with the same keys the command runs on.
                    decided = Some((Stop::Generation, Signal::SIGTERM));
                }
            }
            () = tokio::time::sleep_until(decide_at), if !ending => {
                if feed.renewed(member, grace.lease) {
                    continue;
                }
                // The deadline is near and no renewal moved it: the supervisor sends SIGTERM
                // now and SIGKILL at the deadline; lockwise does the same should it be stalled.
                ending = true;
                let now = Instant::now();
                if now >= feed.fed() {
                    say_ran_out(member, now - feed.fed());
                } else {
                    eprintln!(
                        "lockwise: the membership lease of {:?} in group {:?} could not be renewed and runs out in {:.3}s; the command gets SIGTERM",
                        member.id(),
                        member.group(),
                        (feed.fed() - now).as_secs_f64()
                    );
                }
                if exited.is_some() {
                    signal_group(Signal::SIGTERM); // the supervisor is gone, its group is not
                }
                kill_at = Some(kill_at.map_or(feed.fed(), |at| at.min(feed.fed())));
                stop.get_or_insert(Stop::Lost);
            }
            _ = feeding.tick(), if !ending => {
                feed.renewed(member, grace.lease);
            }
            sig = signals.recv() => {
                if stop.is_some() {
                    signal_group(sig);
                } else {
                    decided = Some((Stop::Signal(sig), sig));
                }
            }
            () = tokio::time::sleep_until(kill_at.unwrap_or_else(Instant::now)), if kill_at.is_some() => {
                signal_group(Signal::SIGKILL);
                kill_at = None;
            }
            status = child.wait(), if exited.is_none() => {
                exited = Some(status.map(exit_code).unwrap_or(exit::BACKEND));
                // Gone after the deadline it was fed, while lockwise had not run (frozen): the
                // supervisor stopped it for the lease, whichever wakes first after SIGCONT.
                let now = Instant::now();
                if stop.is_none() && now >= feed.fed() {
                    if !ending {
                        ending = true;
                        say_ran_out(member, now - feed.fed());
                    }
                    stop = Some(Stop::Lost);
                }
            }
            () = sleep(Duration::from_millis(50)), if exited.is_some() => {}
        }
        if let Some((why, sig)) = decided
            && stop.is_none()
        {
            if matches!(why, Stop::Lost) && !ending {
                ending = true;
                let now = Instant::now();
                if now >= feed.fed() {
                    // lockwise did not run until after the deadline: the supervisor has
                    // stopped the command by then.
                    say_ran_out(member, now - feed.fed());
                } else {
                    let _ = feed.send(now);
                }
            }
            stop = Some(why);
            signal_group(sig);
            // A lost membership gets SIGKILL at once; otherwise SIGKILL after the grace.
            kill_at = (sig != Signal::SIGKILL).then(|| Instant::now() + grace.restart);
        }
    }
    stop.unwrap_or(Stop::Exited(exited.unwrap_or(exit::BACKEND)))
}

/// Whether `assignment` gives this member exactly the keys it holds.
fn same_keys(
    assignment: &lockwise::partition::Assignment,
    keys: &[String],
    holds: &[KeyHold],
) -> bool {
    let held: std::collections::HashSet<&str> = holds.iter().map(KeyHold::key).collect();
    let owned: std::collections::HashSet<&str> = keys
        .iter()
        .filter(|k| assignment.owns(k))
        .map(String::as_str)
        .collect();
    held == owned
}

/// The named keys of `--key` or `--keys-file`, without duplicates, in the order given; `None`
/// for the key space `0..--keys`.
fn named_keys(args: &PartitionArgs) -> Result<Option<Vec<String>>, Failure> {
    let mut given = args.key.clone();
    if let Some(path) = &args.keys_file {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Failure::usage(format!("cannot read --keys-file {}: {e}", path.display()))
        })?;
        given.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned),
        );
        if given.is_empty() {
            return Err(Failure::usage(format!(
                "--keys-file {} names no key",
                path.display()
            )));
        }
    }
    if given.is_empty() {
        return Ok(None);
    }
    let mut seen = std::collections::HashSet::new();
    let mut keys = Vec::new();
    for key in given {
        if key.is_empty() || key.contains(',') || key.chars().any(char::is_control) {
            return Err(Failure::usage(format!(
                "invalid key {key:?}: a named key is not empty and holds no comma or control \
                 character (LOCKWISE_KEYS separates them with commas)"
            )));
        }
        if seen.insert(key.clone()) {
            keys.push(key);
        }
    }
    Ok(Some(keys))
}

/// Says that the membership lease ran out while lockwise could not renew it: it was not
/// running, and the supervisor stopped the command by the deadline.
fn say_ran_out(member: &Member, ago: Duration) {
    eprintln!(
        "lockwise: the membership lease of {:?} in group {:?} ran out {:.3}s ago, before lockwise could renew it (was lockwise stopped or starved of CPU?); the command was stopped by then",
        member.id(),
        member.group(),
        ago.as_secs_f64()
    );
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
