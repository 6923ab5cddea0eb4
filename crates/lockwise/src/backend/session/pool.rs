//! A backend's few shared sessions, and group commit on each: a call is queued on a session;
//! when the session is idle, its caller sends at once (a lone caller waits for no one);
//! calls that come while a request is on its way go together in the next one, each with its
//! own owner, token and deadline. So under load one round trip and one server transaction
//! carry many grants, renewals and releases, where a connection per lock sent one each.
//!
//! A request, once sent, always runs to its end: if its caller goes away meanwhile, the rest
//! of it is finished by a task, and a grant nobody waits for any more is given back (the
//! session could not be cut mid-request without losing the other locks it holds).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use tokio::sync::oneshot;

use super::{HolderRow, Inner, Lease, SessionLocks, SessionSql};
use crate::error::{Error, Result};
use crate::lease::{FencingToken, OwnerToken};

/// The most sessions a backend opens for its locks (more only to replace broken ones, or for
/// locks of another TTL than those of the others). Two keep a request on its way while the
/// answers of the other are handled; more split the calls into smaller requests (measured in
/// docs/performance.md).
const MAX_SESSIONS: usize = 2;

/// The most calls in one request.
const MOST: usize = 64;

/// How long a session that holds nothing keeps its last lease before it rests, where
/// [`SessionSql::RESTS`]: under the shortest lease (1 s), so that the server does not end an
/// idle session, yet long enough that a lock taken again and again sets nothing.
pub(super) const REST_AFTER: Duration = Duration::from_millis(500);

/// How long a request may take before its session is given up (a hung server or network):
/// the server's own `statement_timeout` / `max_statement_time`.
const REQUEST_LIMIT: Duration = Duration::from_secs(10);

/// What a call asks of the server about one lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Take it without waiting, and issue its fencing token.
    Grant,
    /// Give it back.
    Unlock,
    /// Whether this session holds it.
    Check,
}

/// One call as a request's statement sees it: answered by a token (a grant; `None` when
/// refused), or by `Some(1)` for yes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Op<'a> {
    pub(crate) kind: Kind,
    /// The key with the backend's namespace.
    pub(crate) full: &'a str,
}

/// A call waiting for its request.
pub(super) struct Call {
    pub(super) kind: Kind,
    pub(super) full: String,
    pub(super) owner: OwnerToken,
    /// The key without the namespace.
    pub(super) key: String,
    /// A grant's TTL, or a renewal's.
    pub(super) ttl: Option<Duration>,
    /// Where its answer goes; none for an unlock nobody waits for.
    pub(super) reply: Option<oneshot::Sender<Reply>>,
}

/// The answer to a call.
pub(super) enum Reply {
    Granted(FencingToken),
    /// The server refused the grant, or this backend already holds the key.
    Refused,
    Answer(bool),
    /// The session broke (its locks are lost), or was broken before the call was sent.
    Broken(Error),
}

/// One shared session.
pub(super) struct Session<C> {
    pub(super) serial: u64,
    /// The server's id of the session.
    pub(super) id: i64,
    state: Mutex<State<C>>,
}

struct State<C> {
    /// Taken out while a request is on its way.
    conn: Option<C>,
    /// Whether a request is on its way or about to be: its sender sends what queues up.
    sending: bool,
    broken: bool,
    queue: Vec<Call>,
    /// Since when it holds nothing with the last lease still set (see [`SessionSql::RESTS`]).
    quiet: Option<Instant>,
}

impl<C> Session<C> {
    fn state(&self) -> std::sync::MutexGuard<'_, State<C>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn idle(&self) -> bool {
        let state = self.state();
        !state.sending && !state.broken && state.queue.is_empty()
    }

    fn load(&self) -> usize {
        self.state().queue.len()
    }
}

/// The sessions of a backend.
pub(super) struct Pool<C> {
    sessions: Vec<Arc<Session<C>>>,
    /// Sessions being opened.
    opening: usize,
}

impl<C> Default for Pool<C> {
    fn default() -> Self {
        Pool {
            sessions: Vec::new(),
            opening: 0,
        }
    }
}

