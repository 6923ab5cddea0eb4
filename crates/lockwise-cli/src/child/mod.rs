//! Child processes that never outlive the `lockwise` process that started them, nor the lease
//! they run under: starting a command under `lockwise supervise`, feeding that supervisor the
//! lease's deadline, forwarding signals to the command's process group, and the supervisor
//! itself.

mod deadline;
mod early;
mod fds;
mod group;
mod orders;
mod resolve;
mod signals;
mod spawn;
mod supervisor;
mod terminal;

pub(crate) use deadline::{DECIDE_AHEAD, DeadlineFeed};
pub(crate) use early::{Forked, Supervisor, Waiting, fork, obey};
pub(crate) use fds::stop_with_parent;
pub(crate) use group::{ProcessGroup, exit_code};
pub(crate) use orders::Orders;
pub(crate) use resolve::resolve;
pub(crate) use signals::{Signals, graceful_stop};
pub(crate) use spawn::Supervision;
pub(crate) use supervisor::{SuperviseArgs, supervise};
pub(crate) use terminal::Terminal;
