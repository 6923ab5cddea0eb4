//! The lease's local deadline, fed by `lockwise` to the `lockwise supervise` process under it,
//! so that the command dies by the deadline even when `lockwise` itself is frozen (SIGSTOP, a
//! debugger, CPU starvation, swapping) and can neither renew the lease nor stop the command.
//!
//! `lockwise` sends each deadline over a pipe of its own (an inherited fd, closed for the
//! command) as 8 bytes: nanoseconds on `CLOCK_BOOTTIME`, little-endian. A new deadline replaces
//! the previous one; renewals move it forward, a lost lock brings it close. The first is in the
//! pipe before the supervisor starts, so the command never runs without one. `CLOCK_BOOTTIME`,
//! like a lock server's TTL (and unlike `CLOCK_MONOTONIC`), keeps counting while the machine is
//! suspended, and both processes share it.

use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use lockwise::lease::boottime_nanos;
use nix::errno::Errno;
use nix::fcntl::{FcntlArg, FdFlag, OFlag, fcntl};
use tokio::net::unix::pipe;
use tokio::process::Command;
use tokio::time::Instant;

/// How long before the supervisor's own decision `lockwise` makes its last one: a renewal that
/// lockwise has not fed by then is not fed at all, so both decide on the same deadline.
pub(crate) const DECIDE_AHEAD: Duration = Duration::from_millis(10);

/// `lockwise`'s end of the feed.
#[derive(Debug)]
pub(crate) struct DeadlineFeed {
    write: OwnedFd,
    /// The supervisor's end, until it is started.
    read: Option<OwnedFd>,
    /// The last deadline the supervisor was sent.
    fed: Instant,
}

impl DeadlineFeed {
    /// A feed that already holds `first`, the deadline the command starts under.
    pub(crate) fn new(first: Instant) -> io::Result<DeadlineFeed> {
        // Close-on-exec on both ends: only the supervisor gets the read end (see `attach`).
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        // Never block lockwise on a supervisor that stopped reading; that supervisor's group
        // is then stopped by lockwise itself.
        let flags = OFlag::from_bits_retain(fcntl(&write, FcntlArg::F_GETFL)?);
        fcntl(&write, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
        let mut feed = DeadlineFeed {
            write,
            read: Some(read),
            fed: first,
        };
        if !feed.send(first)? {
            return Err(io::Error::other("cannot write the first deadline"));
        }
        Ok(feed)
    }

    /// Hands the read end to the supervisor `command` starts (`--deadline-fd N`), open across
    /// that one exec only.
    #[allow(unsafe_code)]
    pub(crate) fn attach(&self, command: &mut Command) {
        let Some(read) = &self.read else {
            return;
        };
        let fd = std::os::fd::AsRawFd::as_raw_fd(read);
        command.arg("--deadline-fd").arg(fd.to_string());
        // SAFETY: the closure runs in the forked child before exec and only calls fcntl (async-
        // signal-safe) on `fd`, which this feed keeps open until the child is started.
        unsafe {
            command.pre_exec(move || {
                let fd = std::os::fd::BorrowedFd::borrow_raw(fd);
                fcntl(fd, FcntlArg::F_SETFD(FdFlag::empty()))?;
                Ok(())
            });
        }
    }

    /// The read end, for a supervisor that gets it over a socket.
    pub(crate) fn receiver(&self) -> io::Result<BorrowedFd<'_>> {
        self.read
            .as_ref()
            .map(AsFd::as_fd)
            .ok_or_else(|| io::Error::other("the deadline feed's read end was handed over"))
    }

    /// Closes lockwise's copy of the read end once the supervisor has its own, so that the
    /// supervisor's death is a broken pipe here.
    pub(crate) fn started(&mut self) {
        self.read = None;
    }

    /// The last deadline the supervisor was sent.
    pub(crate) fn fed(&self) -> Instant {
        self.fed
    }

    /// Sends a renewed `deadline` if it is later than the one fed, unless the supervisor may
    /// already be deciding on that one (its SIGTERM is due `grace` before it): the stop has
    /// begun then. Whether it was sent.
    pub(crate) fn renew(&mut self, deadline: Instant, grace: Duration) -> io::Result<bool> {
        if deadline <= self.fed {
            return Ok(false);
        }
        let decides = self.fed.checked_sub(grace);
        if decides.is_none_or(|at| Instant::now() + DECIDE_AHEAD / 2 >= at) {
            return Ok(false);
        }
        self.send(deadline)
    }

