//! etcd: a put-if-absent transaction on a shared session lease, and the key's create revision
//! as the fencing token.
//!
//! # Stored names (fixed: two versions of lockwise must exclude each other)
//!
//! For key `K` under prefix `P` (default `lockwise/`):
//!
//! | name | content | lease |
//! |---|---|---|
//! | `P` `lock/` `K` | the owner token, 32 lowercase hex characters | the holder's session lease for the lock's TTL ([`lease_seconds`]) |
//! | `P` `partition/` `G` | partition group `G`'s roster (text); its version is the key's `version` | none |
//! | `P` `wait/` `K` `\0` `<id>` | empty: a waiter's place in the line for `K` (see `line.rs`), its create revision the order | the waiter's session lease for a 2 s TTL class |
//!
//! Each backend keeps one etcd lease per TTL class, its *session* (see `session.rs` for why a
//! shared lease is safe), kept alive by its locks' acquires and renewals. An acquire puts the
//! key on it in one transaction if the key's `create_revision` is 0 (no such key). The put's
//! revision, the key's create revision, is the fencing token: etcd's revision counts every
//! write of the cluster, is kept by the Raft log through leader changes and restarts, and never
//! goes back, so a token is never issued twice, where Redis and MariaDB keep theirs above a
//! clock. A renewal keeps the session alive and reads the key back (and moves the key to the
//! session of a new TTL, in a transaction that compares the owner, when the TTL changed); a
//! release deletes the key in a transaction that compares the owner. Waiters stand in a line
//! ordered by revision (see `line.rs`); the first watches the key and wakes on its deletion
//! (a release, an expiry, an operator's delete).
//!
//! A lock whose guard does not renew lives until its session lease runs out: while other
//! locks of its TTL class in the same backend keep that lease alive, that is later than its TTL.
//!
//! Calls go to one member at a time (see `members.rs`). A call that fails because its member
//! died or was cut off, does not answer within 1 s, or comes while the cluster elects a
//! leader, is sent again to the next member until 3 s have passed. Every call is safe to send twice:
//! an acquire whose answer was lost finds its own owner token in the key on the second try and
//! takes the grant with the key's create revision as its token; the others compare the owner.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, PutOptions, Txn, TxnOp, TxnOpResponse,
};
use tokio::sync::watch;
use tokio::time::Instant;

use super::{Attempt, Backend, LOSS_CHECK_EVERY, ReleaseWatch};
use crate::error::{Error, Result};
use crate::lease::{FencingToken, OwnerToken};
use members::Members;
use session::{Gone, Session, Sessions, lease_not_found};

pub use crate::url::EtcdUrl;
pub use session::lease_seconds;

mod inspect;
#[cfg(feature = "lab")]
mod lab;
mod line;
mod members;
mod session;

/// The prefix of every key unless the URL's path says otherwise.
pub const DEFAULT_PREFIX: &str = crate::url::etcd::DEFAULT_PREFIX;

/// How long connecting, and then each call, may take before it is reported as failed.
const CALL_TIMEOUT: Duration = Duration::from_secs(3);

/// How long one attempt of a call waits before it is sent again, likely to another member.
/// Every call is safe to send twice: writes compare the owner, and a lost grant's answer is
/// recognised by its value.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(1);

/// The most operations etcd takes in one transaction (its `--max-txn-ops` default).
const MAX_TXN_OPS: usize = 128;

/// Leases in etcd. Clones share one gRPC channel, balanced over the URL's members.
#[derive(Clone)]
pub struct EtcdBackend {
    inner: Arc<Inner>,
}

struct Inner {
    members: Members,
    prefix: String,
    shown: String,
    sessions: Sessions,
}

impl std::fmt::Debug for EtcdBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdBackend")
            .field("url", &self.inner.shown)
            .field("prefix", &self.inner.prefix)
            .finish_non_exhaustive()
    }
}

/// The etcd key of lock `key` under `prefix` (see the module's table): for tools and tests
/// that reach the key directly.
///
/// ```
/// assert_eq!(lockwise::backend::etcd::lock_name("lockwise/", "job"), "lockwise/lock/job");
/// ```
pub fn lock_name(prefix: &str, key: &str) -> String {
    format!("{prefix}lock/{key}")
}

