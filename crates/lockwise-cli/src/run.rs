//! `lockwise run`: hold a lock (renewing it) while a command runs, like `flock(1)` and
//! `etcdctl lock NAME CMD`, but with a TTL, a fencing token, and a command that is stopped
//! when the lock is lost.

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::process::ExitStatus;
use std::time::Duration;

use lockwise::backend::AnyBackend;
use lockwise::backend::file::FileBackend;
use lockwise::lease::{validate_key, validate_ttl};
use lockwise::url::BackendUrl;
use lockwise::{Error, Guard, LockOptions, Locker, Permit, ReadGuard, RwLock, Semaphore};
use nix::sys::signal::Signal;
use tokio::time::{Instant, sleep, sleep_until};

use crate::child::{
    DECIDE_AHEAD, DeadlineFeed, Orders, Signals, Supervisor, Terminal, Waiting, exit_code,
};
use crate::exit::Failure;
use crate::metrics::MetricsArgs;
use crate::{duration, exit};

const EXIT_CODES: &str = "\
Exit codes:
  the command's own    it ran (128+N if signal N killed it)
  126, 127             the command could not be executed / was not found
  137                  a second SIGINT or SIGTERM killed the command's process group
  64                   usage error: arguments, key, TTL, duration or URL
  69                   backend failure: refused, authentication, TLS, protocol, timeout
  70                   the lock was lost while the command ran (it got SIGTERM, then SIGKILL)
  75                   the lock was not obtained within --wait (see --conflict-exit-code)

A second SIGINT or SIGTERM (a second Ctrl-C) while the command lingers after the first
sends its whole process group SIGKILL; lockwise then exits 137 (128 + SIGKILL).

The command gets LOCKWISE_FENCING_TOKEN and LOCKWISE_LOCK_KEY in its environment (and
LOCKWISE_PERMIT, its slot, with --limit and --shared). It runs in
a process group of its own; SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to that group.
On a terminal, that group gets the foreground while it lives (prompts work, Ctrl-C reaches
the command). If lockwise dies (even by SIGKILL) the group gets SIGTERM, then SIGKILL after the
--kill-after grace; on postgres:// and mysql://, whose lock dies with lockwise's connection,
SIGKILL at once. When the lease cannot be renewed, the group gets SIGTERM the grace
(--kill-after, at most TTL/4) before the lease could run out and SIGKILL at the local deadline,
so no process of the command works on after the server may have given the lock to someone
else. This holds even while lockwise itself is frozen (stopped, starved of CPU): the command's
supervisor process holds the deadline that lockwise feeds it after each renewal. The lock is held until the command and every process left in its group have exited.
lockwise writes nothing to stdout, but the fencing token when run without a command (it then
holds the lock until SIGINT, SIGTERM, SIGHUP or SIGQUIT and exits 0, or 70 if it is lost).";

