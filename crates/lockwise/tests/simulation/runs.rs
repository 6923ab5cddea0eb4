//! Simulating seeds, replaying one, and the checks on the real design and its mutants.

use super::*;

/// What one seed did.
#[derive(Debug)]
pub(super) struct Outcome {
    pub(super) trace: Vec<String>,
    pub(super) violations: Vec<String>,
}

/// Runs one seed on a fresh paused runtime.
pub(super) fn simulate(seed: u64, design: Design) -> Outcome {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let world = rt.block_on(async {
        let start = Instant::now();
        let world = Arc::new(World {
            design,
            start,
            server: Mutex::default(),
            store: Mutex::default(),
            queue: Mutex::new(vec![
                Row {
                    state: JobState::Available,
                    attempt: 0,
                    lease_until: start,
                    runs: Vec::new(),
                };
                JOBS
            ]),
            trace: Mutex::default(),
            violations: Mutex::default(),
        });
        let end = start + RUN;
        tokio::spawn(crasher(world.clone(), Rng::new(seed, 1), end));
        tokio::spawn(reaper(world.clone(), Rng::new(seed, 2), end));
        for id in 0..CLIENTS {
            tokio::spawn(client(world.clone(), id, seed, end));
        }
        for id in 0..WORKERS {
            tokio::spawn(worker(world.clone(), id, seed, end));
        }
        sleep_until(end + DRAIN).await;
        world
    });
    drop(rt); // stops every task still waiting
    let trace = std::mem::take(&mut *lock(&world.trace));
    let violations = std::mem::take(&mut *lock(&world.violations));
    Outcome { trace, violations }
}

pub(super) fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number"))
    })
}

pub(super) fn replay_hint(seed: u64, name: &str) -> String {
    format!(
        "LOCKWISE_SEED={seed} LOCKWISE_MUTANT={name} cargo test -p lockwise --test simulation replay -- --nocapture"
    )
}

/// Runs `seeds` on every core (each seed on its own runtime, so the outcome of a seed does
/// not depend on the threads) and returns what `keep` keeps of each, in seed order.
pub(super) fn run_seeds<T: Send>(
    seeds: std::ops::Range<u64>,
    design: Design,
    keep: impl Fn(u64, Outcome) -> T + Sync,
) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8)) as u64;
    let mut results: Vec<(u64, T)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let seeds = seeds.clone();
                let keep = &keep;
                scope.spawn(move || {
                    seeds
                        .filter(|seed| seed % threads == t)
                        .map(|seed| (seed, keep(seed, simulate(seed, design))))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a simulation thread panicked"))
            .collect()
    });
    results.sort_by_key(|(seed, _)| *seed);
    results.into_iter().map(|(_, r)| r).collect()
}

#[test]
pub(super) fn real_design_has_no_violation() {
    if std::env::var_os("LOCKWISE_SEED").is_some() {
        return; // a replay was asked for: see `replay`
    }
    let seeds = env_u64("LOCKWISE_SEEDS").unwrap_or(SEEDS);
    let started = std::time::Instant::now();
    let results = run_seeds(0..seeds, REAL, |seed, outcome| {
        let grants = outcome
            .trace
            .iter()
            .filter(|e| e.contains("server grants"))
            .count();
        let failure = (!outcome.violations.is_empty()).then(|| {
            format!(
                "seed {seed} violated {:?}\nreplay: {}\n{}",
                outcome.violations,
                replay_hint(seed, "real"),
                outcome.trace.join("\n")
            )
        });
        (grants, outcome.trace.len(), failure)
    });
    let grants: usize = results.iter().map(|r| r.0).sum();
    let events: usize = results.iter().map(|r| r.1).sum();
    let failures: Vec<&String> = results.iter().filter_map(|r| r.2.as_ref()).collect();
    println!(
        "{seeds} seeds, {} violations, {grants} grants, {events} events, in {:.2?}",
        failures.len(),
        started.elapsed()
    );
    if let Some(first) = failures.first() {
        panic!("{} seeds failed; the first: {first}", failures.len());
    }
    assert!(
        grants as u64 > seeds,
        "the clients hardly ever got the lock"
    );
}

/// A mutant is caught within the seed budget, once for each kind of violation in `kinds`,
/// and its first failing seed replays exactly.
pub(super) fn caught(name: &str, kinds: &[&str]) {
    let started = std::time::Instant::now();
    let design = mutant(name);
    let mut first: Vec<Option<(u64, Outcome)>> = kinds.iter().map(|_| None).collect();
    for seed in 0..SEEDS {
        if first.iter().all(Option::is_some) {
            break;
        }
        let outcome = simulate(seed, design);
        let hits: Vec<bool> = kinds
            .iter()
            .map(|k| outcome.violations.iter().any(|v| v.contains(k)))
            .collect();
        if let Some(i) = (0..kinds.len()).find(|&i| hits[i] && first[i].is_none()) {
            for j in i + 1..kinds.len() {
                if hits[j] && first[j].is_none() {
                    first[j] = Some((seed, simulate(seed, design)));
                }
            }
            first[i] = Some((seed, outcome));
        }
    }
    for (kind, found) in kinds.iter().zip(&first) {
        let Some((seed, outcome)) = found else {
            panic!("mutant {name} not caught ({kind:?}) in {SEEDS} seeds");
        };
        println!(
            "mutant {name}: {kind:?} first at seed {seed}: {:?}\n  replay: {}",
            outcome.violations,
            replay_hint(*seed, name)
        );
        let again = simulate(*seed, design);
        assert_eq!(
            again.trace, outcome.trace,
            "seed {seed} did not replay exactly"
        );
        assert_eq!(again.violations, outcome.violations);
    }
    println!("mutant {name}: all caught in {:.2?}", started.elapsed());
}

#[test]
pub(super) fn mutant_without_fence_check_is_caught() {
    caught("no_fence", &["below", "late completion"]);
}

#[test]
pub(super) fn mutant_with_token_reset_to_1_is_caught() {
    caught("token_reset", &["already accepted from grant"]);
}

#[test]
pub(super) fn mutant_without_local_job_deadline_is_caught() {
    caught("no_local_deadline", &["overlap"]);
}

/// The same seed gives the same trace, event for event, whether it runs alone or among
/// other seeds on other threads (`LOCKWISE_REPLAY_SEEDS`, default 100, sets how many seeds are
/// compared); different seeds differ.
#[test]
pub(super) fn a_seed_replays_exactly() {
    let seeds = env_u64("LOCKWISE_REPLAY_SEEDS").unwrap_or(100);
    let first = run_seeds(0..seeds, REAL, |_, outcome| outcome.trace);
    for (seed, trace) in (0..seeds).zip(&first) {
        assert!(trace.len() > 10, "seed {seed}: too little happened");
        let again = simulate(seed, REAL);
        assert_eq!(&again.trace, trace, "seed {seed} did not replay exactly");
    }
    assert_ne!(first[0], first[1]);
}

/// `LOCKWISE_SEED=<n> [LOCKWISE_MUTANT=<name>]`: runs that seed and prints its trace; fails
/// when the real design violates a property there. Does nothing without `LOCKWISE_SEED`.
#[test]
pub(super) fn replay() {
    let Some(seed) = env_u64("LOCKWISE_SEED") else {
        return;
    };
    let name = std::env::var("LOCKWISE_MUTANT").unwrap_or_default();
    let outcome = simulate(seed, mutant(&name));
    println!("{}", outcome.trace.join("\n"));
    println!("violations: {:?}", outcome.violations);
    if mutant(&name) == REAL {
        assert!(outcome.violations.is_empty());
    }
}