impl EtcdBackend {
    /// Connects to the members of an `etcd://` URL and checks that one answers as etcd
    /// (a read of the lock prefix), within 3 seconds.
    ///
    /// ```no_run
    /// # async fn demo() -> lockwise::Result<()> {
    /// use lockwise::backend::etcd::EtcdBackend;
    /// let backend = EtcdBackend::connect("etcd://10.0.0.1:2379,10.0.0.2:2379/billing/").await?;
    /// let locker = lockwise::Locker::new(backend);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a malformed URL; [`Error::Backend`] when no member
    /// answers, the credentials are refused or the server is not etcd.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future closes the channel it opened; nothing is stored.
    pub async fn connect(url: &str) -> Result<EtcdBackend> {
        let url = EtcdUrl::parse(url)?;
        let shown = url.shown();
        let mut options = ConnectOptions::new()
            .with_connect_timeout(ATTEMPT_TIMEOUT)
            .with_timeout(CALL_TIMEOUT)
            // A member cut off from the leader answers no write and no linearizable read:
            // the client moves to another member instead of waiting on a minority.
            .with_require_leader(true)
            .with_keep_alive(Duration::from_secs(1), ATTEMPT_TIMEOUT);
        if let Some((user, password)) = &url.credentials {
            options = options.with_user(user.clone(), password.clone());
        }
        if let Some(tls) = &url.tls {
            options = options.with_tls(tls_options(tls, &shown)?);
        }
        let backend = EtcdBackend {
            inner: Arc::new(Inner {
                members: Members::new(&url.endpoints, options, ATTEMPT_TIMEOUT),
                prefix: url.prefix.clone(),
                shown,
                sessions: Sessions::default(),
            }),
        };
        let name = backend.name("probe");
        let probe = backend.call_raw(|mut client| {
            let name = name.clone();
            async move { client.get(name, None).await }
        });
        tokio::time::timeout(CALL_TIMEOUT + ATTEMPT_TIMEOUT, probe)
            .await
            .map_err(|_| unreachable(&backend.inner.shown, &"no member answered within 3 s"))?
            .map_err(|e| unreachable(&backend.inner.shown, &explained(&e, &url)))?;
        Ok(backend)
    }

    /// The etcd key of a partition group's roster (`<prefix>partition/<group>`).
    pub(crate) fn roster_name(&self, group: &str) -> String {
        format!("{}partition/{group}", self.inner.prefix)
    }

    /// The etcd key of lock `key`.
    fn name(&self, key: &str) -> Vec<u8> {
        lock_name(&self.inner.prefix, key).into_bytes()
    }

    fn error(&self, e: etcd_client::Error) -> Error {
        Error::backend("etcd", format!("etcd {}", self.inner.shown), e)
    }

