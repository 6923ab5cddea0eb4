//! Child processes that never outlive the `lockwise` process that started them.

use std::io;

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
