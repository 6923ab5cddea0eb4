//! The terminal's foreground, given to a command's process group and taken back.

use std::io;

use nix::sys::signal::Signal;
use nix::unistd::Pid;

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
pub(crate) struct Terminal {
    /// lockwise's own process group, which had the foreground.
    own: Pid,
}

impl Terminal {
    /// The terminal, if stdin is one, it is lockwise's controlling terminal, and lockwise's
    /// group has its foreground.
    pub(crate) fn foreground() -> Option<Terminal> {
        use std::io::IsTerminal;
        let stdin = io::stdin();
        if !stdin.is_terminal() {
            return None;
        }
        let own = nix::unistd::getpgrp();
        (nix::unistd::tcgetpgrp(&stdin).ok()? == own).then_some(Terminal { own })
    }

    /// Gives the terminal's foreground back to lockwise's group.
    pub(crate) fn take_back(&self) {
        let own = self.own;
        let _ = without_sigttou(|| nix::unistd::tcsetpgrp(io::stdin(), own));
    }
}

/// In the command's supervisor, before the command starts: makes this process's group (of
/// which it is the leader) the terminal's foreground group. A failure leaves the command in the
/// background, as it would be without a terminal: not fatal.
pub(super) fn into_foreground() {
    let me = nix::unistd::getpid();
    let _ = without_sigttou(|| nix::unistd::tcsetpgrp(io::stdin(), me));
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
