//! A command's process group: signalling it, knowing when all of it is gone, and its exit
//! status as a shell reports it.

use std::process::ExitStatus;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::Child;

/// The process group of a command started as its leader (`process_group(0)`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProcessGroup(Option<Pid>);

impl ProcessGroup {
    /// The group `child` leads; none if it was already reaped.
    pub(crate) fn led_by(child: &Child) -> Self {
        ProcessGroup(
            child
                .id()
                .and_then(|id| i32::try_from(id).ok())
                .map(Pid::from_raw),
        )
    }

    /// The group `leader` leads.
    pub(crate) fn of(leader: Pid) -> Self {
        ProcessGroup(Some(leader))
    }

    /// Sends `signal` to every process of the group (nothing once it is gone).
    pub(crate) fn signal(&self, signal: Signal) {
        if let Some(group) = self.0 {
            let _ = killpg(group, signal);
        }
    }

    /// Whether any process of the group still runs (see [`group_alive`]).
    pub(crate) fn alive(&self) -> bool {
        self.0.is_some_and(|g| group_alive(g, None))
    }
}

/// Whether a child subreaper (`PR_SET_CHILD_SUBREAPER`) has no descendant left. Every process
/// its command started is then its descendant (orphans come back to it), so none left means no
/// process of the command's group runs, known without a scan of `/proc`. Reaps exited
/// children: call it only once the command's own exit was collected.
pub(crate) fn no_descendants() -> bool {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Err(Errno::ECHILD) => return true,
            Err(Errno::EINTR) => {}
            Ok(WaitStatus::StillAlive) | Err(_) => return false,
            Ok(_) => {}
        }
    }
}

/// Whether any process of `group` (but `except`) still runs. Reaps the group's zombies that
/// became ours (as PID 1, or as the parent of orphans), and does not count zombies of others.
pub(crate) fn group_alive(group: Pid, except: Option<Pid>) -> bool {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    let any_in_group = Pid::from_raw(-group.as_raw());
    while let Ok(status) = waitpid(any_in_group, Some(WaitPidFlag::WNOHANG)) {
        if status == WaitStatus::StillAlive {
            break;
        }
    }
    if killpg(group, None) == Err(Errno::ESRCH) {
        return false;
    }
    let except = except.map(Pid::as_raw);
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries.flatten().any(|entry| {
        let pid = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<i32>().ok());
        if pid.is_none() || pid == except {
            return false;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // pid (comm) state ppid pgrp …; comm may contain spaces and parentheses.
        let Some((_, fields)) = stat.rsplit_once(')') else {
            return false;
        };
        let mut fields = fields.split_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|p| p.parse::<i32>().ok());
        pgrp == Some(group.as_raw()) && state != Some("Z") && state != Some("X")
    })
}

/// The exit code a shell reports for `status`: the code, or 128 + the signal that killed it.
pub(crate) fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(255),
        (None, None) => 1,
    }
}
