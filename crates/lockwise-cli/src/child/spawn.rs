//! Starting a command under `lockwise supervise --forwarded`, in a process group of its own.

use std::ffi::OsString;
use std::io;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::process::Command;

use super::deadline::DeadlineFeed;
use super::fds::stop_with_parent;

/// What the supervisor of a command must know beyond its deadline feed.
#[derive(Debug)]
pub(crate) struct Supervision {
    /// SIGTERM this long before the lease's deadline (and after lockwise's death), SIGKILL at
    /// it: the supervisor's `--kill-after`.
    pub(crate) kill_after: Duration,
    /// The lock is free the moment lockwise dies (a database session's connection, a file
    /// lock's flock), so no grace after its death (`--lock-dies-with-parent`).
    pub(crate) lock_dies_with_parent: bool,
}

impl Supervision {
    /// The command line of the supervisor of `command`, fed by `feed`, as the leader of a new
    /// process group that gets SIGTERM when lockwise dies. Set the command's environment on
    /// it, spawn it, then call [`DeadlineFeed::started`].
    pub(crate) fn command(self, feed: &DeadlineFeed, command: &[OsString]) -> io::Result<Command> {
        let mut supervised = Command::new(std::env::current_exe()?);
        supervised
            .args(["supervise", "--forwarded", "--kill-after"])
            .arg(format!("{}ms", self.kill_after.as_millis()));
        feed.attach(&mut supervised);
        if self.lock_dies_with_parent {
            supervised.arg("--lock-dies-with-parent");
        }
        supervised
            .arg("--")
            .args(command)
            // The URL may carry a password; the command has no use for it.
            .env_remove("LOCKWISE_URL")
            .process_group(0);
        stop_with_parent(&mut supervised, Signal::SIGTERM);
        Ok(supervised)
    }
}