/// Run a command while holding a lock, renewing it as long as the command runs.
#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub(crate) struct RunArgs {
    /// Backend: file:///dir, redis://[:password@]host[:port][/db], rediss://…,
    /// postgres://user@host/db (advisory locks) or mysql://user@host/db (GET_LOCK)
    /// [default: a per-user lock directory, $XDG_STATE_HOME/lockwise]
    #[arg(long, env = "LOCKWISE_URL", hide_env_values = true, value_name = "URL")]
    url: Option<String>,

    /// The lock's name (UTF-8, 1 to 512 bytes)
    #[arg(long, value_name = "KEY", value_parser = clap::builder::OsStringValueParser::new())]
    key: OsString,

    /// The lease's time to live (100ms to 24h); renewed every TTL/3 while the command runs
    #[arg(long, default_value = "30s", value_parser = duration::parse, value_name = "DURATION")]
    ttl: Duration,

    /// Wait this long for the lock, or `forever` [default: do not wait]
    #[arg(long, value_parser = parse_wait, value_name = "DURATION|forever")]
    wait: Option<Wait>,

    /// Hold one of N permits instead of the lock: at most N commands run at once (a
    /// semaphore, as `consul lock -n`; every holder must give the same N). The command's
    /// LOCKWISE_LOCK_KEY is its permit's key, KEY#permit-I, LOCKWISE_PERMIT is I, and its
    /// fencing token is that permit's
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(lockwise::semaphore::MAX_PERMITS)), conflicts_with_all = ["shared", "exclusive"])]
    limit: Option<u32>,

    /// Hold the read side of a read-write lock named KEY (as `flock -s`): many --shared
    /// commands run at once, none while an --exclusive one runs or waits. A lock of its own:
    /// a plain `run --key KEY` does not take part
    #[arg(long, conflicts_with = "exclusive")]
    shared: bool,

    /// Hold the write side of the read-write lock named KEY: waits until no --shared command
    /// runs, and keeps new ones out meanwhile. Its fencing token is the writers' lock's
    /// (LOCKWISE_LOCK_KEY is KEY#rw-writer)
    #[arg(long)]
    exclusive: bool,

    /// With --shared or --exclusive: at most N readers at once (every holder must give the
    /// same N) [default: 16]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(lockwise::semaphore::MAX_PERMITS)))]
    max_readers: Option<u32>,

    /// Do not renew: the lease ends one TTL after the grant, and a command still running then
    /// is stopped as when the lock is lost (SIGTERM --kill-after before, SIGKILL at the end;
    /// exit 70)
    #[arg(long)]
    no_renew: bool,

    /// Exit code when the lock is not obtained [default: 75]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8))]
    conflict_exit_code: Option<u8>,

    /// How long the command has between SIGTERM and SIGKILL when the lock is lost or its
    /// lease cannot be renewed, at most TTL/4: SIGTERM comes that long before the lease could
    /// run out, SIGKILL before it does, even while lockwise is frozen. Also after a SIGKILL of
    /// lockwise itself.
    #[arg(long, default_value = "5s", value_parser = duration::parse, value_name = "DURATION")]
    kill_after: Duration,

    /// Print to stderr how long lockwise waited for the lock and its fencing token
    #[arg(short, long)]
    verbose: bool,

    /// The command and its arguments. Without one, lockwise prints the fencing token to
    /// stdout and holds the lock (renewing it) until SIGINT, SIGTERM, SIGHUP or SIGQUIT, then
    /// releases it and exits 0 (70 if the lock is lost first)
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
    #[command(flatten)]
    metrics: MetricsArgs,
}

/// How long `--wait` waits.
#[derive(Debug, Clone, Copy)]
enum Wait {
    For(Duration),
    Forever,
}

fn parse_wait(s: &str) -> Result<Wait, String> {
    if s.trim() == "forever" {
        return Ok(Wait::Forever);
    }
    duration::parse(s).map(Wait::For)
}

/// `lockwise run`, with the supervisor forked for its command (see [`crate::child::fork`]; none
/// without a command).
pub(crate) async fn run(args: RunArgs, supervisor: Option<Waiting>) -> u8 {
    match run_checked(args, supervisor).await {
        Ok(code) => code,
        Err(failure) => failure.report(),
    }
}

