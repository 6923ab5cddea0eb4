//! `lockwise run`: hold a lock (renewing it) while a command runs, like `flock(1)` and
//! `etcdctl lock NAME CMD`, but with a TTL, a fencing token, and a command that is stopped
//! when the lock is lost.

use std::ffi::OsString;
use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use lockwise::backend::AnyBackend;
use lockwise::backend::file::FileBackend;
use lockwise::lease::{validate_key, validate_ttl};
use lockwise::url::BackendUrl;
use lockwise::{Error, Guard, LockOptions, Locker};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::{Instant, sleep, sleep_until};

use crate::deadline::{DECIDE_AHEAD, DeadlineFeed};
use crate::exit::Failure;
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

The command gets LOCKWISE_FENCING_TOKEN and LOCKWISE_LOCK_KEY in its environment. It runs in
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

pub(crate) async fn run(args: RunArgs) -> u8 {
    match run_checked(args).await {
        Ok(code) => code,
        Err(failure) => failure.report(),
    }
}

async fn run_checked(args: RunArgs) -> Result<u8, Failure> {
    let key = args
        .key
        .into_string()
        .map_err(|_| Failure::usage("invalid lock key: it is not valid UTF-8"))?;
    validate_key(&key)?;
    validate_ttl(args.ttl)?;
    // From here on SIGINT, SIGTERM, SIGHUP and SIGQUIT never kill lockwise behind the
    // command's back: they are forwarded to it (or end the wait for the lock).
    let mut signals = Signals::install().map_err(|e| Failure {
        code: exit::BACKEND,
        message: format!("cannot install signal handlers: {e}"),
    })?;
    let (locker, file) = locker(args.url.as_deref()).await?;
    let mut opts = LockOptions::ttl(args.ttl).renew(!args.no_renew);
    let conflict = args.conflict_exit_code.unwrap_or(exit::CONFLICT);
    let waiting = Instant::now();
    let acquire = async {
        match args.wait {
            None => locker.try_acquire(&key, &opts).await,
            // Without a `wait` option, `acquire` waits without a time limit.
            Some(Wait::Forever) => locker.acquire(&key, &opts).await.map(Some),
            Some(Wait::For(wait)) => {
                opts = opts.wait(wait);
                match locker.acquire(&key, &opts).await {
                    Ok(guard) => Ok(Some(guard)),
                    Err(Error::WaitTimeout { .. }) => Ok(None),
                    Err(e) => Err(e),
                }
            }
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
    let Some(guard) = guard else {
        eprintln!("lockwise: lock {key:?} is held by someone else");
        return Ok(conflict);
    };
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
    let child = match spawn(
        &args.command,
        &key,
        &guard,
        grace,
        Holding {
            kernel_lock,
            session_lock,
        },
        terminal.as_ref(),
    ) {
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
async fn locker(url: Option<&str>) -> Result<(Locker, Option<FileBackend>), Failure> {
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

/// The terminal on stdin, when lockwise runs in its foreground: an interactive command must
/// get it.
///
/// The command keeps its process group of its own (under `lockwise supervise`), so that a lost
/// lock, a second signal or the death of lockwise still reach the whole tree with one
/// `killpg`, and lockwise never signals itself. Running the command in lockwise's own group
/// instead would give up that: a SIGKILL of the group on loss would kill lockwise too, and
/// whatever the command left behind would be mixed with lockwise in one group. So, as a shell
/// does for a foreground job, that group is made the terminal's foreground group
/// (`tcsetpgrp`) before the command is executed: it may read the terminal (no SIGTTIN that
/// would stop it), and Ctrl-C and Ctrl-\ reach it directly, as under flock(1). The supervisor
/// in that group drops them (they are for the command), but sends the group SIGKILL at the
/// second SIGINT or SIGTERM, as lockwise does with the signals it gets itself. Once the group
/// is gone, lockwise takes the foreground back for its own group (SIGTTOU blocked meanwhile,
/// as lockwise is then a background process of the terminal). Without a terminal, or when lockwise itself runs in the
/// background, nothing changes. Not handled: Ctrl-Z stops the command but not lockwise.
struct Terminal {
    /// lockwise's own process group, which had the foreground.
    own: Pid,
}

impl Terminal {
    /// The terminal, if stdin is one, it is lockwise's controlling terminal, and lockwise's
    /// group has its foreground.
    fn foreground() -> Option<Terminal> {
        use std::io::IsTerminal;
        let stdin = io::stdin();
        if !stdin.is_terminal() {
            return None;
        }
        let own = nix::unistd::getpgrp();
        (nix::unistd::tcgetpgrp(&stdin).ok()? == own).then_some(Terminal { own })
    }

    /// Gives the terminal's foreground back to lockwise's group.
    fn take_back(&self) {
        let own = self.own;
        let _ = without_sigttou(|| nix::unistd::tcsetpgrp(io::stdin(), own));
    }

    /// In the forked child, before exec: makes its new process group the foreground group.
    #[allow(unsafe_code)]
    fn give_to_child(&self, command: &mut Command) {
        // SAFETY: the closure runs in the forked child before exec (after `process_group(0)`
        // made it a group leader) and only makes the async-signal-safe calls pthread_sigmask,
        // getpid and tcsetpgrp (an ioctl) on fd 0, which is open for the whole closure.
        unsafe {
            command.pre_exec(|| {
                let stdin = std::os::fd::BorrowedFd::borrow_raw(0);
                let me = nix::unistd::getpid();
                // A failure leaves the command in the background, as before: not fatal.
                let _ = without_sigttou(|| nix::unistd::tcsetpgrp(stdin, me));
                Ok(())
            });
        }
    }
}

/// Runs `f` with SIGTTOU blocked in this thread: a process outside the terminal's foreground
/// group may then change it instead of being stopped.
fn without_sigttou<T>(f: impl FnOnce() -> T) -> T {
    use nix::sys::signal::{SigSet, SigmaskHow, pthread_sigmask};
    let mut ttou = SigSet::empty();
    ttou.add(Signal::SIGTTOU);
    let mut before = SigSet::empty();
    let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&ttou), Some(&mut before));
    let result = f();
    if !before.contains(Signal::SIGTTOU) {
        let _ = pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&ttou), None);
    }
    result
}

/// What of the lock the supervisor must know about beyond lockwise's death.
struct Holding {
    /// The file backend's kernel lock, which the supervisor keeps until the group is gone.
    kernel_lock: Option<std::os::fd::OwnedFd>,
    /// A database session's lock, which dies with lockwise: no grace after lockwise's death.
    session_lock: bool,
}

/// Starts the command under `lockwise supervise --forwarded`, in a process group of its own,
/// so that signals reach the whole tree and the tree dies with lockwise; on a terminal, that
/// group gets its foreground (see [`Terminal`]). The supervisor holds the lease's deadline,
/// fed through the returned feed (its first value is there before the supervisor starts).
///
/// On the file backend the supervisor also keeps a copy of the lease's kernel lock: a lease
/// whose holder died is free at once, and the command may work on for the grace after a
/// SIGKILL of lockwise, so the lock must outlive lockwise until the group is gone.
fn spawn(
    command: &[OsString],
    key: &str,
    guard: &Guard,
    grace: Duration,
    holding: Holding,
    terminal: Option<&Terminal>,
) -> io::Result<(Child, DeadlineFeed)> {
    let mut feed = DeadlineFeed::new(guard.deadline())?;
    let mut supervised = Command::new(std::env::current_exe()?);
    supervised
        .args(["supervise", "--forwarded", "--kill-after"])
        .arg(format!("{}ms", grace.as_millis()));
    if terminal.is_some() {
        supervised.arg("--terminal");
    }
    feed.attach(&mut supervised);
    if holding.session_lock {
        supervised.arg("--lock-dies-with-parent");
    }
    if let Some(fd) = holding.kernel_lock {
        let number = crate::child::inherit(&mut supervised, fd);
        supervised.arg(format!("--held-fd={number}"));
    }
    supervised
        .arg("--")
        .args(command)
        .env("LOCKWISE_FENCING_TOKEN", guard.token().to_string())
        .env("LOCKWISE_LOCK_KEY", key)
        // The URL may carry a password; the command has no use for it.
        .env_remove("LOCKWISE_URL")
        .process_group(0);
    crate::child::stop_with_parent(&mut supervised, Signal::SIGTERM);
    if let Some(terminal) = terminal {
        terminal.give_to_child(&mut supervised);
    }
    let child = supervised.spawn()?;
    feed.started();
    Ok((child, feed))
}

enum Outcome {
    Exited(ExitStatus),
    Lost,
    /// Stopped because renewals did not confirm the lease before its deadline drew near.
    Stalled,
    WaitFailed(io::Error),
}

/// The signals lockwise forwards to the command's process group.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> io::Result<Self> {
        Ok(Signals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
            quit: signal(SignalKind::quit())?,
        })
    }

    async fn recv(&mut self) -> Signal {
        tokio::select! {
            _ = self.int.recv() => Signal::SIGINT,
            _ = self.term.recv() => Signal::SIGTERM,
            _ = self.hup.recv() => Signal::SIGHUP,
            _ = self.quit.recv() => Signal::SIGQUIT,
        }
    }
}

