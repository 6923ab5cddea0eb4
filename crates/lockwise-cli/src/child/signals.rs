//! Signals caught for a command, to forward to its process group (or, in the supervisor, to
//! drop): once caught, they no longer stop lockwise itself. And the graceful stop of the
//! long-running commands (`queue work`, `queue schedule`, `ui`) at SIGTERM or SIGINT.

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

/// A token cancelled at the first SIGTERM or SIGINT, after `said` is printed on stderr: the
/// graceful stop of a long-running command.
pub(crate) fn graceful_stop(
    said: Option<&'static str>,
) -> Result<tokio_util::sync::CancellationToken, crate::exit::Failure> {
    let mut signals =
        Signals::install(&[Signal::SIGTERM, Signal::SIGINT]).map_err(|e| crate::exit::Failure {
            code: crate::exit::BACKEND,
            message: format!("cannot install signal handlers: {e}"),
        })?;
    let stop = tokio_util::sync::CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move {
        signals.recv().await;
        if let Some(said) = said {
            eprintln!("{said}");
        }
        token.cancel();
    });
    Ok(stop)
}
