//! The simulated world: the clock, the lock server and its backend.

use super::*;

pub(super) fn mutant(name: &str) -> Design {
    match name {
        "" | "real" => REAL,
        "no_fence" => Design {
            fence: false,
            ..REAL
        },
        "token_reset" => Design {
            token_floor: false,
            ..REAL
        },
        "no_local_deadline" => Design {
            local_deadline: false,
            ..REAL
        },
        other => panic!("unknown mutant {other:?}"),
    }
}

/// Everything the simulated processes share: the servers, the store, and the ghost records.
pub(super) struct World {
    pub(super) design: Design,
    pub(super) start: Instant,
    pub(super) server: Mutex<LockServer>,
    pub(super) store: Mutex<Store>,
    pub(super) queue: Mutex<Vec<Row>>,
    pub(super) trace: Mutex<Vec<String>>,
    pub(super) violations: Mutex<Vec<String>>,
}

impl fmt::Debug for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("World")
            .field("design", &self.design)
            .finish()
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl World {
    pub(super) fn log(&self, event: impl fmt::Display) {
        let at = (Instant::now() - self.start).as_micros();
        lock(&self.trace).push(format!("{at:>10}µs {event}"));
    }

    pub(super) fn violation(&self, what: String) {
        self.log(format_args!("VIOLATION {what}"));
        lock(&self.violations).push(what);
    }

    pub(super) fn ms(&self, now: Instant) -> u64 {
        EPOCH_MS + (now - self.start).as_millis() as u64
    }
}

// ----------------------------------------------------------------------------------------------
// The fake lock server and the backend (one connection per client)
// ----------------------------------------------------------------------------------------------

#[derive(Debug, Default)]
pub(super) struct LockServer {
    /// The live lease: owner, expiry.
    pub(super) lease: Option<(OwnerToken, Instant)>,
    /// The last token issued; 0 when none or lost in a crash.
    pub(super) last: u64,
    /// Refuses calls until then (restarting).
    pub(super) down_until: Option<Instant>,
    /// Ghost: the order of each grant, by owner.
    pub(super) grants: HashMap<OwnerToken, u64>,
}

impl LockServer {
    pub(super) fn live(&self, now: Instant) -> Option<(OwnerToken, Instant)> {
        self.lease.filter(|(_, expiry)| *expiry > now)
    }
}

pub(super) struct FakeBackend {
    pub(super) world: Arc<World>,
    pub(super) client: usize,
    pub(super) rng: Mutex<Rng>,
}

impl fmt::Debug for FakeBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FakeBackend(client {})", self.client)
    }
}

impl FakeBackend {
    /// One round trip: the request travels, the server applies `op` atomically (or refuses
    /// while restarting), the answer travels back. Dropped on the way, the request is lost;
    /// dropped on the way back, it was applied and the answer is lost.
    pub(super) async fn call<T>(
        &self,
        op: impl FnOnce(&mut LockServer, Instant) -> T,
    ) -> lockwise::Result<T> {
        let (there, back) = {
            let mut rng = lock(&self.rng);
            (rng.network(), rng.network())
        };
        sleep(there).await;
        let now = Instant::now();
        let out = {
            let mut server = lock(&self.world.server);
            if server.down_until.is_some_and(|until| now < until) {
                None
            } else {
                Some(op(&mut server, now))
            }
        };
        sleep(back).await;
        out.ok_or_else(|| Error::Backend {
            backend: "sim",
            message: "connection refused: the server is restarting".into(),
            source: None,
        })
    }
}

#[async_trait]
impl Backend for FakeBackend {
    async fn try_acquire(
        &self,
        _key: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> lockwise::Result<Attempt> {
        let world = self.world.clone();
        let client = self.client;
        self.call(move |s, now| {
            if let Some((_, expiry)) = s.live(now) {
                return Attempt::Held {
                    expires_in: Some(expiry - now),
                };
            }
            let token = if world.design.token_floor {
                (s.last + 1).max(world.ms(now) * 1024)
            } else {
                s.last + 1
            };
            s.last = token;
            s.lease = Some((owner, now + ttl));
            let grant = s.grants.len() as u64 + 1;
            s.grants.insert(owner, grant);
            world.log(format_args!(
                "server grants #{grant} token {token} to client {client}"
            ));
            Attempt::Granted(FencingToken::new(token))
        })
        .await
    }

    async fn extend(&self, _key: &str, owner: OwnerToken, ttl: Duration) -> lockwise::Result<bool> {
        self.call(move |s, now| match s.live(now) {
            Some((o, _)) if o == owner => {
                s.lease = Some((owner, now + ttl));
                true
            }
            _ => false,
        })
        .await
    }

    async fn release(&self, _key: &str, owner: OwnerToken) -> lockwise::Result<bool> {
        self.call(move |s, now| match s.live(now) {
            Some((o, _)) if o == owner => {
                s.lease = None;
                true
            }
            _ => false,
        })
        .await
    }

    async fn holds(&self, _key: &str, owner: OwnerToken) -> lockwise::Result<bool> {
        self.call(move |s, now| s.live(now).is_some_and(|(o, _)| o == owner))
            .await
    }

    async fn watch(&self, _key: &str) -> lockwise::Result<ReleaseWatch> {
        Ok(ReleaseWatch::none())
    }
}