async fn run_checked(args: RunArgs, supervisor: Option<Waiting>) -> Result<u8, Failure> {
    let key = args
        .key
        .into_string()
        .map_err(|_| Failure::usage("invalid lock key: it is not valid UTF-8"))?;
    validate_key(&key)?;
    validate_ttl(args.ttl)?;
    args.metrics.install()?;
    // From here on SIGINT, SIGTERM, SIGHUP and SIGQUIT never kill lockwise behind the
    // command's back: they are forwarded to it (or end the wait for the lock).
    let mut signals = Signals::install(&[
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
    ])
    .map_err(|e| Failure {
        code: exit::BACKEND,
        message: format!("cannot install signal handlers: {e}"),
    })?;
    // `lockwise locks` names the holder by its command.
    let shown: Vec<String> = args
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    lockwise::backend::name_this_process(&shown.join(" "));
    let (locker, file) = locker(args.url.as_deref()).await?;
    let mut opts = LockOptions::ttl(args.ttl).renew(!args.no_renew);
    let conflict = args.conflict_exit_code.unwrap_or(exit::CONFLICT);
    let waiting = Instant::now();
    if args.max_readers.is_some() && !(args.shared || args.exclusive) {
        return Err(Failure::usage(
            "--max-readers goes with --shared or --exclusive",
        ));
    }
    let semaphore = match args.limit {
        Some(permits) => Some(Semaphore::new(locker.clone(), key.clone(), permits)?),
        None => None,
    };
    let rw = if args.shared || args.exclusive {
        let readers = args.max_readers.unwrap_or(DEFAULT_MAX_READERS);
        Some(RwLock::new(locker.clone(), key.clone(), readers)?)
    } else {
        None
    };
    if let Some(Wait::For(wait)) = args.wait {
        opts = opts.wait(wait);
    }
    let acquire = async {
        // Without a `wait` option, `acquire` waits without a time limit.
        let waits = args.wait.is_some();
        let acquired = match (&semaphore, &rw) {
            (Some(s), _) if waits => s.acquire(&opts).await.map(|p| Some(permit(p))),
            (Some(s), _) => s.try_acquire(&opts).await.map(|p| p.map(permit)),
            (None, Some(rw)) if args.shared && waits => {
                rw.read(&opts).await.map(|r| Some(reader(r)))
            }
            (None, Some(rw)) if args.shared => rw.try_read(&opts).await.map(|r| r.map(reader)),
            (None, Some(rw)) if waits => rw.write(&opts).await.map(|g| Some((g, None))),
            (None, Some(rw)) => rw.try_write(&opts).await.map(|g| g.map(|g| (g, None))),
            (None, None) if waits => locker.acquire(&key, &opts).await.map(|g| Some((g, None))),
            (None, None) => locker
                .try_acquire(&key, &opts)
                .await
                .map(|g| g.map(|g| (g, None))),
        };
        match acquired {
            Err(Error::WaitTimeout { .. }) => Ok(None),
            other => other,
        }
    };
    let guard = tokio::select! {
        guard = acquire => guard?,
        signal = signals.recv() => {
            // The dropped acquire releases any grant in flight on the runtime; give it a moment.
            sleep(Duration::from_millis(100)).await;
            return Ok(128 + signal as u8);
        }
    };
    let Some((guard, slot)) = guard else {
        match args.limit {
            Some(n) => eprintln!("lockwise: all {n} permits of {key:?} are held"),
            None if args.shared => eprintln!(
                "lockwise: read-write lock {key:?} is held or awaited by a writer, or all its \
                 reader slots are taken"
            ),
            None if args.exclusive => {
                eprintln!("lockwise: read-write lock {key:?} is held by a writer or readers")
            }
            None => eprintln!("lockwise: lock {key:?} is held by someone else"),
        }
        return Ok(conflict);
    };
    let key = guard.key().to_owned();
    tracing::info!(key, token = %guard.token(), "acquired");
    if args.verbose {
        eprintln!(
            "lockwise: acquired lock {key:?} after {:.3}s; fencing token {}",
            waiting.elapsed().as_secs_f64(),
            guard.token()
        );
    }
    if args.command.is_empty() {
        return hold(guard, &mut signals).await;
    }

    // The command must be gone before the server can expire the lease: it gets SIGTERM
    // `grace` before the local deadline and SIGKILL at it.
    let grace = args.kill_after.min(args.ttl / 4);
    let terminal = Terminal::foreground();
    let kernel_lock = match &file {
        Some(backend) => backend.kernel_lock(&key, guard.owner())?,
        None => None,
    };
    // A database session's lock goes with lockwise's connection: no grace after its death.
    let session_lock = args
        .url
        .as_deref()
        .and_then(|url| BackendUrl::parse(url).ok())
        .is_some_and(|url| url.held_by_session());
    let orders = Orders {
        kill_after: grace,
        terminal: terminal.is_some(),
        lock_dies_with_parent: session_lock,
        env: command_env(&guard, slot),
        command: args.command.clone(),
    };
    let started = supervisor
        .ok_or_else(|| io::Error::other("no supervisor was forked for it"))
        .and_then(|supervisor| spawn(supervisor, &orders, &guard, kernel_lock));
    let child = match started {
        Ok(started) => started,
        Err(e) => {
            if let Some(terminal) = &terminal {
                terminal.take_back();
            }
            let name = args.command[0].to_string_lossy();
            release(guard).await;
            let code = match e.kind() {
                io::ErrorKind::NotFound => exit::NOT_FOUND,
                _ => exit::CANNOT_EXECUTE,
            };
            return Err(Failure {
                code,
                message: format!("cannot run {name}: {e}"),
            });
        }
    };
    let (child, mut feed) = child;
    // Renewals are fed well before the supervisor could act on the previous deadline.
    let feed_every = (args.ttl / 12).clamp(Duration::from_millis(1), Duration::from_secs(1));
    let renewing = !args.no_renew;
    let outcome = supervise(
        child,
        &guard,
        &mut feed,
        grace,
        feed_every,
        renewing,
        &mut signals,
    )
    .await;
    if let Some(terminal) = &terminal {
        terminal.take_back();
    }
    release(guard).await;
    match outcome {
        Outcome::Exited(status) => Ok(exit_code(status)),
        Outcome::Lost => Err(Failure {
            code: exit::LOST,
            message: format!("lock {key:?} was lost; the command was stopped"),
        }),
        Outcome::Stalled if !renewing => Err(Failure {
            code: exit::LOST,
            message: format!(
                "the lease of lock {key:?} ran out (--no-renew); the command was stopped"
            ),
        }),
        Outcome::Stalled => Err(Failure {
            code: exit::LOST,
            message: format!(
                "the lease of lock {key:?} could not be renewed in time; the command was stopped"
            ),
        }),
        Outcome::WaitFailed(e) => Err(Failure {
            code: exit::BACKEND,
            message: format!("lost track of the command: {e}"),
        }),
    }
}

