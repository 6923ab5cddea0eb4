//! R11: an exhaustive model check of the lease, the fenced store and the queue lease.
//!
//! Two small explicit-state models, explored breadth-first with a visited set by the explorer
//! below (no `stateright`: a hundred lines here compile in a second, the crate would add a
//! dependency tree for the same BFS). Every reachable state within the bounds is visited; a
//! violation comes back as the shortest trace that reaches it.
//!
//! # Time, pauses and the network
//!
//! Time is a global integer clock (`Tick`). A process's local clock reads the same value (a
//! clock that runs slow by a bounded rate is what the `drift` margin is for; it is not
//! modelled). Any process may go unscheduled for any number of ticks between two of its own
//! steps: that is a pause (GC, SIGSTOP, a swapped-out VM). Every message travels through one
//! multiset `net`, from which any message can be delivered next: messages are delayed without
//! bound and reordered. A request to a crashed server waits until it is back (a retry).
//!
//! A pause between "checked the deadline" and "sent the write" cannot be told apart, by the
//! store or anyone, from the write waiting in the network, so the model checks and sends in one
//! step and lets the network hold the write: every pause of that kind is explored that way.
//!
//! # The lock model ([`LockModel`]), after `guard.rs`, `locker.rs` and `lua/acquire.lua`
//!
//! * Clients acquire with a request stamped with their send time; a grant is used only if it
//!   arrives before `sent + TTL − DRIFT` (the local deadline), like `Locker::attempt`. A holder
//!   renews (its renewals may be in flight together); a success that arrives before the
//!   deadline moves it to `its send + TTL − DRIFT` if that is later; a refusal loses the lock,
//!   and so does the tick that reaches the deadline (the guard's lost signal).
//! * A holder writes to the fenced store only while it holds (`Guard::run`), with its token.
//! * The lock server grants when no live lease exists (expiry `recv + TTL`), extends by owner,
//!   and issues tokens like `acquire.lua`: `max(last + 1, now × FLOOR)`. It can crash: the
//!   lease is forgotten, the counter kept (persistence) or lost, and it is down until the next
//!   tick (a restart takes time, so the clock floor has moved on).
//! * The fenced store accepts a token `>=` the highest accepted (`Store::fence`,
//!   `fenced_set.lua`: equal tokens pass, one grant may write many times).
//!
//! **Property.** Ghost grant numbers (the server's grant order; the owner token's role) are
//! carried with each write. The store must never accept (a) a write whose token is lower than
//! one it accepted, (b) a write with a token equal to one accepted from another grant (tokens
//! repeated), or (c) a write from a grant older than a grant whose write it already accepted
//! (a stale write). Together: at most one holder's writes take effect at a time, in grant order.
//!
//! # The queue model ([`QueueModel`]), after `queue/worker.rs` and `sql/postgres/queue/*.sql`
//!
//! One job row (`available`/`running`/`done`, `attempt`, `lease_until`) and two workers.
//! `claim` takes an available row, bumps the attempt and sets `lease_until = now + LEASE`;
//! `heartbeat` extends by `(id, attempt)` while running; the reaper returns a running row whose
//! `lease_until < now` to available; `complete` is compare-and-set on `(id, attempt, running)`.
//! A worker runs the handler from the claim's answer on, heartbeats (one at a time), and
//! cancels the handler at its local deadline `claim send + LEASE − DRIFT`, moved to
//! `heartbeat send + LEASE − DRIFT` by each heartbeat that succeeds in time; a refused
//! heartbeat stops the handler. The cancel is taken to act at the deadline even across a
//! pause (a paused handler does nothing; on resume the expired deadline wins the race).
//!
//! **Property.** Two executions of the job never overlap (never two running handlers), and a
//! completion is accepted only from the attempt the row is running (attempt fencing).
//!
//! # Mutants
//!
//! Each must be caught (a test fails if one is not): `no_fence` (the store accepts any token,
//! `complete` ignores the attempt), `token_reset` (no clock floor: a crash that loses the
//! counter restarts tokens at 1) and `no_local_deadline` (a worker keeps running its handler
//! past its local deadline).
//!
//! # Bounds
//!
//! Small enough for every CI run (a few seconds in a debug build; each test prints its state
//! count): two clients of [`LOCK_BOUNDS`] (acquire attempts, renewals and writes per grant,
//! crashes, ticks) with `TTL = 3`, `DRIFT = 1`, `FLOOR = 16`; two workers of [`QUEUE_BOUNDS`]
//! (claims each, heartbeats per execution, ticks) with `LEASE = 3`. Releases are not modelled
//! (a lease ends by expiry or a crash, which only delays hand-overs). A deeper run sets the
//! bounds as comma-separated numbers, in that order, preferably in release mode:
//!
//! ```text
//! LOCKWISE_MODEL_LOCK=1,2,2,1,7 LOCKWISE_MODEL_QUEUE=2,2,8 \
//!     cargo test --release -p lockwise --test model -- --nocapture
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::time::Instant;