impl<D: SessionSql> SessionLocks<D> {
    fn pool(&self) -> std::sync::MutexGuard<'_, Pool<D::Conn>> {
        self.inner.pool()
    }

    /// A session for a grant of `ttl`, among those that hold nothing or locks of that TTL: an
    /// idle one; else a new one while there are fewer than [`MAX_SESSIONS`]; else the one with
    /// the shortest queue; else a new one for this TTL.
    pub(super) async fn pick(&self, ttl: Duration) -> Result<Arc<Session<D::Conn>>> {
        {
            let pool = self.pool();
            let book = self.inner.book();
            let fits = |s: &&Arc<Session<D::Conn>>| book.fits(s.serial, ttl);
            if let Some(session) = pool.sessions.iter().filter(fits).find(|s| s.idle()) {
                return Ok(session.clone());
            }
            if pool.sessions.len() + pool.opening >= MAX_SESSIONS
                && let Some(session) = pool.sessions.iter().filter(fits).min_by_key(|s| s.load())
            {
                return Ok(session.clone());
            }
        }
        self.open().await
    }

    /// A new session, added to the pool.
    pub(super) async fn open(&self) -> Result<Arc<Session<D::Conn>>> {
        self.pool().opening += 1;
        let _opening = Opening(&self.inner);
        let conn = self.inner.sql.connect(&self.inner.shown).await?;
        self.adopt(conn).await
    }

    /// Makes `conn` a session of the pool.
    pub(super) async fn adopt(&self, mut conn: D::Conn) -> Result<Arc<Session<D::Conn>>> {
        let id = self
            .inner
            .sql
            .session_id(&mut conn)
            .await
            .map_err(|e| self.fail("opening a session", e))?;
        let session = Arc::new(Session {
            serial: self.inner.serial.fetch_add(1, Ordering::Relaxed),
            id,
            state: Mutex::new(State {
                conn: Some(conn),
                sending: false,
                broken: false,
                queue: Vec::new(),
                quiet: None,
            }),
        });
        self.pool().sessions.push(session.clone());
        Ok(session)
    }

    /// The session of serial `serial`, unless it broke.
    pub(super) fn find(&self, serial: u64) -> Option<Arc<Session<D::Conn>>> {
        self.pool()
            .sessions
            .iter()
            .find(|s| s.serial == serial)
            .cloned()
    }

    /// Sends `call` on `session` (with the calls queued there) and waits for its answer.
    pub(super) async fn call(&self, session: &Arc<Session<D::Conn>>, mut call: Call) -> Reply {
        let (tx, rx) = oneshot::channel();
        call.reply = Some(tx);
        match submit(&self.inner, session, call) {
            Err(reply) => return reply,
            Ok(Some(send)) => {
                Detached(Some(send.run(true))).await;
            }
            Ok(None) => {}
        }
        rx.await.unwrap_or_else(|_| {
            Reply::Broken(Error::backend_msg(
                D::NAME,
                "the runtime shut down while the call was on its way",
            ))
        })
    }

    /// Gives `full` back on its session, in the background (its book entry is busy).
    pub(super) fn unlock_later(&self, session: u64, full: String) {
        unlock_later(&self.inner, session, full);
    }
}

/// Removes a session being opened from the count, whether it opened or not.
struct Opening<'a, D: SessionSql>(&'a Inner<D>);

impl<D: SessionSql> Drop for Opening<'_, D> {
    fn drop(&mut self) {
        self.0.pool().opening -= 1;
    }
}

fn unlock_later<D: SessionSql>(inner: &Arc<Inner<D>>, serial: u64, full: String) {
    let session = inner
        .pool()
        .sessions
        .iter()
        .find(|s| s.serial == serial)
        .cloned();
    let Some(session) = session else {
        // Its session broke: the server let the lock go with it.
        inner.book().end(&full);
        return;
    };
    let call = Call {
        kind: Kind::Unlock,
        full,
        owner: OwnerToken::nobody(),
        key: String::new(),
        ttl: None,
        reply: None,
    };
    if let Ok(Some(send)) = submit(inner, &session, call) {
        tokio::spawn(send.run(false));
    }
}

