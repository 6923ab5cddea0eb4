//! Every actor process still running, so that none outlives the lab: not a scenario that
//! fails half-way, not a SIGINT/SIGTERM/SIGHUP.

use std::sync::Mutex;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::scratch;

/// Children the lab may have frozen.
static CHILDREN: Mutex<Vec<i32>> = Mutex::new(Vec::new());

pub(super) fn register(pid: i32) {
    if let Ok(mut children) = CHILDREN.lock() {
        children.push(pid);
    }
}

/// Forgets a child that was reaped, so that no later signal can reach a process that reused
/// its pid.
pub(super) fn forget(pid: i32) {
    if let Ok(mut children) = CHILDREN.lock() {
        children.retain(|p| *p != pid);
    }
}

/// Resumes and kills every actor still running (a stopped one included).
pub(super) fn kill_all() {
    let pids: Vec<i32> = CHILDREN
        .lock()
        .map(|mut c| std::mem::take(&mut *c))
        .unwrap_or_default();
    for pid in pids {
        let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

/// On SIGINT, SIGTERM or SIGHUP: kills every actor, removes the scratch directory and exits
/// with 128 + the signal's number.
pub(super) fn kill_all_on_signal() {
    tokio::spawn(async {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) else {
            return;
        };
        let code = tokio::select! {
            _ = int.recv() => 130,
            _ = term.recv() => 143,
            _ = hup.recv() => 129,
        };
        kill_all();
        scratch::remove();
        eprintln!("lockwise lab: interrupted; every actor was resumed and killed");
        std::process::exit(code);
    });
}
