//! [`TcpProxy`]: a TCP proxy between a client and a server on loopback that can cut the link
//! (hold every byte in both directions, as a partition or a black hole does), hold only the
//! server's replies (a request that arrives and commits, whose answer never comes back), add
//! latency, or reset every connection — the network faults of the reliability catalogue,
//! without root.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

#[derive(Debug, Default)]
struct Link {
    /// Bytes are held (not dropped) while this is set, and flow again when it is cleared.
    cut: AtomicBool,
    /// Added to every chunk, each way, in microseconds.
    delay_us: AtomicU64,
    /// Every connection's two sockets, to reset them.
    open: Mutex<Vec<TcpStream>>,
    closed: AtomicBool,
    /// Server → client bytes are held while this is set (requests still flow).
    replies_held: AtomicBool,
    /// When a client → server chunk containing these bytes has been forwarded, replies are
    /// held from then on (sets `replies_held`).
    hold_replies_after: Mutex<Option<Vec<u8>>>,
    /// Chunks that arrived while the link was cut or replies were held: proof that a fault
    /// hit real traffic.
    held: AtomicU64,
}

impl Link {
    /// Whether a chunk going this way must wait now.
    fn holding(&self, to_client: bool) -> bool {
        self.cut.load(Ordering::SeqCst) || (to_client && self.replies_held.load(Ordering::SeqCst))
    }

    /// Arms the reply hold if `chunk`, just forwarded to the server, carries the trigger.
    fn check_trigger(&self, chunk: &[u8]) {
        let mut trigger = self
            .hold_replies_after
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let hit = trigger
            .as_deref()
            .is_some_and(|needle| chunk.windows(needle.len().max(1)).any(|w| w == needle));
        if hit {
            *trigger = None;
            self.replies_held.store(true, Ordering::SeqCst);
        }
    }
}

/// A proxy on a spare port of 127.0.0.1 forwarding to `127.0.0.1:target`. Dropping it stops
/// accepting and resets every connection.
///
/// ```no_run
/// use lockwise_testkit::proxy::TcpProxy;
///
/// let proxy = TcpProxy::start(6379);
/// let url = format!("redis://127.0.0.1:{}/", proxy.port());
/// // … connect through `url`, then:
/// proxy.cut(); // a partition: nothing passes, nothing is refused
/// proxy.heal();
/// ```
#[derive(Debug)]
pub struct TcpProxy {
    port: u16,
    link: Arc<Link>,
}

impl TcpProxy {
    /// Starts forwarding to `127.0.0.1:target`.
    pub fn start(target: u16) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .unwrap_or_else(|e| panic!("cannot bind the proxy: {e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("proxy address: {e}"))
            .port();
        let link = Arc::new(Link::default());
        let accepting = link.clone();
        thread::spawn(move || {
            for client in listener.incoming() {
                if accepting.closed.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
                    continue;
                };
                if let (Ok(c3), Ok(s3)) = (client.try_clone(), server.try_clone()) {
                    accepting
                        .open
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .extend([c3, s3]);
                }
                let (up, down) = (accepting.clone(), accepting.clone());
                thread::spawn(move || pump(client, s2, &up, false));
                thread::spawn(move || pump(server, c2, &down, true));
            }
        });
        TcpProxy { port, link }
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Holds every byte in both directions from now on (a partition or black hole: the
    /// connections stay open, nothing is refused, nothing arrives).
    pub fn cut(&self) {
        self.link.cut.store(true, Ordering::SeqCst);
    }

    /// Lets the held bytes and all later ones through again (ends a cut and a reply hold,
    /// and disarms [`hold_replies_after`](Self::hold_replies_after)).
    pub fn heal(&self) {
        *self
            .link
            .hold_replies_after
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        self.link.replies_held.store(false, Ordering::SeqCst);
        self.link.cut.store(false, Ordering::SeqCst);
    }

    /// Holds every server → client byte from now on, while requests still reach the server:
    /// the server runs (and commits) what it receives, and the client never hears about it.
    pub fn hold_replies(&self) {
        self.link.replies_held.store(true, Ordering::SeqCst);
    }

    /// Like [`hold_replies`](Self::hold_replies), but only from the moment a client → server
    /// chunk containing `needle` has been forwarded (on any connection): the request carrying
    /// it reaches the server, its reply and every later one are held. A test uses it to lose
    /// the answer to one particular statement (say, the text of a claim or a `COMMIT`), which
    /// no timing from outside can aim at. A needle split across two chunks is not seen.
    pub fn hold_replies_after(&self, needle: &[u8]) {
        *self
            .link
            .hold_replies_after
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(needle.to_vec());
    }

    /// Delays every chunk of bytes by `delay`, in each direction (one-way latency).
    pub fn delay(&self, delay: Duration) {
        let us = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.link.delay_us.store(us, Ordering::SeqCst);
    }

    /// How many chunks of bytes a cut or a reply hold has held so far: a test that injects
    /// either checks this, so that a fault no traffic crossed cannot pass for one.
    pub fn held(&self) -> u64 {
        self.link.held.load(Ordering::SeqCst)
    }

    /// Resets every open connection (new ones are still accepted).
    pub fn reset(&self) {
        let open = std::mem::take(
            &mut *self
                .link
                .open
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for socket in open {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.link.closed.store(true, Ordering::SeqCst);
        self.heal();
        self.reset();
        // Wake the accept loop so that it sees `closed`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Copies `from` to `to` chunk by chunk, holding chunks while the link is cut (and, towards
/// the client, while replies are held).
fn pump(mut from: TcpStream, mut to: TcpStream, link: &Link, to_client: bool) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let delay = link.delay_us.load(Ordering::SeqCst);
        if delay > 0 {
            thread::sleep(Duration::from_micros(delay));
        }
        if link.holding(to_client) {
            link.held.fetch_add(1, Ordering::SeqCst);
        }
        while link.holding(to_client) && !link.closed.load(Ordering::SeqCst) {
            thread::sleep(Duration::from_millis(5));
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
        if !to_client {
            link.check_trigger(&buf[..n]);
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
