//! Running the explorer on the real design and on its mutants.

use super::*;

pub(super) const LIMIT: usize = 20_000_000;

pub(super) fn run<M: Model>(name: &str, model: &M) -> Explored<M> {
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
pub(super) fn bounds_from_env<const N: usize>(var: &str, default: [u8; N]) -> [u8; N] {
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

pub(super) fn lock_bounds() -> LockBounds {
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

pub(super) fn queue_bounds() -> QueueBounds {
    let b = QUEUE_BOUNDS;
    let [claims, heartbeats, horizon] =
        bounds_from_env("LOCKWISE_MODEL_QUEUE", [b.claims, b.heartbeats, b.horizon]);
    QueueBounds {
        claims,
        heartbeats,
        horizon,
    }
}

pub(super) fn lock(design: Design) -> LockModel {
    LockModel {
        design,
        bounds: lock_bounds(),
    }
}

pub(super) fn queue(design: Design) -> QueueModel {
    QueueModel {
        design,
        bounds: queue_bounds(),
    }
}

/// Asserts that a mutant is caught, prints its counterexample, and returns its length.
pub(super) fn caught<M: Model>(name: &str, model: &M, expect: &str) -> usize {
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
pub(super) fn lease_and_fence_hold() {
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
pub(super) fn queue_lease_holds() {
    println!("bounds: {:?}, LEASE {LEASE}, DRIFT {DRIFT}", queue_bounds());
    let found = run("queue model (real design)", &queue(REAL));
    if let Some(cx) = &found.violation {
        panic!("{}", cx.render());
    }
    assert!(found.states > 1_000, "the bounds explore too little");
}

#[test]
pub(super) fn mutant_without_fence_check_is_caught() {
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
pub(super) fn mutant_with_token_reset_to_1_is_caught() {
    let design = Design {
        token_floor: false,
        ..REAL
    };
    // Tokens are not the queue's business (its attempt counter lives in the row, which a
    // crash does not lose), so only the lock model has something to catch here.
    caught("lock, token reset to 1", &lock(design), "SharedToken");
}

#[test]
pub(super) fn mutant_without_local_job_deadline_is_caught() {
    let design = Design {
        local_deadline: false,
        ..REAL
    };
    caught("queue, no local job deadline", &queue(design), "overlap");
}

/// The explorer itself: a three-state counter whose property fails at 2 is caught with the
/// two steps that reach it, and one that holds is explored completely.
#[test]
pub(super) fn explorer_finds_the_shortest_path() {
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