// ----------------------------------------------------------------------------------------------
// The explorer
// ----------------------------------------------------------------------------------------------

/// A transition system with a safety property.
trait Model {
    type State: Clone + Eq + Hash + Debug;
    type Action: Debug;
    fn init(&self) -> Self::State;
    /// Every successor of `s`, with the action that leads to it.
    fn next(&self, s: &Self::State, out: &mut Vec<(Self::Action, Self::State)>);
    /// `Err(what)` when `s` violates the property.
    fn check(&self, s: &Self::State) -> Result<(), String>;
}

/// What an exploration found.
#[derive(Debug)]
struct Explored<M: Model> {
    states: usize,
    transitions: usize,
    depth: usize,
    violation: Option<Counterexample<M>>,
}

/// The shortest path from the initial state to a violating one.
#[derive(Debug)]
struct Counterexample<M: Model> {
    property: String,
    steps: Vec<(M::Action, M::State)>,
}

impl<M: Model> Counterexample<M> {
    fn render(&self) -> String {
        let mut out = format!("violated: {}\n", self.property);
        for (i, (action, _)) in self.steps.iter().enumerate() {
            out.push_str(&format!("  {:>2}. {action:?}\n", i + 1));
        }
        if let Some((_, last)) = self.steps.last() {
            out.push_str(&format!("  final state: {last:?}\n"));
        }
        out
    }
}

/// Breadth-first search of every state reachable from `init`, stopping at the first state
/// that violates the property. Panics past `limit` states (the bounds are too loose).
fn explore<M: Model>(model: &M, limit: usize) -> Explored<M> {
    let init = model.init();
    let mut states: Vec<M::State> = vec![init.clone()];
    let mut parent: Vec<(u32, u32)> = vec![(0, 0)]; // (parent index, depth)
    let mut seen: HashMap<M::State, u32> = HashMap::new();
    seen.insert(init, 0);
    let mut next = Vec::new();
    let (mut transitions, mut depth) = (0, 0);
    let mut i = 0;
    while i < states.len() {
        if let Err(property) = model.check(&states[i]) {
            return Explored {
                states: states.len(),
                transitions,
                depth,
                violation: Some(trace(model, &states, &parent, i, property)),
            };
        }
        next.clear();
        model.next(&states[i], &mut next);
        for (_, s) in next.drain(..) {
            transitions += 1;
            if seen.contains_key(&s) {
                continue;
            }
            let idx = u32::try_from(states.len()).expect("fewer than 2^32 states");
            let d = parent[i].1 + 1;
            depth = depth.max(d as usize);
            seen.insert(s.clone(), idx);
            states.push(s);
            parent.push((u32::try_from(i).expect("index"), d));
            assert!(
                states.len() <= limit,
                "more than {limit} states: tighten the bounds"
            );
        }
        i += 1;
    }
    Explored {
        states: states.len(),
        transitions,
        depth,
        violation: None,
    }
}

