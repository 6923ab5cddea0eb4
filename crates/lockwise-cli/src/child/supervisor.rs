//! `lockwise supervise`: the process between lockwise and a command, which ends the
//! command's whole group when lockwise is gone or the lease's deadline passes.

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use tokio::process::Command;
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::{Instant, sleep, sleep_until};

use super::deadline::{self, DeadlineSource};
use super::fds::adopt;
use super::group::{exit_code, group_alive, no_descendants};
use super::orders::Received;
use super::signals::Signals;
use super::terminal::into_foreground;
use crate::exit;

/// `lockwise supervise [--forwarded] [--kill-after D] [--deadline-fd N] -- CMD`: runs CMD in
/// this process's group (the caller starts it as a group leader) and ends the whole group when
/// its parent `lockwise` is gone, so that no process of the command outlives the lock or job
/// lease it ran under, not even after a SIGKILL of `lockwise` itself (the kernel then sends
/// this process SIGTERM, see [`super::stop_with_parent`]). With `--deadline-fd`, it also holds
/// the lease's deadline that `lockwise` feeds it (see [`super::deadline`]), so the group dies
/// by then even while `lockwise` is frozen. Internal to `queue work` and `partition`; `run`
/// forks its supervisor instead (see [`super::early`]) and gives it the same orders.
#[derive(Debug, clap::Args)]
pub(crate) struct SuperviseArgs {
    /// For a parent that forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT to the whole group
    /// (`partition`, and `run` to the supervisor it forks): those are for the command and
    /// ignored here. Only the death of the parent ends
    /// the group: SIGTERM at once, SIGKILL `--kill-after` later (shorter than what is left of
    /// the lease). Without it (the queue worker), a SIGTERM while the parent lives was sent
    /// to the whole group, the command included, and is the command's to answer: this
    /// process waits on; after the parent's death it kills the group at once.
    #[arg(long)]
    forwarded: bool,
    /// How long the command has between SIGTERM and SIGKILL (with `--forwarded` after the
    /// death of the parent, and before the lease's deadline with `--deadline-fd`).
    #[arg(long, default_value = "0s", value_parser = crate::duration::parse)]
    kill_after: Duration,
    /// An inherited pipe on which the parent sends the lease's deadline, the first before this
    /// process starts: the group gets SIGTERM `--kill-after` before it and SIGKILL at it,
    /// unless a newer one came first.
    #[arg(long, value_name = "FD")]
    deadline_fd: Option<std::os::fd::RawFd>,
    /// With `--forwarded`: the lock dies with lockwise (a database session's lock goes with
    /// its connection), so after lockwise's death the group gets SIGKILL at once, without the
    /// `--kill-after` grace, in which the command would work on without the lock.
    #[arg(long, requires = "forwarded")]
    lock_dies_with_parent: bool,
    #[arg(last = true, required = true)]
    command: Vec<OsString>,
}

/// What a supervisor supervises and how: from `lockwise supervise`'s command line
/// ([`SuperviseArgs::into_supervised`]) or from `lockwise run`'s orders
/// ([`Supervised::forwarded`]).
#[derive(Debug)]
pub(crate) struct Supervised {
    /// See [`SuperviseArgs`]'s `--forwarded`.
    forwarded: bool,
    /// The group takes the terminal's foreground before the command starts; the second
    /// SIGINT or SIGTERM this process gets sends the whole group SIGKILL, as lockwise does
    /// with the signals it gets.
    terminal: bool,
    kill_after: Duration,
    /// The deadline feed's read end (see [`super::deadline`]).
    deadline: Option<OwnedFd>,
    /// The file backend's kernel lock of the lease, kept open (not passed to the command)
    /// until this process ends with the group: so that lockwise's death frees the lock only
    /// once no process of the command can work on.
    held: Option<OwnedFd>,
    lock_dies_with_parent: bool,
    /// Variables set (`Some`) or removed in the command's environment.
    env: Vec<(OsString, Option<OsString>)>,
    command: Vec<OsString>,
}

impl SuperviseArgs {
    /// Takes over the descriptors the command line names.
    pub(crate) fn into_supervised(self) -> io::Result<Supervised> {
        Ok(Supervised {
            forwarded: self.forwarded,
            terminal: false,
            kill_after: self.kill_after,
            deadline: self.deadline_fd.map(adopt).transpose()?,
            held: None,
            lock_dies_with_parent: self.lock_dies_with_parent,
            env: Vec::new(),
            command: self.command,
        })
    }
}