/// Queues `call` on `session`: `Ok(Some)` when the caller is to send (the session was idle),
/// `Err` with the answer when it is not sent at all.
fn submit<D: SessionSql>(
    inner: &Arc<Inner<D>>,
    session: &Arc<Session<D::Conn>>,
    call: Call,
) -> std::result::Result<Option<Sending<D>>, Reply> {
    let mut book = inner.book();
    if call.kind == Kind::Grant
        && !book.begin(&call.full, session.serial, call.ttl.unwrap_or_default())
    {
        return Err(Reply::Refused);
    }
    let mut state = session.state();
    if state.broken {
        if call.kind == Kind::Grant {
            book.end(&call.full);
        }
        return Err(Reply::Broken(Error::backend_msg(
            D::NAME,
            "the session broke before the call was sent",
        )));
    }
    drop(book);
    state.queue.push(call);
    if state.sending {
        return Ok(None);
    }
    state.sending = true;
    Ok(Some(Sending {
        inner: inner.clone(),
        session: session.clone(),
        done: false,
    }))
}

/// The right to send on a session, taken by [`submit`]: whoever holds it sends what is
/// queued. If it is dropped before it is done (its runtime went away mid-request), the
/// session is given up.
struct Sending<D: SessionSql> {
    inner: Arc<Inner<D>>,
    session: Arc<Session<D::Conn>>,
    done: bool,
}

impl<D: SessionSql> Sending<D> {
    /// Sends requests until the queue is empty; `inline` sends one and leaves the rest to a
    /// task, so that a caller does not wait for those who came after it.
    fn run(mut self, inline: bool) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.send(inline).await })
    }

    async fn send(&mut self, inline: bool) {
        loop {
            if !inline {
                // Let the callers just answered queue their next calls: they join this request.
                tokio::task::yield_now().await;
            }
            if !self.round().await {
                self.done = true;
                return;
            }
            if inline {
                let mut state = self.session.state();
                if state.queue.is_empty() || state.broken {
                    state.sending = false;
                    drop(state);
                    self.done = true;
                    return;
                }
                drop(state);
                let rest = Sending {
                    inner: self.inner.clone(),
                    session: self.session.clone(),
                    done: false,
                };
                self.done = true;
                tokio::spawn(rest.run(false));
                return;
            }
        }
    }

    /// Sends one request with the calls queued; `false` when there was none (the right to
    /// send is then given back) or the session broke.
    async fn round(&mut self) -> bool {
        let (inner, session) = (&self.inner, &self.session);
        let (calls, mut conn) = {
            let mut state = session.state();
            if state.broken || state.queue.is_empty() {
                state.sending = false;
                return false;
            }
            let n = state.queue.len().min(MOST);
            let calls: Vec<Call> = state.queue.drain(..n).collect();
            match state.conn.take() {
                Some(conn) => (calls, conn),
                None => {
                    drop(state);
                    let error = Error::backend_msg(D::NAME, "the session's connection is gone");
                    break_session(inner, session, calls, &error);
                    return false;
                }
            }
        };
        let sent = Instant::now();
        let asked = calls.iter().filter_map(|c| c.ttl).max().unwrap_or_default();
        let unlocked: Vec<&str> = calls
            .iter()
            .filter(|c| c.kind == Kind::Unlock)
            .map(|c| c.full.as_str())
            .collect();
        let lease = inner.book().lease(session.serial, sent, asked, &unlocked);
        let ops: Vec<Op<'_>> = calls
            .iter()
            .map(|c| Op {
                kind: c.kind,
                full: &c.full,
            })
            .collect();
        let answers =
            tokio::time::timeout(REQUEST_LIMIT, inner.sql.exchange(&mut conn, &ops, lease)).await;
        drop(ops);
        match answers {
            Ok(Ok(answers)) if answers.len() == calls.len() => {
                session.state().conn = Some(conn);
                settle(inner, session, sent, calls, answers);
                if D::RESTS {
                    quieten(inner, session, sent);
                }
                true
            }
            failed => {
                let error = match failed {
                    Ok(Err(e)) => Error::backend(
                        D::NAME,
                        format!("a request on {} failed: {e}", inner.shown),
                        e,
                    ),
                    Ok(Ok(_)) => Error::backend_msg(
                        D::NAME,
                        "a request returned another number of answers than calls",
                    ),
                    Err(_) => Error::no_answer("a request on a lock session", REQUEST_LIMIT),
                };
                break_session(inner, session, calls, &error);
                false
            }
        }
    }
}