/// Rebuilds the path to `end` by following parents and re-deriving each step's action.
fn trace<M: Model>(
    model: &M,
    states: &[M::State],
    parent: &[(u32, u32)],
    end: usize,
    property: String,
) -> Counterexample<M> {
    let mut path = vec![end];
    let mut at = end;
    while at != 0 {
        at = parent[at].0 as usize;
        path.push(at);
    }
    path.reverse();
    let mut steps = Vec::new();
    let mut out = Vec::new();
    for pair in path.windows(2) {
        out.clear();
        model.next(&states[pair[0]], &mut out);
        let (action, state) = out
            .drain(..)
            .find(|(_, s)| *s == states[pair[1]])
            .expect("a parent leads to its child");
        steps.push((action, state));
    }
    Counterexample { property, steps }
}

/// Which parts of the real design are on; each `false` is a mutant.
#[derive(Debug, Clone, Copy)]
struct Design {
    /// The store (and `complete`) checks the token (attempt).
    fence: bool,
    /// Tokens never go below `now × FLOOR` (`acquire.lua`); off, a lost counter restarts at 1.
    token_floor: bool,
    /// A worker cancels its handler at its local deadline.
    local_deadline: bool,
}

const REAL: Design = Design {
    fence: true,
    token_floor: true,
    local_deadline: true,
};

// ----------------------------------------------------------------------------------------------
// The lock model
// ----------------------------------------------------------------------------------------------

/// The lease's TTL in ticks.
const TTL: u8 = 3;
/// The local safety margin (`lease::drift`), in ticks.
const DRIFT: u8 = 1;
/// `acquire.lua`'s `× 1024`: more grants than this in one tick would break the floor; the
/// bounds allow far fewer.
const FLOOR: u16 = 16;

/// How far the lock model is explored.
#[derive(Debug, Clone, Copy)]
struct LockBounds {
    /// Acquire attempts per client.
    attempts: u8,
    /// Renewals per grant.
    renewals: u8,
    /// Writes per grant.
    writes: u8,
    /// Server crashes.
    crashes: u8,
    /// The last tick.
    horizon: u8,
}

