//! The supervisor of `lockwise run`'s command, forked before the lock is taken: a copy of
//! lockwise that waits for its [`Orders`], so that a command starts without a second start of
//! the lockwise binary (loader, relocations, the allocator's and the runtime's first pages)
//! after the grant. `queue work` and `partition` start `lockwise supervise` instead: their
//! processes run several threads, and a fork is only safe before the first.
//!
//! The copy makes itself the leader of a new process group and asks the kernel for SIGTERM on
//! lockwise's death, exactly as `lockwise supervise` does under [`super::stop_with_parent`];
//! then it waits. lockwise sends its orders once the lock is granted, or closes the socket
//! (conflict, error, no command to run), and the copy exits without a word.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::ExitStatus;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid};
use tokio::signal::unix::{SignalKind, signal};

use super::deadline::DeadlineFeed;
use super::group::ProcessGroup;
use super::orders::Orders;
use super::supervisor::{Supervised, supervise};
use crate::exit;

/// Which side of the fork this is.
pub(crate) enum Forked {
    /// lockwise, with the supervisor waiting for its orders.
    Parent(Waiting),
    /// The supervisor: run [`obey`] and exit with its code.
    Child(Obey),
}

/// A supervisor forked by [`fork`], waiting for its orders.
#[derive(Debug)]
pub(crate) struct Waiting {
    pid: Pid,
    socket: UnixStream,
}

/// The supervisor's side of the fork, for [`obey`].
pub(crate) struct Obey {
    socket: UnixStream,
    parent: Pid,
}

/// Forks the supervisor of a command that `lockwise run` is about to run.
///
/// Call it only while this process has one thread: before the runtime is built, before
/// anything starts a thread (the child of a fork has only the thread that forked, and a lock
/// another thread held would stay locked in it forever).
#[allow(unsafe_code)]
pub(crate) fn fork() -> io::Result<Forked> {
    let (ours, theirs) = UnixStream::pair()?;
    let parent = nix::unistd::getpid();
    // SAFETY: the caller forks while this process has one thread (see above), so the child
    // is a whole copy: no lock is held by a thread that does not exist in it.
    match unsafe { nix::unistd::fork() }? {
        ForkResult::Parent { child } => {
            drop(theirs);
            // As a shell does for a job: the group exists once fork returns on either side,
            // whichever runs first (the child does the same; one of them fails harmlessly).
            let _ = nix::unistd::setpgid(child, child);
            Ok(Forked::Parent(Waiting {
                pid: child,
                socket: ours,
            }))
        }
        ForkResult::Child => {
            drop(ours);
            Ok(Forked::Child(Obey {
                socket: theirs,
                parent,
            }))
        }
    }
}

/// The supervisor's life: wait for lockwise's orders, then supervise the command (see
/// [`supervise`]). The process's exit code.
pub(crate) fn obey(side: Obey) -> u8 {
    let Obey { socket, parent } = side;
    let _ = nix::unistd::setpgid(Pid::from_raw(0), Pid::from_raw(0));
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGTERM) {
        eprintln!("lockwise: the command's supervisor cannot follow lockwise's death: {e}");
        return exit::BACKEND;
    }
    if nix::unistd::getppid() != parent {
        // lockwise died before the prctl: nothing to supervise.
        return exit::BACKEND;
    }
    // Built while lockwise takes the lock.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("lockwise: the command's supervisor cannot start its runtime: {e}");
            return exit::BACKEND;
        }
    };
    let received = match Orders::receive(&socket) {
        Ok(Some(received)) => received,
        // No command to run after all.
        Ok(None) => return 0,
        Err(e) => {
            eprintln!("lockwise: the command's supervisor got no orders: {e}");
            return exit::BACKEND;
        }
    };
    drop(socket);
    let supervised = Supervised::forwarded(received);
    let code = runtime.block_on(supervise(supervised));
    runtime.shutdown_timeout(Duration::from_millis(100));
    code
}

impl Waiting {
    /// Sends the supervisor its orders, with `feed`'s read end (its first deadline in it) and
    /// `held`; lockwise's copies of both are closed after. Call within the runtime.
    pub(crate) fn start(
        self,
        orders: &Orders,
        feed: &mut DeadlineFeed,
        held: Option<OwnedFd>,
    ) -> io::Result<Supervisor> {
        // Before it can exit: its exit is then never missed (see `Supervisor::wait`).
        let exits = signal(SignalKind::child())?;
        orders.send(
            &self.socket,
            feed.receiver()?,
            held.as_ref().map(|fd| fd.as_fd()),
        )?;
        feed.started();
        Ok(Supervisor {
            pid: self.pid,
            exits,
        })
    }
}

/// A supervisor that got its orders: the leader of the command's process group.
#[derive(Debug)]
pub(crate) struct Supervisor {
    pid: Pid,
    exits: tokio::signal::unix::Signal,
}

impl Supervisor {
    /// The command's process group, which the supervisor leads.
    pub(crate) fn group(&self) -> ProcessGroup {
        ProcessGroup::of(self.pid)
    }

    /// Waits for the supervisor's exit and collects it. Cancel safe: nothing is collected
    /// until it has exited, and a SIGCHLD that comes meanwhile is kept for the next call.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        use std::os::unix::process::ExitStatusExt;
        loop {
            match waitpid(self.pid, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(_, code)) => return Ok(ExitStatus::from_raw(code << 8)),
                Ok(WaitStatus::Signaled(_, sig, core)) => {
                    return Ok(ExitStatus::from_raw(
                        sig as i32 | if core { 0x80 } else { 0 },
                    ));
                }
                Ok(_) => {}
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
            if self.exits.recv().await.is_none() {
                return Err(io::Error::other("no more SIGCHLD"));
            }
        }
    }
}