impl Supervised {
    /// `lockwise run`'s orders: signals are forwarded to the group by lockwise (see
    /// `--forwarded`).
    pub(crate) fn forwarded(received: Received) -> Supervised {
        let Received {
            orders,
            deadline,
            held,
        } = received;
        Supervised {
            forwarded: true,
            terminal: orders.terminal,
            kill_after: orders.kill_after,
            deadline: Some(deadline),
            held,
            lock_dies_with_parent: orders.lock_dies_with_parent,
            env: orders.env,
            command: orders.command,
        }
    }
}

/// Runs and supervises the command (see [`SuperviseArgs`]). The process's exit code.
pub(crate) async fn supervise(args: Supervised) -> u8 {
    let parent = nix::unistd::getppid();
    // Held until this process ends, which it does only with (or after) the whole group.
    let _held = args.held;
    if args.terminal {
        into_foreground();
    }
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        return exit::BACKEND;
    };
    // With --forwarded, signals meant for the command are caught here and dropped. Handlers,
    // not SIG_IGN: ignored signals would stay ignored in the command after exec.
    let forwarded: &[Signal] = if args.forwarded {
        &[Signal::SIGINT, Signal::SIGHUP, Signal::SIGQUIT]
    } else {
        &[]
    };
    let Ok(mut others) = Signals::install(forwarded) else {
        return exit::BACKEND;
    };
    let Some((program, rest)) = args.command.split_first() else {
        return exit::USAGE;
    };
    let mut lease = match args.deadline.map(Lease::open).transpose() {
        Ok(lease) => lease,
        Err(e) => {
            eprintln!("lockwise: no lease deadline from lockwise ({e}); the command was not run");
            return exit::BACKEND;
        }
    };
    if lease
        .as_ref()
        .is_some_and(|l| deadline::boot_now() >= l.deadline)
    {
        eprintln!("lockwise: the lease ran out before the command could start");
        return exit::LOST;
    }
    let grace = u64::try_from(args.kill_after.as_nanos()).unwrap_or(u64::MAX);
    // The command's orphans come back to this process, so that once it has no child left,
    // nothing of the command runs (see `no_descendants`).
    let subreaper = nix::sys::prctl::set_child_subreaper(true).is_ok();
    let mut command = Command::new(program);
    command.args(rest);
    for (name, value) in &args.env {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("lockwise: cannot run {}: {e}", program.to_string_lossy());
            return match e.kind() {
                io::ErrorKind::NotFound => exit::NOT_FOUND,
                _ => exit::CANNOT_EXECUTE,
            };
        }
    };
    let group = nix::unistd::getpgrp();
    let me = nix::unistd::getpid();
    // Set once the parent is gone: the group is being stopped and dies by this instant.
    let mut kill_at: Option<Instant> = None;
    let mut status: Option<u8> = None;
    // With a terminal: the SIGINTs and SIGTERMs meant for the command so far.
    let mut stops = 0u32;
    // SIGTERMs this process sent its own group for the lease: not requests to stop.
    let mut own_terms = 0u32;
    let stop = |stops: &mut u32| {
        *stops += 1;
        if args.terminal && *stops >= 2 {
            eprintln!(
                "lockwise: a second signal to stop; sending SIGKILL to the command's process group"
            );
            let _ = killpg(group, Signal::SIGKILL); // this process included
        }
    };
    loop {
        if let Some(code) = status {
            // `lockwise run` holds the lock until the whole group is gone, so this process
            // stays to end what the command left behind should lockwise die meanwhile.
            let gone = || (subreaper && no_descendants()) || !group_alive(group, Some(me));
            if !args.forwarded || kill_at.is_some() || gone() {
                if kill_at.is_some() {
                    let _ = killpg(group, Signal::SIGKILL);
                }
                return code;
            }
        }
        let due = lease.as_ref().map(|l| l.due(grace));
        tokio::select! {
            exited = child.wait(), if status.is_none() => {
                status = Some(match exited {
                    Ok(status) => exit_code(status),
                    Err(_) => exit::BACKEND,
                });
            }
            _ = sleep(Duration::from_millis(50)), if status.is_some() => {}
            _ = sleep_until(kill_at.unwrap_or_else(Instant::now)), if kill_at.is_some() => {
                let _ = killpg(group, Signal::SIGKILL);
                return 128 + Signal::SIGKILL as u8;
            }
            newer = next_deadline(&mut lease), if lease.as_ref().is_some_and(Lease::listens) => {
                if let Some(lease) = &mut lease {
                    lease.deadline = newer;
                }
            }
            () = lease_due(due), if due.is_some() => {
                let Some(lease) = &mut lease else { continue };
                // A deadline lockwise sent before this moment counts, even if not read yet.
                if !lease.stopping && let Some(newer) = lease.source.drain() {
                    lease.deadline = newer;
                    continue;
                }
                if lease.stopping {
                    let _ = killpg(group, Signal::SIGKILL); // this process included
                    return 128 + Signal::SIGKILL as u8;
                }
                // From here on the stop is not taken back, whatever lockwise sends.
                lease.stopping = true;
                // Once the worker asked the command to stop, a SIGTERM of ours is a second one.
                if !lease.asked_by_parent {
                    own_terms += 1;
                    let _ = killpg(group, Signal::SIGTERM);
                }
            }
            _ = term.recv() => {
                let orphaned = nix::unistd::getppid() != parent;
                if own_terms > 0 && !orphaned {
                    own_terms -= 1;
                    continue;
                }
                if !args.forwarded {
                    if !orphaned {
                        // The worker's request to stop, sent to the command too: the lease's
                        // SIGTERM would be a second one; its SIGKILL still comes at the deadline.
                        // Renewals still count: the worker drops the handler itself, at
                        // the end of its own grace, unless the deadline comes first.
                        if let Some(lease) = &mut lease {
                            lease.asked_by_parent = true;
                        }
                        continue;
                    }
                    let _ = killpg(group, Signal::SIGKILL);
                    return 128 + Signal::SIGTERM as u8;
                }
                if kill_at.is_none() && orphaned && args.lock_dies_with_parent {
                    let _ = killpg(group, Signal::SIGKILL); // this process included
                    return 128 + Signal::SIGKILL as u8;
                }
                if kill_at.is_none() && orphaned {
                    kill_at = Some(Instant::now() + args.kill_after);
                    // Reaches this process too: ignored. Not twice, if the lease's came first.
                    if !lease.as_ref().is_some_and(|l| l.stopping) {
                        let _ = killpg(group, Signal::SIGTERM);
                    }
                } else if kill_at.is_none() {
                    stop(&mut stops);
                }
            }
            sig = others.recv() => {
                if sig == Signal::SIGINT && kill_at.is_none() {
                    stop(&mut stops);
                }
            }
        }
    }
}

