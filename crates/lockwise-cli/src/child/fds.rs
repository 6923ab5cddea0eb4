//! Descriptors and signals across the fork: the kernel's hold on a child, and a descriptor
//! passed to it under its own number (`--deadline-fd`).

use std::io;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::sys::signal::Signal;
use tokio::process::Command;

/// If lockwise itself dies (SIGKILL, a crash), the kernel sends the child `signal`: a command
/// must not go on working without the lock or lease that lockwise was keeping for it. (SIGTERM
/// for commands, so they can clean up; SIGKILL for the lab's actors, which may be stopped.)
#[allow(unsafe_code)]
pub(crate) fn stop_with_parent(command: &mut Command, signal: Signal) {
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec and only makes the
    // async-signal-safe system calls prctl, getppid and kill.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(signal).map_err(io::Error::from)?;
            if nix::unistd::getppid() != parent {
                // lockwise died between fork and prctl.
                let _ = nix::sys::signal::kill(nix::unistd::getpid(), signal);
            }
            Ok(())
        });
    }
}

/// Takes ownership of the descriptor `number` that its parent passed on the command line, and
/// makes it close-on-exec again, so that the command never inherits it.
#[allow(unsafe_code)]
pub(super) fn adopt(number: RawFd) -> io::Result<OwnedFd> {
    // Refuses a number that is not an open descriptor before owning it.
    // SAFETY: the borrow lasts for this one call, on a number checked to be open by it.
    fcntl(unsafe { BorrowedFd::borrow_raw(number) }, FcntlArg::F_GETFD)?;
    // SAFETY: the parent opened this descriptor for this process alone (`--deadline-fd`),
    // and nothing else in it uses that number.
    let fd = unsafe { OwnedFd::from_raw_fd(number) };
    fcntl(&fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    Ok(fd)
}