const LOCK_BOUNDS: LockBounds = LockBounds {
    attempts: 1,
    renewals: 1,
    writes: 1,
    crashes: 1,
    horizon: 6,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Client {
    Idle,
    /// An acquire request sent at `sent` is out.
    Acquiring {
        attempt: u8,
        sent: u8,
    },
    /// Holds grant `grant` (ghost) with `token` until `deadline` (local).
    Holding {
        grant: u8,
        token: u16,
        deadline: u8,
        renewals: u8,
        writes: u8,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum LockMsg {
    Acquire {
        c: u8,
        attempt: u8,
        sent: u8,
    },
    Granted {
        c: u8,
        attempt: u8,
        grant: u8,
        token: u16,
        sent: u8,
    },
    Held {
        c: u8,
        attempt: u8,
    },
    Extend {
        c: u8,
        grant: u8,
        sent: u8,
    },
    Extended {
        c: u8,
        grant: u8,
        sent: u8,
        ok: bool,
    },
    Write {
        c: u8,
        grant: u8,
        token: u16,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum LockViolation {
    LowerToken { token: u16, accepted: u16 },
    SharedToken { token: u16, grants: (u8, u8) },
    StaleWrite { grant: u8, newer: u8 },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct LockState {
    now: u8,
    clients: [(u8, Client); 2], // (attempts made, state)
    /// The live lease: (grant, expiry).
    lease: Option<(u8, u8)>,
    /// The last token issued (0: none, or lost).
    last: u16,
    /// Grants issued (ghost: the grant order).
    grants: u8,
    down: bool,
    crashes: u8,
    /// The store: highest accepted token and the grant that wrote it.
    accepted: Option<(u16, u8)>,
    /// The newest grant (ghost) whose write the store accepted.
    newest_writer: u8,
    violation: Option<LockViolation>,
    net: Vec<LockMsg>,
}

/// A step of the lock model (its fields are read through `Debug`, in traces).
#[allow(dead_code)]
#[derive(Debug)]
enum LockAction {
    Tick,
    Crash { keeps_counter: bool },
    SendAcquire(u8),
    Renew(u8),
    CheckAndWrite(u8),
    Deliver(LockMsg),
}

struct LockModel {
    design: Design,
    bounds: LockBounds,
}

impl LockState {
    fn send(&mut self, m: LockMsg) {
        let at = self.net.partition_point(|x| *x <= m);
        self.net.insert(at, m);
    }
}

impl LockModel {
    fn deliver(&self, s: &mut LockState, m: LockMsg) {
        let now = s.now;
        match m {
            LockMsg::Acquire { c, attempt, sent } => {
                if s.lease.is_some_and(|(_, expiry)| expiry > now) {
                    s.send(LockMsg::Held { c, attempt });
                } else {
                    let floor = if self.design.token_floor {
                        u16::from(now) * FLOOR
                    } else {
                        0
                    };
                    let token = (s.last + 1).max(floor);
                    s.last = token;
                    s.grants += 1;
                    s.lease = Some((s.grants, now + TTL));
                    s.send(LockMsg::Granted {
                        c,
                        attempt,
                        grant: s.grants,
                        token,
                        sent,
                    });
                }
            }
            LockMsg::Extend { c, grant, sent } => {
                let ok = s
                    .lease
                    .is_some_and(|(g, expiry)| g == grant && expiry > now);
                if ok {
                    s.lease = Some((grant, now + TTL));
                }
                s.send(LockMsg::Extended { c, grant, sent, ok });
            }
            LockMsg::Granted {
                c,
                attempt,
                grant,
                token,
                sent,
            } => {
                let (_, st) = &mut s.clients[c as usize];
                if *st == (Client::Acquiring { attempt, sent }) {
                    let deadline = sent + TTL - DRIFT;
                    // A grant that arrives after its local deadline is never used.
                    *st = if now < deadline {
                        Client::Holding {
                            grant,
                            token,
                            deadline,
                            renewals: self.bounds.renewals,
                            writes: self.bounds.writes,
                        }
                    } else {
                        Client::Idle
                    };
                }
            }
            LockMsg::Held { c, attempt } => {
                let (_, st) = &mut s.clients[c as usize];
                if matches!(*st, Client::Acquiring { attempt: a, .. } if a == attempt) {
                    *st = Client::Idle;
                }
            }
            LockMsg::Extended { c, grant, sent, ok } => {
                let (_, st) = &mut s.clients[c as usize];
                if let Client::Holding {
                    grant: g, deadline, ..
                } = st
                    && *g == grant
                {
                    if ok && now < *deadline {
                        *deadline = (*deadline).max(sent + TTL - DRIFT);
                    } else {
                        *st = Client::Idle;
                    }
                }
            }
            LockMsg::Write { c: _, grant, token } => {
                let passes = match s.accepted {
                    None => true,
                    Some((highest, _)) => !self.design.fence || token >= highest,
                };
                if !passes {
                    return;
                }
                if let Some((highest, by)) = s.accepted {
                    let v = if token < highest {
                        Some(LockViolation::LowerToken {
                            token,
                            accepted: highest,
                        })
                    } else if token == highest && by != grant {
                        Some(LockViolation::SharedToken {
                            token,
                            grants: (by, grant),
                        })
                    } else if grant < s.newest_writer {
                        Some(LockViolation::StaleWrite {
                            grant,
                            newer: s.newest_writer,
                        })
                    } else {
                        None
                    };
                    s.violation = s.violation.or(v);
                }
                s.accepted = Some((token, grant));
                s.newest_writer = s.newest_writer.max(grant);
            }
        }
    }
}

impl Model for LockModel {
    type State = LockState;
    type Action = LockAction;

    fn init(&self) -> LockState {
        LockState {
            now: 0,
            clients: [(0, Client::Idle); 2],
            lease: None,
            last: 0,
            grants: 0,
            down: false,
            crashes: 0,
            accepted: None,
            newest_writer: 0,
            violation: None,
            net: Vec::new(),
        }
    }

    fn next(&self, s: &LockState, out: &mut Vec<(LockAction, LockState)>) {
        if s.violation.is_some() {
            return;
        }
        if s.now < self.bounds.horizon {
            let mut t = s.clone();
            t.now += 1;
            t.down = false;
            for (_, c) in &mut t.clients {
                if matches!(*c, Client::Holding { deadline, .. } if deadline <= t.now) {
                    *c = Client::Idle; // the lost signal fires at the local deadline
                }
            }
            out.push((LockAction::Tick, t));
        }
        if !s.down && s.crashes < self.bounds.crashes {
            for keeps_counter in [true, false] {
                let mut t = s.clone();
                t.crashes += 1;
                t.down = true;
                t.lease = None;
                if !keeps_counter {
                    t.last = 0;
                }
                out.push((LockAction::Crash { keeps_counter }, t));
            }
        }
        for (i, &(attempts, st)) in s.clients.iter().enumerate() {
            let c = i as u8;
            let mut step = |action: LockAction, f: &dyn Fn(&mut LockState)| {
                let mut t = s.clone();
                f(&mut t);
                out.push((action, t));
            };
            match st {
                Client::Idle if attempts < self.bounds.attempts => {
                    step(LockAction::SendAcquire(c), &|t| {
                        let sent = t.now;
                        t.clients[i] = (
                            attempts + 1,
                            Client::Acquiring {
                                attempt: attempts + 1,
                                sent,
                            },
                        );
                        t.send(LockMsg::Acquire {
                            c,
                            attempt: attempts + 1,
                            sent,
                        });
                    });
                }
                Client::Idle => {}
                Client::Acquiring { .. } => {}
                Client::Holding {
                    grant,
                    token,
                    deadline,
                    renewals,
                    writes,
                } => {
                    let holding = |renewals, writes| Client::Holding {
                        grant,
                        token,
                        deadline,
                        renewals,
                        writes,
                    };
                    // Holding implies `now < deadline`: a tick past the deadline loses it.
                    if renewals > 0 {
                        step(LockAction::Renew(c), &|t| {
                            t.clients[i].1 = holding(renewals - 1, writes);
                            let sent = t.now;
                            t.send(LockMsg::Extend { c, grant, sent });
                        });
                    }
                    if writes > 0 {
                        step(LockAction::CheckAndWrite(c), &|t| {
                            t.clients[i].1 = holding(renewals, writes - 1);
                            t.send(LockMsg::Write { c, grant, token });
                        });
                    }
                }
            }
        }
        let mut last = None;
        for (k, &m) in s.net.iter().enumerate() {
            if last == Some(m) {
                continue; // the same message twice: one successor is enough
            }
            if s.down && matches!(m, LockMsg::Acquire { .. } | LockMsg::Extend { .. }) {
                continue; // the server is restarting: requests wait (or retry) until it is up
            }
            last = Some(m);
            let mut t = s.clone();
            t.net.remove(k);
            self.deliver(&mut t, m);
            out.push((LockAction::Deliver(m), t));
        }
    }

    fn check(&self, s: &LockState) -> Result<(), String> {
        match s.violation {
            None => Ok(()),
            Some(v) => Err(format!("the fenced store accepted a bad write: {v:?}")),
        }
    }
}

// ----------------------------------------------------------------------------------------------
// The queue model
// ----------------------------------------------------------------------------------------------

/// The job lease in ticks.
const LEASE: u8 = 3;

/// How far the queue model is explored.
#[derive(Debug, Clone, Copy)]
struct QueueBounds {
    claims: u8,
    heartbeats: u8,
    horizon: u8,
}

const QUEUE_BOUNDS: QueueBounds = QueueBounds {
    claims: 2,
    heartbeats: 1,
    horizon: 5,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Worker {
    Idle,
    Claiming {
        sent: u8,
    },
    /// Runs the handler of `attempt` until `deadline` (local).
    Running {
        attempt: u8,
        deadline: u8,
        heartbeats: u8,
        beating: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Row {
    Available,
    Running,
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum QueueMsg {
    Claim {
        w: u8,
        sent: u8,
    },
    Claimed {
        w: u8,
        attempt: u8,
        sent: u8,
    },
    Empty {
        w: u8,
    },
    Heartbeat {
        w: u8,
        attempt: u8,
        sent: u8,
    },
    Beat {
        w: u8,
        attempt: u8,
        sent: u8,
        ok: bool,
    },
    Complete {
        attempt: u8,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct QueueState {
    now: u8,
    workers: [(u8, Worker); 2], // (claims made, state)
    row: Row,
    attempt: u8,
    lease_until: u8,
    /// Ghost: a completion of attempt `.0` was accepted while the row ran attempt `.1`.
    late_completion: Option<(u8, u8)>,
    net: Vec<QueueMsg>,
}

impl QueueState {
    fn send(&mut self, m: QueueMsg) {
        let at = self.net.partition_point(|x| *x <= m);
        self.net.insert(at, m);
    }
}

/// A step of the queue model (its fields are read through `Debug`, in traces).
#[allow(dead_code)]
#[derive(Debug)]
enum QueueAction {
    Tick,
    Reap,
    SendClaim(u8),
    SendHeartbeat(u8),
    Finish(u8),
    Deliver(QueueMsg),
}

struct QueueModel {
    design: Design,
    bounds: QueueBounds,
}

impl QueueModel {
    fn deliver(&self, s: &mut QueueState, m: QueueMsg) {
        let now = s.now;
        match m {
            QueueMsg::Claim { w, sent } => {
                if s.row == Row::Available {
                    s.row = Row::Running;
                    s.attempt += 1;
                    s.lease_until = now + LEASE;
                    s.send(QueueMsg::Claimed {
                        w,
                        attempt: s.attempt,
                        sent,
                    });
                } else {
                    s.send(QueueMsg::Empty { w });
                }
            }
            QueueMsg::Heartbeat { w, attempt, sent } => {
                let ok = s.row == Row::Running && s.attempt == attempt;
                if ok {
                    s.lease_until = now + LEASE;
                }
                s.send(QueueMsg::Beat {
                    w,
                    attempt,
                    sent,
                    ok,
                });
            }
            QueueMsg::Complete { attempt } => {
                let matches = !self.design.fence || s.attempt == attempt;
                if s.row == Row::Running && matches {
                    if attempt != s.attempt {
                        s.late_completion = s.late_completion.or(Some((attempt, s.attempt)));
                    }
                    s.row = Row::Done;
                }
            }
            QueueMsg::Claimed { w, attempt, sent } => {
                let (_, st) = &mut s.workers[w as usize];
                if *st == (Worker::Claiming { sent }) {
                    let deadline = sent + LEASE - DRIFT;
                    *st = if !self.design.local_deadline || now < deadline {
                        Worker::Running {
                            attempt,
                            deadline,
                            heartbeats: self.bounds.heartbeats,
                            beating: false,
                        }
                    } else {
                        Worker::Idle // cancelled before it started
                    };
                }
            }
            QueueMsg::Empty { w } => {
                let (_, st) = &mut s.workers[w as usize];
                if matches!(*st, Worker::Claiming { .. }) {
                    *st = Worker::Idle;
                }
            }
            QueueMsg::Beat {
                w,
                attempt,
                sent,
                ok,
            } => {
                let (_, st) = &mut s.workers[w as usize];
                if let Worker::Running {
                    attempt: a,
                    deadline,
                    beating,
                    ..
                } = st
                    && *a == attempt
                {
                    *beating = false;
                    if !ok {
                        *st = Worker::Idle; // rescued elsewhere: the handler is stopped
                    } else if now < *deadline {
                        *deadline = (*deadline).max(sent + LEASE - DRIFT);
                    }
                }
            }
        }
    }
}

impl Model for QueueModel {
    type State = QueueState;
    type Action = QueueAction;

    fn init(&self) -> QueueState {
        QueueState {
            now: 0,
            workers: [(0, Worker::Idle); 2],
            row: Row::Available,
            attempt: 0,
            lease_until: 0,
            late_completion: None,
            net: Vec::new(),
        }
    }

    fn next(&self, s: &QueueState, out: &mut Vec<(QueueAction, QueueState)>) {
        if self.check(s).is_err() {
            return;
        }
        if s.now < self.bounds.horizon {
            let mut t = s.clone();
            t.now += 1;
            if self.design.local_deadline {
                for (_, w) in &mut t.workers {
                    if matches!(*w, Worker::Running { deadline, .. } if deadline <= t.now) {
                        *w = Worker::Idle; // cancelled at the local deadline
                    }
                }
            }
            out.push((QueueAction::Tick, t));
        }
        if s.row == Row::Running && s.lease_until < s.now {
            let mut t = s.clone();
            t.row = Row::Available;
            out.push((QueueAction::Reap, t));
        }
        for (i, &(claims, st)) in s.workers.iter().enumerate() {
            let w = i as u8;
            match st {
                Worker::Idle if claims < self.bounds.claims => {
                    let mut t = s.clone();
                    t.workers[i] = (claims + 1, Worker::Claiming { sent: s.now });
                    t.send(QueueMsg::Claim { w, sent: s.now });
                    out.push((QueueAction::SendClaim(w), t));
                }
                Worker::Idle => {}
                Worker::Claiming { .. } => {}
                Worker::Running {
                    attempt,
                    deadline,
                    heartbeats,
                    beating,
                } => {
                    if heartbeats > 0 && !beating {
                        let mut t = s.clone();
                        t.workers[i].1 = Worker::Running {
                            attempt,
                            deadline,
                            heartbeats: heartbeats - 1,
                            beating: true,
                        };
                        t.send(QueueMsg::Heartbeat {
                            w,
                            attempt,
                            sent: s.now,
                        });
                        out.push((QueueAction::SendHeartbeat(w), t));
                    }
                    let mut t = s.clone();
                    t.workers[i].1 = Worker::Idle;
                    t.send(QueueMsg::Complete { attempt });
                    out.push((QueueAction::Finish(w), t));
                }
            }
        }
        let mut last = None;
        for (k, &m) in s.net.iter().enumerate() {
            if last == Some(m) {
                continue;
            }
            last = Some(m);
            let mut t = s.clone();
            t.net.remove(k);
            self.deliver(&mut t, m);
            out.push((QueueAction::Deliver(m), t));
        }
    }

    fn check(&self, s: &QueueState) -> Result<(), String> {
        let running: Vec<_> = s
            .workers
            .iter()
            .filter_map(|(_, w)| match w {
                Worker::Running { attempt, .. } => Some(*attempt),
                _ => None,
            })
            .collect();
        if running.len() > 1 {
            return Err(format!(
                "two executions of the job overlap (attempts {running:?}) at t={}",
                s.now
            ));
        }
        if let Some((late, current)) = s.late_completion {
            return Err(format!(
                "a late completion of attempt {late} was accepted while attempt {current} ran"
            ));
        }
        Ok(())
    }
}

// ----------------------------------------------------------------------------------------------
// The tests
// ----------------------------------------------------------------------------------------------

const LIMIT: usize = 20_000_000;

fn run<M: Model>(name: &str, model: &M) -> Explored<M> {
    let start = Instant::now();
    let found = explore(model, LIMIT);
    println!(
        "{name}: {} states, {} transitions, depth {}, {:.2?}{}",
        found.states,
        found.transitions,
        found.depth,
        start.elapsed(),
        match &found.violation {
            None => " — no violation".to_owned(),
            Some(cx) => format!(" — counterexample of {} steps", cx.steps.len()),
        }
    );
    found
}

/// Bounds from `var` (comma-separated numbers) instead of the defaults: the deeper run.
fn bounds_from_env<const N: usize>(var: &str, default: [u8; N]) -> [u8; N] {
    let Ok(text) = std::env::var(var) else {
        return default;
    };
    let parsed: Vec<u8> = text
        .split(',')
        .map(|n| n.trim().parse().expect("a number"))
        .collect();
    parsed
        .try_into()
        .unwrap_or_else(|_| panic!("{var} takes {N} comma-separated numbers"))
}

fn lock_bounds() -> LockBounds {
    let b = LOCK_BOUNDS;
    let [attempts, renewals, writes, crashes, horizon] = bounds_from_env(
        "LOCKWISE_MODEL_LOCK",
        [b.attempts, b.renewals, b.writes, b.crashes, b.horizon],
    );
    LockBounds {
        attempts,
        renewals,
        writes,
        crashes,
        horizon,
    }
}

fn queue_bounds() -> QueueBounds {
    let b = QUEUE_BOUNDS;
    let [claims, heartbeats, horizon] =
        bounds_from_env("LOCKWISE_MODEL_QUEUE", [b.claims, b.heartbeats, b.horizon]);
    QueueBounds {
        claims,
        heartbeats,
        horizon,
    }
}

fn lock(design: Design) -> LockModel {
    LockModel {
        design,
        bounds: lock_bounds(),
    }
}

fn queue(design: Design) -> QueueModel {
    QueueModel {
        design,
        bounds: queue_bounds(),
    }
}

/// Asserts that a mutant is caught, prints its counterexample, and returns its length.
fn caught<M: Model>(name: &str, model: &M, expect: &str) -> usize {
    let found = run(name, model);
    let cx = found
        .violation
        .unwrap_or_else(|| panic!("mutant {name} not caught: the model cannot see this bug"));
    println!("{}", cx.render());
    assert!(
        cx.property.contains(expect),
        "{name}: caught for the wrong reason: {}",
        cx.property
    );
    cx.steps.len()
}

#[test]
fn lease_and_fence_hold() {
    println!(
        "bounds: {:?}, TTL {TTL}, DRIFT {DRIFT}, FLOOR {FLOOR}",
        lock_bounds()
    );
    let found = run("lock model (real design)", &lock(REAL));
    if let Some(cx) = &found.violation {
        panic!("{}", cx.render());
    }
    assert!(found.states > 10_000, "the bounds explore too little");
}

#[test]
fn queue_lease_holds() {
    println!("bounds: {:?}, LEASE {LEASE}, DRIFT {DRIFT}", queue_bounds());
    let found = run("queue model (real design)", &queue(REAL));
    if let Some(cx) = &found.violation {
        panic!("{}", cx.render());
    }
    assert!(found.states > 1_000, "the bounds explore too little");
}

#[test]
fn mutant_without_fence_check_is_caught() {
    let design = Design {
        fence: false,
        ..REAL
    };
    caught("lock, no fence check", &lock(design), "LowerToken");
    caught(
        "queue, complete ignores the attempt",
        &queue(design),
        "late completion",
    );
}

#[test]
fn mutant_with_token_reset_to_1_is_caught() {
    let design = Design {
        token_floor: false,
        ..REAL
    };
    // Tokens are not the queue's business (its attempt counter lives in the row, which a
    // crash does not lose), so only the lock model has something to catch here.
    caught("lock, token reset to 1", &lock(design), "SharedToken");
}

#[test]
fn mutant_without_local_job_deadline_is_caught() {
    let design = Design {
        local_deadline: false,
        ..REAL
    };
    caught("queue, no local job deadline", &queue(design), "overlap");
}

/// The explorer itself: a three-state counter whose property fails at 2 is caught with the
/// two steps that reach it, and one that holds is explored completely.
#[test]
fn explorer_finds_the_shortest_path() {
    struct Counter(u8);
    impl Model for Counter {
        type State = u8;
        type Action = &'static str;
        fn init(&self) -> u8 {
            0
        }
        fn next(&self, s: &u8, out: &mut Vec<(&'static str, u8)>) {
            if *s < 5 {
                out.push(("inc", s + 1));
                out.push(("skip", (s + 3).min(5)));
            }
        }
        fn check(&self, s: &u8) -> Result<(), String> {
            if *s == self.0 {
                Err(format!("reached {s}"))
            } else {
                Ok(())
            }
        }
    }
    let found = explore(&Counter(4), 100);
    let cx = found.violation.expect("4 is reachable");
    assert_eq!(cx.steps.len(), 2, "{}", cx.render()); // skip (3), inc (4)
    let found = explore(&Counter(9), 100);
    assert!(found.violation.is_none());
    assert_eq!(found.states, 6);
}