impl<D: SessionSql> Drop for Sending<D> {
    fn drop(&mut self) {
        if !self.done {
            let error = Error::backend_msg(D::NAME, "a request was cut off mid-way");
            break_session(&self.inner, &self.session, Vec::new(), &error);
        }
    }
}

/// Applies a request's answers to the book and replies.
fn settle<D: SessionSql>(
    inner: &Arc<Inner<D>>,
    session: &Arc<Session<D::Conn>>,
    sent: Instant,
    calls: Vec<Call>,
    answers: Vec<Option<u64>>,
) {
    let mut earliest = false;
    let mut expired = Vec::new();
    let mut replies = Vec::with_capacity(calls.len());
    {
        let mut book = inner.book();
        for (call, answer) in calls.into_iter().zip(answers) {
            let reply = match (call.kind, answer) {
                (Kind::Grant, Some(token)) => {
                    let ttl = call.ttl.unwrap_or_default();
                    let row = HolderRow {
                        full: call.full.clone(),
                        session: session.id,
                        token,
                        since: std::time::SystemTime::now(),
                        ttl,
                    };
                    let session = (session.serial, session.id);
                    earliest |=
                        book.granted(&call.full, call.owner, &call.key, session, sent + ttl, row);
                    Reply::Granted(FencingToken::new(token))
                }
                (Kind::Grant, None) => {
                    book.end(&call.full);
                    Reply::Refused
                }
                (Kind::Unlock, answer) => {
                    book.end(&call.full);
                    Reply::Answer(answer == Some(1))
                }
                (Kind::Check, Some(1)) => match call.ttl {
                    Some(ttl) => match book.renewed(&call.full, call.owner, sent, sent + ttl) {
                        Some((true, first)) => {
                            earliest |= first;
                            Reply::Answer(true)
                        }
                        Some((false, _)) => {
                            expired.push(call.full.clone());
                            Reply::Answer(false)
                        }
                        None => Reply::Answer(false),
                    },
                    None => Reply::Answer(
                        book.held(call.owner, &call.key)
                            .is_some_and(|held| held.deadline > sent),
                    ),
                },
                (Kind::Check, _) => {
                    book.lost(&call.full, call.owner);
                    Reply::Answer(false)
                }
            };
            replies.push((call, reply));
        }
    }
    for (call, reply) in replies {
        let Some(tx) = call.reply else { continue };
        if let Err(Reply::Granted(_)) = tx.send(reply) {
            // Its caller went away: give the lock back.
            let now = Instant::now();
            if inner.book().unlocking(call.owner, &call.key, now).is_some() {
                expired.push(call.full);
            }
        }
    }
    for full in expired {
        unlock_later(inner, session.serial, full);
    }
    if earliest {
        inner.sweeper.notify_one();
    }
}

/// Gives a session up: its connection is closed (the server lets its locks go), its locks
/// are forgotten, and every call on or queued for it is answered [`Reply::Broken`].
fn break_session<D: SessionSql>(
    inner: &Arc<Inner<D>>,
    session: &Arc<Session<D::Conn>>,
    mut calls: Vec<Call>,
    error: &Error,
) {
    let conn = {
        let mut state = session.state();
        state.broken = true;
        state.sending = false;
        calls.append(&mut state.queue);
        state.conn.take()
    };
    drop(conn);
    inner.pool().sessions.retain(|s| !Arc::ptr_eq(s, session));
    inner.book().forget_session(session.serial);
    tracing::debug!(%error, session = session.id, "a lock session broke");
    for call in calls {
        if let Some(tx) = call.reply {
            let _ = tx.send(Reply::Broken(error.duplicate()));
        }
    }
}

