//! Child processes that never outlive the `lockwise` process that started them.

use std::io;

use nix::sys::signal::Signal;
use tokio::process::Command;

/// If lockwise itself dies (SIGKILL, a crash), the kernel sends the child SIGTERM: a command
/// must not go on working without the lock or lease that lockwise was keeping for it.
#[allow(unsafe_code)]
pub(crate) fn stop_with_parent(command: &mut Command) {
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec and only makes the
    // async-signal-safe system calls prctl, getppid and kill.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGTERM).map_err(io::Error::from)?;
            if nix::unistd::getppid() != parent {
                // lockwise died between fork and prctl.
                let _ = nix::sys::signal::kill(nix::unistd::getpid(), Signal::SIGTERM);
            }
            Ok(())
        });
    }
}