/// The lease's deadline as the supervisor holds it.
struct Lease {
    source: DeadlineSource,
    /// Nanoseconds on `CLOCK_BOOTTIME`.
    deadline: u64,
    /// SIGTERM was due for this deadline; SIGKILL follows at it.
    stopping: bool,
    /// The parent (the queue worker) already sent the command SIGTERM.
    asked_by_parent: bool,
}

impl Lease {
    fn open(fd: OwnedFd) -> io::Result<Lease> {
        let (source, deadline) = DeadlineSource::open(fd)?;
        Ok(Lease {
            source,
            deadline,
            stopping: false,
            asked_by_parent: false,
        })
    }

    /// When the next step is due: SIGTERM `grace` before the deadline, then SIGKILL at it.
    fn due(&self, grace: u64) -> u64 {
        if self.stopping {
            self.deadline
        } else {
            self.deadline.saturating_sub(grace)
        }
    }

    /// Whether newer deadlines are still taken.
    fn listens(&self) -> bool {
        !self.stopping && self.source.is_open()
    }
}

/// The next deadline lockwise sends (never, without a lease).
async fn next_deadline(lease: &mut Option<Lease>) -> u64 {
    match lease {
        Some(lease) => lease.source.next().await,
        None => std::future::pending().await,
    }
}

/// Resolves at `due`, on `CLOCK_BOOTTIME` (never, without one).
async fn lease_due(due: Option<u64>) {
    match due {
        Some(due) => deadline::until_boottime(due).await,
        None => std::future::pending().await,
    }
}