/// The readers' default limit of `--shared`/`--exclusive`.
const DEFAULT_MAX_READERS: u32 = 16;

/// A read lock's guard and reader slot.
fn reader(read: ReadGuard) -> (Guard, Option<u32>) {
    let slot = read.slot();
    (read.into_guard(), Some(slot))
}

/// A permit's guard and slot.
fn permit(permit: Permit) -> (Guard, Option<u32>) {
    let slot = permit.slot();
    (permit.into_guard(), Some(slot))
}

/// `lockwise run --key K` without a command, as `etcdctl lock K`: prints the fencing token,
/// holds the lock (renewed) until a signal to stop, then releases it and exits 0; a lost lock
/// (or, with `--no-renew`, the end of the lease) exits 70.
async fn hold(guard: Guard, signals: &mut Signals) -> Result<u8, Failure> {
    use std::io::Write;
    let mut stdout = io::stdout().lock();
    let printed = writeln!(stdout, "{}", guard.token()).and_then(|()| stdout.flush());
    drop(stdout);
    if let Err(e) = printed {
        release(guard).await;
        return Err(Failure {
            code: exit::BACKEND,
            message: format!("cannot print the fencing token: {e}"),
        });
    }
    let lost = tokio::select! {
        _ = guard.lost() => true,
        _ = signals.recv() => false,
    };
    let key = guard.key().to_owned();
    release(guard).await;
    if lost {
        return Err(Failure {
            code: exit::LOST,
            message: format!("lock {key:?} was lost"),
        });
    }
    Ok(0)
}

/// The locker of `url`, and its file backend if it is one (see [`spawn`]).
pub(crate) async fn locker(url: Option<&str>) -> Result<(Locker, Option<FileBackend>), Failure> {
    let parsed = match url {
        None => BackendUrl::File(FileBackend::default_dir()?),
        Some(url) => BackendUrl::parse(url)?,
    };
    Ok(match AnyBackend::open(parsed).await? {
        AnyBackend::Memory(_) => {
            return Err(Failure::usage(
                "memory: cannot exclude two processes; use file:///dir, redis://, postgres:// or mysql://",
            ));
        }
        AnyBackend::File(backend) => (Locker::new(backend.clone()), Some(backend)),
        other => (other.into_locker(), None),
    })
}

