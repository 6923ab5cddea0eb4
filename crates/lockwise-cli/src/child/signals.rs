//! Signals caught for a command, to forward to its process group (or, in the supervisor, to
//! drop): once caught, they no longer stop lockwise itself.

use std::io;
use std::task::Poll;

use nix::sys::signal::Signal;
use tokio::signal::unix::{SignalKind, signal};

/// Handlers for a set of signals.
pub(crate) struct Signals(Vec<(Signal, tokio::signal::unix::Signal)>);

impl Signals {
    /// Catches each of `which` from now on.
    pub(crate) fn install(which: &[Signal]) -> io::Result<Self> {
        which
            .iter()
            .map(|&sig| Ok((sig, signal(SignalKind::from_raw(sig as i32))?)))
            .collect::<io::Result<_>>()
            .map(Signals)
    }

    /// The next caught signal (never, for an empty set).
    pub(crate) async fn recv(&mut self) -> Signal {
        std::future::poll_fn(|cx| {
            for (sig, handler) in &mut self.0 {
                if handler.poll_recv(cx).is_ready() {
                    return Poll::Ready(*sig);
                }
            }
            Poll::Pending
        })
        .await
    }
}