/// Waits until the command and every other process of its group have exited, forwarding
/// signals; a second SIGINT or SIGTERM (the command lingers after the first) sends the group
/// SIGKILL instead, and lockwise then exits 137 (the supervisor's 128 + SIGKILL).
///
/// The supervisor stops the command by the lease's deadline on its own (see
/// [`crate::deadline`]): lockwise feeds it each renewed deadline, and on a lost lock a deadline
/// `grace` from now; the supervisor sends the group SIGTERM `grace` before the deadline and
/// SIGKILL at it, even while lockwise is frozen. lockwise decides the same a little ahead
/// ([`DECIDE_AHEAD`]) to report it, and sends SIGKILL at the deadline itself should the
/// supervisor be stalled too. The outcome is then `Lost` or `Stalled`, once the group is gone.
async fn supervise(
    mut child: Child,
    guard: &Guard,
    feed: &mut DeadlineFeed,
    grace: Duration,
    feed_every: Duration,
    renewing: bool,
    signals: &mut Signals,
) -> Outcome {
    let group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    let signal_group = |sig: Signal| {
        if let Some(group) = group {
            let _ = killpg(group, sig);
        }
    };
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
        if status.is_some() && !group.is_some_and(|g| crate::child::group_alive(g, None)) {
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
                if feed_renewal(feed, guard, grace) {
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
                feed_renewal(feed, guard, grace);
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
    if stopped || guard.is_lost() {
        return Outcome::Lost;
    }
    match status {
        Some(Ok(status)) => Outcome::Exited(status),
        Some(Err(e)) => Outcome::WaitFailed(e),
        None => Outcome::WaitFailed(io::Error::other("the command was not waited for")),
    }
}

/// Feeds the supervisor the guard's deadline if a renewal moved it, unless the supervisor may
/// already be deciding on the previous one (its SIGTERM is due `grace` before it). A refused
/// renewal moves nothing, and a lost lock is never fed. Whether a new deadline was fed.
fn feed_renewal(feed: &mut DeadlineFeed, guard: &Guard, grace: Duration) -> bool {
    if guard.is_lost() {
        return false;
    }
    match feed.renew(guard.deadline(), grace) {
        Ok(sent) => sent,
        Err(e) => {
            tracing::warn!(key = guard.key(), error = %e, "cannot feed the lease's deadline");
            false
        }
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
        Ok(false) => eprintln!("lockwise: lock {key:?} had already expired when released"),
        Err(e) => eprintln!("lockwise: releasing {key:?} failed ({e}); its TTL will expire it"),
    }
}

pub(crate) fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(255),
        (None, None) => 1,
    }
}

impl RunArgs {
    /// The backend URL, for `--password-file` (none when the default lock directory is used).
    pub(crate) fn urls_mut(&mut self) -> Vec<&mut String> {
        self.url.iter_mut().collect()
    }
}