/// Starts the command: sends its supervisor (forked before the grant, in a process group of
/// its own) its `orders`, so that signals reach the whole tree and the tree dies with
/// lockwise; on a terminal, that group takes its foreground (see [`Terminal`]). The supervisor
/// holds the lease's deadline, fed through the returned feed (its first value is there before
/// the supervisor gets the feed).
///
/// On the file backend the supervisor also keeps a copy of the lease's kernel lock (`held`): a
/// lease whose holder died is free at once, and the command may work on for the grace after a
/// SIGKILL of lockwise, so the lock must outlive lockwise until the group is gone.
fn spawn(
    supervisor: Waiting,
    orders: &Orders,
    guard: &Guard,
    held: Option<OwnedFd>,
) -> io::Result<(Supervisor, DeadlineFeed)> {
    let mut feed = DeadlineFeed::new(guard.deadline())?;
    let supervisor = supervisor.start(orders, &mut feed, held)?;
    Ok((supervisor, feed))
}

/// The command's environment: its lock's key and fencing token (and permit); the URL may
/// carry a password, and the command has no use for it.
fn command_env(guard: &Guard, slot: Option<u32>) -> Vec<(OsString, Option<OsString>)> {
    vec![
        (
            "LOCKWISE_FENCING_TOKEN".into(),
            Some(guard.token().to_string().into()),
        ),
        ("LOCKWISE_LOCK_KEY".into(), Some(guard.key().into())),
        (
            "LOCKWISE_PERMIT".into(),
            slot.map(|slot| slot.to_string().into()),
        ),
        ("LOCKWISE_URL".into(), None),
    ]
}

enum Outcome {
    Exited(ExitStatus),
    Lost,
    /// Stopped because renewals did not confirm the lease before its deadline drew near.
    Stalled,
    WaitFailed(io::Error),
}