    /// Sends `deadline` to the supervisor. `Ok(false)` when it cannot take it now (its pipe is
    /// full: it is not reading) or is gone; the supervisor then keeps the previous deadline.
    pub(crate) fn send(&mut self, deadline: Instant) -> io::Result<bool> {
        let bytes = to_boottime(deadline)?.to_le_bytes();
        // Up to PIPE_BUF bytes are written whole or not at all.
        match nix::unistd::write(&self.write, &bytes) {
            Ok(n) if n == bytes.len() => {
                self.fed = deadline;
                Ok(true)
            }
            Ok(_) | Err(Errno::EAGAIN | Errno::EPIPE) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

/// A lease whose deadline lockwise feeds the supervisor: a lock's guard, a membership.
pub(crate) trait FedLease {
    /// The lease's local deadline, moved by each renewal.
    fn deadline(&self) -> Instant;
    /// Whether the lease is known lost.
    fn is_lost(&self) -> bool;
    /// What the lease is, for the log.
    fn describe(&self) -> String;
}

impl FedLease for lockwise::Guard {
    fn deadline(&self) -> Instant {
        lockwise::Guard::deadline(self)
    }
    fn is_lost(&self) -> bool {
        lockwise::Guard::is_lost(self)
    }
    fn describe(&self) -> String {
        format!("lock {:?}", self.key())
    }
}

impl FedLease for lockwise::partition::Member {
    fn deadline(&self) -> Instant {
        lockwise::partition::Member::deadline(self)
    }
    fn is_lost(&self) -> bool {
        lockwise::partition::Member::is_lost(self)
    }
    fn describe(&self) -> String {
        format!("member {:?} of group {:?}", self.id(), self.group())
    }
}

impl DeadlineFeed {
    /// Feeds the supervisor `lease`'s deadline if a renewal moved it, unless the supervisor
    /// may already be deciding on the previous one (its SIGTERM is due `grace` before it). A
    /// refused renewal moves nothing, and a lost lease is never fed. Whether a new deadline was
    /// fed.
    pub(crate) fn renewed(&mut self, lease: &impl FedLease, grace: Duration) -> bool {
        if lease.is_lost() {
            return false;
        }
        match self.renew(lease.deadline(), grace) {
            Ok(sent) => sent,
            Err(e) => {
                tracing::warn!(lease = lease.describe(), error = %e, "cannot feed the lease's deadline");
                false
            }
        }
    }
}

/// `deadline` (on the Tokio clock, `CLOCK_MONOTONIC`) on `CLOCK_BOOTTIME`.
fn to_boottime(deadline: Instant) -> io::Result<u64> {
    // BOOTTIME first, then the time left: the result errs early, never late.
    let now = boottime_nanos()?;
    let left = deadline.saturating_duration_since(Instant::now());
    Ok(now.saturating_add(u64::try_from(left.as_nanos()).unwrap_or(u64::MAX)))
}

/// The supervisor's end of the feed.
#[derive(Debug)]
pub(crate) struct DeadlineSource {
    /// `None` once closed: lockwise is gone (its death is handled as such).
    pipe: Option<pipe::Receiver>,
    /// Bytes of a deadline not yet whole.
    partial: Vec<u8>,
}

impl DeadlineSource {
    /// Takes over `owned` (close-on-exec: the command must not inherit it) and waits for the
    /// first deadline, which lockwise wrote before starting this process.
    pub(crate) fn open(owned: OwnedFd) -> io::Result<(DeadlineSource, u64)> {
        let mut file = std::fs::File::from(owned);
        let mut first = [0u8; 8];
        file.read_exact(&mut first)?;
        let pipe = pipe::Receiver::from_owned_fd(OwnedFd::from(file))?;
        Ok((
            DeadlineSource {
                pipe: Some(pipe),
                partial: Vec::new(),
            },
            u64::from_le_bytes(first),
        ))
    }

    /// Whether lockwise may still send deadlines.
    pub(crate) fn is_open(&self) -> bool {
        self.pipe.is_some()
    }

    /// The newest deadline sent, when one arrives. Cancel safe (what was read stays here);
    /// pending forever once the pipe is closed.
    pub(crate) async fn next(&mut self) -> u64 {
        loop {
            if let Some(newest) = self.drain() {
                return newest;
            }
            let Some(pipe) = &self.pipe else {
                return std::future::pending().await;
            };
            if pipe.readable().await.is_err() {
                self.pipe = None;
            }
        }
    }

    /// The newest deadline already in the pipe, without waiting.
    pub(crate) fn drain(&mut self) -> Option<u64> {
        let mut buf = [0u8; 512];
        while let Some(pipe) = &self.pipe {
            match pipe.try_read(&mut buf) {
                Ok(0) => self.pipe = None,
                Ok(n) => self.partial.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => self.pipe = None,
            }
        }
        let whole = self.partial.len() / 8 * 8;
        let newest = self.partial[..whole]
            .chunks_exact(8)
            .filter_map(|chunk| <[u8; 8]>::try_from(chunk).ok())
            .map(u64::from_le_bytes)
            .next_back();
        self.partial.drain(..whole);
        newest
    }
}

/// How often a wait for a `CLOCK_BOOTTIME` instant looks at that clock: Tokio sleeps on
/// `CLOCK_MONOTONIC`, which stands still while the machine is suspended.
const SUSPEND_CHECK: Duration = Duration::from_millis(250);

/// Resolves at `at` (nanoseconds on `CLOCK_BOOTTIME`): on time while the machine runs, and
/// within [`SUSPEND_CHECK`] of a resume that found it passed.
pub(crate) async fn until_boottime(at: u64) {
    loop {
        let now = boot_now();
        if now >= at {
            return;
        }
        tokio::time::sleep(Duration::from_nanos(at - now).min(SUSPEND_CHECK)).await;
    }
}

/// Now on `CLOCK_BOOTTIME`, in nanoseconds; the end of time if it cannot be read, so that a
/// deadline is then taken as passed rather than never reached.
pub(crate) fn boot_now() -> u64 {
    boottime_nanos().unwrap_or(u64::MAX)
}
