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

mod checks;
mod lock_model;
mod queue_model;
#[allow(unused_imports)]
use checks::*;
#[allow(unused_imports)]
use lock_model::*;
#[allow(unused_imports)]
use queue_model::*;