/// Notes when a session that holds nothing after a request went quiet, and makes sure the
/// sweeper knows that one waits to rest.
fn quieten<D: SessionSql>(inner: &Arc<Inner<D>>, session: &Arc<Session<D::Conn>>, sent: Instant) {
    let empty = inner.book().empty(session.serial);
    session.state().quiet = empty.then_some(sent);
    if empty && !inner.resting.swap(true, Ordering::AcqRel) {
        inner.sweeper.notify_one();
    }
}

/// Sends a rest request on each session quiet for [`REST_AFTER`] that still holds nothing
/// and has nothing on its way; when the next one is due.
fn rest_due<D: SessionSql>(inner: &Arc<Inner<D>>, now: Instant) -> Option<Instant> {
    // Cleared before looking, so that a session going quiet meanwhile wakes the sweeper.
    inner.resting.store(false, Ordering::Release);
    let sessions = inner.pool().sessions.clone();
    let mut next: Option<Instant> = None;
    for session in sessions {
        let book = inner.book();
        let mut state = session.state();
        let Some(quiet) = state.quiet else { continue };
        if state.broken {
            continue;
        }
        let busy = state.sending || !state.queue.is_empty() || !book.empty(session.serial);
        // A session with a request on its way or coming is looked at again later (the
        // request marks it quiet anew, or not, when it returns).
        let due = if busy {
            now.max(quiet) + REST_AFTER
        } else {
            quiet + REST_AFTER
        };
        if due > now {
            next = Some(next.map_or(due, |n| n.min(due)));
            continue;
        }
        state.quiet = None;
        state.sending = true;
        drop((state, book));
        let sending = Sending {
            inner: inner.clone(),
            session: session.clone(),
            done: false,
        };
        tokio::spawn(sending.rest());
    }
    if next.is_some() {
        inner.resting.store(true, Ordering::Release);
    }
    next
}

impl<D: SessionSql> Sending<D> {
    /// A request of no op that gives the session the server's idle lifetime back, then what
    /// queued meanwhile.
    async fn rest(mut self) {
        let conn = self.session.state().conn.take();
        let Some(mut conn) = conn else {
            let error = Error::backend_msg(D::NAME, "the session's connection is gone");
            break_session(&self.inner, &self.session, Vec::new(), &error);
            self.done = true;
            return;
        };
        let lease = Lease {
            ttl: Duration::ZERO,
            kept: false,
        };
        let rested = tokio::time::timeout(
            REQUEST_LIMIT,
            self.inner.sql.exchange(&mut conn, &[], lease),
        )
        .await;
        if let Ok(Ok(_)) = rested {
            self.session.state().conn = Some(conn);
            self.send(false).await;
        } else {
            let error = Error::backend_msg(D::NAME, "a rest request failed");
            break_session(&self.inner, &self.session, Vec::new(), &error);
            self.done = true;
        }
    }
}

/// Unlocks the locks whose deadline passed without a renewal, while this process runs (a
/// frozen or dead one's are let go by the server when its session's lease runs out). Ends
/// when the backend is dropped.
pub(super) async fn sweep<D: SessionSql>(inner: Weak<Inner<D>>) {
    loop {
        let Some(locks) = inner.upgrade() else { return };
        let notify = locks.sweeper.clone();
        let notified = notify.notified();
        let now = Instant::now();
        let next = {
            let mut book = locks.book();
            let (due, next) = book.due(now);
            book.sweep_at = next;
            drop(book);
            for (full, session) in due {
                unlock_later(&locks, session, full);
            }
            next
        };
        // Rests are not the sweeper's deadlines (`sweep_at`): a grant never waits for them.
        let next = match (
            next,
            if D::RESTS {
                rest_due(&locks, now)
            } else {
                None
            },
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        drop(locks);
        match next {
            Some(at) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at.into()) => {}
                    _ = notified => {}
                }
            }
            None => notified.await,
        }
    }
}

/// A request run inline by its caller; if the caller goes away, the rest runs in a task.
struct Detached(Option<BoxFuture<'static, ()>>);

impl std::future::Future for Detached {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if let Some(send) = self.0.as_mut() {
            std::task::ready!(send.as_mut().poll(cx));
            self.0 = None;
        }
        std::task::Poll::Ready(())
    }
}

impl Drop for Detached {
    fn drop(&mut self) {
        if let Some(send) = self.0.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(send);
        }
    }
}