/// Waits until the command and every other process of its group have exited, forwarding
/// signals; a second SIGINT or SIGTERM (the command lingers after the first) sends the group
/// SIGKILL instead, and lockwise then exits 137 (the supervisor's 128 + SIGKILL).
///
/// The supervisor stops the command by the lease's deadline on its own (see
/// [`crate::child`]): lockwise feeds it each renewed deadline, and on a lost lock a deadline
/// `grace` from now; the supervisor sends the group SIGTERM `grace` before the deadline and
/// SIGKILL at it, even while lockwise is frozen. lockwise decides the same a little ahead
/// ([`DECIDE_AHEAD`]) to report it, and sends SIGKILL at the deadline itself should the
/// supervisor be stalled too. The outcome is then `Lost` or `Stalled`, once the group is gone.
async fn supervise(
    mut child: Supervisor,
    guard: &Guard,
    feed: &mut DeadlineFeed,
    grace: Duration,
    feed_every: Duration,
    renewing: bool,
    signals: &mut Signals,
) -> Outcome {
    let group = child.group();
    let signal_group = |sig: Signal| group.signal(sig);
    let mut status: Option<io::Result<ExitStatus>> = None;
    let mut stopped = false;
    let mut stalled = false;
    let mut kill_at: Option<Instant> = None;
    let mut killed = false;
    // SIGINTs and SIGTERMs forwarded: the second one kills the group.
    let mut stops = 0u32;
    let mut feeding = tokio::time::interval(feed_every);
    feeding.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if status.is_some() && !group.alive() {
            break;
        }
        let decide_at = feed
            .fed()
            .checked_sub(grace + DECIDE_AHEAD)
            .unwrap_or_else(Instant::now);
        tokio::select! {
            biased;
            _ = guard.lost(), if !stopped => {
                stopped = true;
                let now = Instant::now();
                if now >= feed.fed() {
                    // lockwise did not run until after the deadline: the supervisor has
                    // stopped the command by then.
                    stalled = true;
                    say_ran_out(guard.key(), now - feed.fed());
                    kill_at = Some(now);
                } else {
                    // Reported once, when the command is gone (the outcome's message).
                    tracing::info!(key = guard.key(), "lock lost; sending SIGTERM to the command");
                    let end = feed.fed().min(now + grace);
                    // The supervisor sends the SIGTERM (once); lockwise only if it cannot.
                    if status.is_some() || !feed.send(end).unwrap_or(false) {
                        signal_group(Signal::SIGTERM);
                    }
                    kill_at = Some(end);
                }
            }
            _ = sleep_until(decide_at), if !stopped => {
                if feed.renewed(guard, grace) {
                    continue;
                }
                stopped = true;
                stalled = true;
                let now = Instant::now();
                let left = feed.fed().saturating_duration_since(now);
                if left.is_zero() {
                    say_ran_out(guard.key(), now - feed.fed());
                } else {
                    let why = if renewing {
                        "could not be renewed and runs out"
                    } else {
                        "is not renewed (--no-renew) and runs out"
                    };
                    eprintln!(
                        "lockwise: the lease of lock {:?} {why} in {:.3}s; the command gets SIGTERM",
                        guard.key(),
                        left.as_secs_f64()
                    );
                }
                if status.is_some() {
                    // The supervisor is gone, what it left behind is not.
                    signal_group(Signal::SIGTERM);
                }
                kill_at = Some(feed.fed());
            }
            _ = sleep_until(kill_at.unwrap_or_else(Instant::now)), if kill_at.is_some() && !killed => {
                killed = true;
                signal_group(Signal::SIGKILL);
            }
            _ = feeding.tick(), if !stopped => {
                feed.renewed(guard, grace);
            }
            sig = signals.recv() => {
                if matches!(sig, Signal::SIGINT | Signal::SIGTERM) {
                    stops += 1;
                }
                if stops >= 2 && !killed {
                    eprintln!(
                        "lockwise: a second {sig}; sending SIGKILL to the command's process group"
                    );
                    killed = true;
                    signal_group(Signal::SIGKILL);
                } else {
                    signal_group(sig);
                }
            }
            exited = child.wait(), if status.is_none() => status = Some(exited),
            // The command is gone but others of its group still run: look again shortly.
            _ = sleep(Duration::from_millis(50)), if status.is_some() => {}
        }
    }
    if stalled {
        return Outcome::Stalled;
    }
    // The command and its group ended before lockwise looked at its lease: after a freeze,
    // the supervisor may have stopped the command at the deadline and exited before this
    // loop saw the lost signal or the decision time. The lease ran out unrenewed.
    let now = Instant::now();
    if !stopped && guard.is_lost() && now >= feed.fed() {
        say_ran_out(guard.key(), now - feed.fed());
        return Outcome::Stalled;
    }
    if stopped || guard.is_lost() {
        return Outcome::Lost;
    }
    match status {
        Some(Ok(status)) => Outcome::Exited(status),
        Some(Err(e)) => Outcome::WaitFailed(e),
        None => Outcome::WaitFailed(io::Error::other("the command was not waited for")),
    }
}

/// Says that the lease ran out while lockwise could not renew it: it was not running.
fn say_ran_out(key: &str, ago: Duration) {
    eprintln!(
        "lockwise: the lease of lock {key:?} ran out {:.3}s ago, before lockwise could renew it (was lockwise stopped or starved of CPU?); the command was stopped by then",
        ago.as_secs_f64()
    );
}

async fn release(guard: Guard) {
    let key = guard.key().to_owned();
    // A lock already known lost has been reported; that its release removes nothing is no news.
    let known_lost = guard.is_lost();
    match guard.release().await {
        Ok(true) => tracing::info!(key, "released"),
        Ok(false) if known_lost => tracing::debug!(key, "release of a lost lock removed nothing"),
        Ok(false) => eprintln!(
            "lockwise: lock {key:?} was no longer held when released (it expired, or was broken with `lockwise unlock --force`)"
        ),
        Err(e) => eprintln!("lockwise: releasing {key:?} failed ({e}); its TTL will expire it"),
    }
}

impl RunArgs {
    /// Whether a command is to run (else the lock is held until a signal).
    pub(crate) fn has_command(&self) -> bool {
        !self.command.is_empty()
    }

    /// The backend URL, for `--password-file` (none when the default lock directory is used).
    pub(crate) fn urls_mut(&mut self) -> Vec<&mut String> {
        self.url.iter_mut().collect()
    }
}