    /// Runs `call` on a clone of the client, again after a failure that another member or
    /// the next leader may not have (see [`transient`]), until [`CALL_TIMEOUT`] has passed.
    pub(crate) async fn call<T, F, Fut>(&self, call: F) -> Result<T>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        self.call_raw(call).await.map_err(|e| self.error(e))
    }

    /// [`call`](Self::call), with etcd's own error.
    async fn call_raw<T, F, Fut>(&self, mut call: F) -> std::result::Result<T, etcd_client::Error>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        let until = Instant::now() + CALL_TIMEOUT;
        let mut pause = Duration::from_millis(20);
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let (member, client) = self.inner.members.current().await;
            let answer = match client {
                Ok(client) => tokio::time::timeout(ATTEMPT_TIMEOUT.min(left), call(client))
                    .await
                    // A member that neither answers nor refuses (cut off, or frozen).
                    .unwrap_or_else(|_| {
                        Err(etcd_client::Error::GRpcStatus(
                            tonic::Status::deadline_exceeded("no answer within the attempt's time"),
                        ))
                    }),
                Err(e) => Err(e),
            };
            match answer {
                Ok(answer) => return Ok(answer),
                // The server forgot the client's auth token (it does after `--auth-token-ttl`
                // idle, 5 minutes by default): authenticate again and send the call again.
                Err(e) if token_expired(&e) && Instant::now() + pause < until => {
                    let (_, client) = self.inner.members.current().await;
                    if let Ok(client) = client {
                        client.refresh_token().await?;
                    }
                }
                Err(e) if transient(&e) && Instant::now() + pause < until => {
                    tracing::debug!(error = %e, member, "etcd: a call failed, sending it to the next member");
                    self.inner.members.failed(member);
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn txn(&self, txn: Txn) -> Result<etcd_client::TxnResponse> {
        self.call(|mut client| {
            let txn = txn.clone();
            async move { client.txn(txn).await }
        })
        .await
    }

    /// The live session for locks of `ttl`, kept alive at least `ttl` past `start`.
    async fn session(&self, ttl: Duration, start: Instant) -> Result<Arc<Session>> {
        loop {
            let session = self.inner.sessions.get(self, ttl).await?;
            if session.cover(self, ttl, start).await?.is_ok() {
                return Ok(session);
            }
            // Gone: the next `get` grants a new one.
        }
    }

    /// Puts `key` for `owner` on `session` if the key is free: the transaction's answer, or
    /// `Err(Gone)` when the session's lease turned out to be gone.
    async fn put_if_absent(
        &self,
        name: &[u8],
        owner: OwnerToken,
        session: &Session,
    ) -> Result<std::result::Result<etcd_client::TxnResponse, Gone>> {
        let txn = Txn::new()
            .when([Compare::create_revision(name.to_vec(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                name.to_vec(),
                owner.to_hex(),
                Some(PutOptions::new().with_lease(session.id)),
            )])
            .or_else([TxnOp::get(name.to_vec(), None)]);
        let answer = self
            .call_raw(|mut client| {
                let txn = txn.clone();
                async move { client.txn(txn).await }
            })
            .await;
        match answer {
            Ok(answer) => Ok(Ok(answer)),
            Err(e) if lease_not_found(&e) => {
                session.mark_gone();
                Ok(Err(Gone))
            }
            Err(e) => Err(self.error(e)),
        }
    }
}

/// Whether a failed call may succeed if sent again: its member is gone or unreachable
/// (another one answers), or the cluster has no leader for the moment (an election).
fn transient(e: &etcd_client::Error) -> bool {
    if untrusted(e) || certificate_refused(e) {
        return false;
    }
    match e {
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => true,
        etcd_client::Error::GRpcStatus(status) => matches!(
            status.code(),
            tonic::Code::Unavailable
                | tonic::Code::Unknown
                | tonic::Code::Aborted
                | tonic::Code::DeadlineExceeded
                | tonic::Code::Cancelled
        ),
        _ => false,
    }
}

/// Whether a call was refused because the server no longer knows the client's auth token.
fn token_expired(e: &etcd_client::Error) -> bool {
    matches!(e, etcd_client::Error::GRpcStatus(status)
        if status.code() == tonic::Code::Unauthenticated
            && status.message().contains("invalid auth token"))
}

/// The TLS settings of an `etcds://` URL, its files read.
fn tls_options(tls: &crate::url::EtcdTls, shown: &str) -> Result<etcd_client::TlsOptions> {
    let read = |path: &std::path::Path| {
        std::fs::read(path)
            .map_err(|e| Error::config(format!("{shown}: cannot read {}: {e}", path.display())))
    };
    let mut options = etcd_client::TlsOptions::new();
    options = match &tls.ca {
        Some(ca) => options.ca_certificate(etcd_client::Certificate::from_pem(read(ca)?)),
        None => options.with_native_roots(),
    };
    if let Some((cert, key)) = &tls.identity {
        options = options.identity(etcd_client::Identity::from_pem(read(cert)?, read(key)?));
    }
    Ok(options)
}

/// A connect error, with what to do about it where the cause is likely.
fn explained(e: &etcd_client::Error, url: &EtcdUrl) -> String {
    let text = e.to_string();
    let hint = if text.contains("user name is empty") {
        "the server requires authentication: etcd://user:password@… or etcd://user@… with \
         --password-file"
    } else if text.contains("authentication failed") {
        "check the user and the password"
    } else if untrusted(e) {
        "the members' certificate is not signed by a CA this client trusts: give it with \
         ca=PATH"
    } else if certificate_refused(e) {
        "the members require a client certificate signed by their CA: cert=PATH&key=PATH"
    } else if !transient(e) {
        return text;
    } else if url.tls.is_none() {
        "if the members speak TLS, use etcds://"
    } else if url.tls.as_ref().is_some_and(|tls| tls.identity.is_none()) {
        "if the members require client certificates, add cert=PATH&key=PATH"
    } else {
        return text;
    };
    format!("{text} ({hint})")
}

/// Whether a call failed because the member's certificate was not trusted (sending it again
/// will not help).
fn untrusted(e: &etcd_client::Error) -> bool {
    e.to_string().contains("invalid peer certificate")
}

/// Whether the member refused the client's certificate, or its absence.
fn certificate_refused(e: &etcd_client::Error) -> bool {
    let text = e.to_string();
    text.contains("BadCertificate") || text.contains("CertificateRequired")
}

fn unreachable(shown: &str, why: &dyn std::fmt::Display) -> Error {
    Error::backend_msg("etcd", format!("etcd {shown}: {why}"))
}

/// The value, lease and create revision of the first key a transaction's first GET found.
fn first_kv(responses: Vec<TxnOpResponse>) -> Option<(Vec<u8>, i64, i64)> {
    responses.into_iter().find_map(|response| match response {
        TxnOpResponse::Get(get) => get
            .kvs()
            .first()
            .map(|kv| (kv.value().to_vec(), kv.lease(), kv.create_revision())),
        _ => None,
    })
}

#[async_trait]
impl Backend for EtcdBackend {
    async fn try_acquire(&self, key: &str, owner: OwnerToken, ttl: Duration) -> Result<Attempt> {
        let start = Instant::now();
        let name = self.name(key);
        let answer = loop {
            let session = self.session(ttl, start).await?;
            if let Ok(answer) = self.put_if_absent(&name, owner, &session).await? {
                break answer;
            }
        };
        let granted = if answer.succeeded() {
            Some(answer.header().map_or(0, |h| h.revision()))
        } else {
            None
        };
        let holder = first_kv(answer.op_responses());
        let revision = match (granted, &holder) {
            (Some(revision), _) => revision,
            // Our own put, whose answer was lost before a call sent again: ours.
            (None, Some((value, _, created))) if value == owner.to_hex().as_bytes() => *created,
            (None, holder) => {
                let holder_lease = holder.as_ref().map_or(0, |(_, lease, _)| *lease);
                let expires_in = if holder_lease == 0 {
                    None
                } else {
                    self.call(|mut client| async move {
                        client.lease_time_to_live(holder_lease, None).await
                    })
                    .await
                    .ok()
                    .and_then(|live| u64::try_from(live.ttl()).ok())
                    .map(Duration::from_secs)
                };
                return Ok(Attempt::Held { expires_in });
            }
        };
        let token = u64::try_from(revision)
            .map_err(|_| Error::backend_msg("etcd", format!("a negative revision {revision}")))?;
        Ok(Attempt::Granted(FencingToken::new(token)))
    }

    async fn extend(&self, key: &str, owner: OwnerToken, ttl: Duration) -> Result<bool> {
        let start = Instant::now();
        let name = self.name(key);
        // The session is kept alive while the key is read back: the key was there on a live
        // lease, and a key leaves a live lease only by a delete.
        let read = self.call(|mut client| {
            let name = name.clone();
            async move { client.get(name, None).await }
        });
        let (session, read) = tokio::join!(self.session(ttl, start), read);
        let (session, read) = (session?, read?);
        let Some(kv) = read.kvs().first() else {
            return Ok(false);
        };
        if kv.value() != owner.to_hex().as_bytes() {
            return Ok(false);
        }
        if kv.lease() == session.id {
            return Ok(true);
        }
        // On another lease (a TTL of another class, or a session this backend no longer
        // keeps): moved onto the kept one, if the owner still holds it. The create revision,
        // and so the token, stays.
        loop {
            let session = self.session(ttl, start).await?;
            let txn = Txn::new()
                .when([Compare::value(
                    name.clone(),
                    CompareOp::Equal,
                    owner.to_hex(),
                )])
                .and_then([TxnOp::put(
                    name.clone(),
                    owner.to_hex(),
                    Some(PutOptions::new().with_lease(session.id)),
                )]);
            let answer = self
                .call_raw(|mut client| {
                    let txn = txn.clone();
                    async move { client.txn(txn).await }
                })
                .await;
            match answer {
                Ok(answer) => return Ok(answer.succeeded()),
                Err(e) if lease_not_found(&e) => session.mark_gone(),
                Err(e) => return Err(self.error(e)),
            }
        }
    }

    async fn release(&self, key: &str, owner: OwnerToken) -> Result<bool> {
        let name = self.name(key);
        let txn = Txn::new()
            .when([Compare::value(
                name.clone(),
                CompareOp::Equal,
                owner.to_hex(),
            )])
            .and_then([TxnOp::delete(name, None)]);
        Ok(self.txn(txn).await?.succeeded())
    }

    async fn holds(&self, key: &str, owner: OwnerToken) -> Result<bool> {
        Ok(self.still_held(&[(key, owner)]).await?.first() == Some(&true))
    }

    async fn still_held(&self, leases: &[(&str, OwnerToken)]) -> Result<Vec<bool>> {
        let mut held = Vec::with_capacity(leases.len());
        for chunk in leases.chunks(MAX_TXN_OPS) {
            let gets: Vec<TxnOp> = chunk
                .iter()
                .map(|(key, _)| TxnOp::get(self.name(key), None))
                .collect();
            let answer = self.txn(Txn::new().and_then(gets)).await?;
            let responses = answer.op_responses();
            for ((_, owner), response) in chunk.iter().zip(responses) {
                let value = match response {
                    TxnOpResponse::Get(get) => get.kvs().first().map(|kv| kv.value().to_vec()),
                    _ => None,
                };
                held.push(value.as_deref() == Some(owner.to_hex().as_bytes()));
            }
        }
        if held.len() != leases.len() {
            return Err(Error::backend_msg(
                "etcd",
                format!(
                    "etcd {}: {} answers to {} reads",
                    self.inner.shown,
                    held.len(),
                    leases.len()
                ),
            ));
        }
        Ok(held)
    }

    fn loss_check_every(&self) -> Option<Duration> {
        Some(LOSS_CHECK_EVERY)
    }

    async fn watch(&self, key: &str) -> Result<ReleaseWatch> {
        let name = self.name(key);
        let mut stream = self
            .call(|mut client| {
                let name = name.clone();
                async move { client.watch(name, None).await }
            })
            .await?;
        let (tx, rx) = watch::channel(0u64);
        let task = tokio::spawn(async move {
            loop {
                match stream.message().await {
                    Ok(Some(answer)) => {
                        let deleted = answer
                            .events()
                            .iter()
                            .any(|event| event.event_type() == EventType::Delete);
                        if deleted || answer.canceled() {
                            tx.send_modify(|n| *n += 1);
                        }
                        if answer.canceled() {
                            return;
                        }
                    }
                    // The stream ended or broke: a release may have gone unseen.
                    Ok(None) | Err(_) => {
                        tx.send_modify(|n| *n += 1);
                        return;
                    }
                }
            }
        });
        let watching = AbortOnDrop(task);
        let place = self.join_line(key).await?;
        Ok(ReleaseWatch::new(rx, Some(Box::new((watching, place.keep)))).in_line(place.first))
    }

    fn kind(&self) -> &'static str {
        "etcd"
    }

    async fn held(&self, prefix: &str) -> Result<Vec<crate::backend::HeldLock>> {
        self.held_locks(prefix).await
    }

    async fn break_lock(&self, key: &str) -> Result<Option<crate::backend::HeldLock>> {
        self.break_now(key).await
    }
}

/// Stops a watch's task (and with it its stream) when the waiter is done.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
