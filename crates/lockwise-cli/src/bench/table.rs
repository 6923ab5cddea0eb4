//! The bench's report as text: the header with the servers measured, and one table per
//! bench, lockwise beside its floor (median [min–max] over the rounds).

use std::time::Duration;

use lockwise_bench::scaling::Scaling;
use lockwise_bench::{Entry, Plan, ServerInfo, Spread};

use crate::exit::outln;

/// The header, and the throughput table against the raw floor.
pub(super) fn print_throughput(
    out: &mut String,
    servers: &[ServerInfo],
    plan: Plan,
    length: Duration,
    batch: Option<u16>,
    drained: &[Entry],
) {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    outln!(
        out,
        "lockwise bench queue — {cores} cores, servers on this machine:"
    );
    for info in servers {
        let settings: Vec<String> = info
            .settings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        outln!(
            out,
            "  {} {} ({})",
            info.backend,
            info.version,
            settings.join(", ")
        );
    }
    let (sustained, drained): (Vec<&Entry>, Vec<&Entry>) =
        drained.iter().partition(|e| e.bench == "sustained");
    for e in sustained {
        if e.backend == "mysql" {
            print_sustained_mysql(out, length, e);
            continue;
        }
        outln!(
            out,
            "\nsustained: a producer holds the queue near {} jobs while {} workers run {} ms jobs, \
             {} run(s) of {:?} per side{}\n(lockwise: one Worker; floor: the naive claim-10 + complete \
             loop, jobs run one after the other per task); no VACUUM from the bench\n",
            e.backlog.unwrap_or(0),
            e.tasks.unwrap_or(0),
            e.job_ms.unwrap_or(0.0),
            e.rounds,
            length,
            e.retention_ms.map_or_else(String::new, |ms| format!(
                ", finished jobs kept {ms:.0} ms (lockwise: Worker::retention; floor: DELETE \
                 once a second)"
            )),
        );
        outln!(
            out,
            "{:<24} {:<24} {:<18} most n_dead_tup of any table: lockwise peak / end, floor peak",
            "lockwise jobs/s",
            "floor jobs/s",
            "ratio"
        );
        outln!(
            out,
            "{:<24} {:<24} {:<18} {} / {}, {}",
            spread(&e.lockwise),
            e.floor.as_ref().map_or_else(|| "-".to_owned(), spread),
            e.ratio.as_ref().map_or_else(|| "-".to_owned(), spread),
            e.dead_tuples_peak.unwrap_or(0),
            e.dead_tuples_end.unwrap_or(0),
            e.floor_dead_tuples_peak.unwrap_or(0),
        );
        if let Some(tables) = &e.dead_tuples_by_table {
            let shown: Vec<String> = tables
                .iter()
                .take(6)
                .map(|(table, dead)| format!("{table} {dead}"))
                .collect();
            outln!(
                out,
                "lockwise's peak n_dead_tup by table: {}",
                shown.join(", ")
            );
        }
        if let Some(ceiling) = e.ceiling {
            outln!(
                out,
                "ceiling: {} tasks running the jobs back to back with no queue: {} jobs/s \
                 (lockwise at {:.0} % of it, the floor at {:.0} %)",
                e.tasks.unwrap_or(0),
                figure(ceiling),
                100.0 * e.lockwise.median / ceiling,
                100.0 * e.floor.as_ref().map_or(0.0, |f| f.median) / ceiling,
            );
        }
    }
    if drained.is_empty() {
        return;
    }
    outln!(
        out,
        "\nthroughput: no-op jobs drained by 8 handlers in one Worker (or split among several), \
         {}, against the naive claim-10 + complete loop\nissued raw by 8 tasks on the same \
         table; {} rounds per side, alternating; median [min–max]\n",
        batch.map_or_else(
            || "the Worker's own batching".to_owned(),
            |n| format!("batch {n}")
        ),
        plan.rounds
    );
    outln!(
        out,
        "{:>8} {:>8}  {:<24} {:<24} {:<18} n_dead_tup peak / end",
        "backlog",
        "workers",
        "lockwise jobs/s",
        "floor jobs/s",
        "ratio"
    );
    for e in drained {
        outln!(
            out,
            "{:>8} {:>8}  {:<24} {:<24} {:<18} {} / {}",
            e.backlog.unwrap_or(0),
            match e.workers.unwrap_or(1).max(1) {
                w if 8 % w == 0 => format!("{w}×{}", 8 / w),
                w => w.to_string(),
            },
            spread(&e.lockwise),
            e.floor.as_ref().map_or_else(|| "-".to_owned(), spread),
            e.ratio.as_ref().map_or_else(|| "-".to_owned(), spread),
            e.dead_tuples_peak.unwrap_or(0),
            e.dead_tuples_end.unwrap_or(0),
        );
    }
}

/// The enqueue table: one producer's enqueue_many against the same rows inserted raw.
pub(super) fn print_enqueue(out: &mut String, plan: Plan, enqueued: &[Entry]) {
    let Some(first) = enqueued.first() else {
        return;
    };
    outln!(
        out,
        "\nenqueue: one producer enqueues {} no-op jobs with enqueue_many in calls of {}, against \
         the same rows\ninserted raw, one statement per {}; {} rounds per side, alternating; \
         median [min–max]\n",
        first.jobs.unwrap_or(0),
        first.batch.unwrap_or(0),
        first.batch.unwrap_or(0),
        plan.rounds
    );
    outln!(
        out,
        "{:<10} {:<24} {:<24} ratio",
        "backend",
        "lockwise jobs/s",
        "floor jobs/s"
    );
    for e in enqueued {
        outln!(
            out,
            "{:<10} {:<24} {:<24} {}",
            e.backend,
            spread(&e.lockwise),
            e.floor.as_ref().map_or_else(|| "-".to_owned(), spread),
            e.ratio.as_ref().map_or_else(|| "-".to_owned(), spread),
        );
    }
}

/// The exercise-3 table, with the lesson's structural reason beside the figures.
pub(super) fn print_scaling(out: &mut String, plan: Plan, setup: &Scaling, results: &[Entry]) {
    outln!(out, "\nthe lesson's exercise 3:");
    outln!(
        out,
        "{} runs of {:?} per strategy and worker count, alternating; {:?} of I/O per job; median\n",
        plan.rounds,
        plan.round,
        setup.io
    );
    outln!(
        out,
        "{:<13} {:>7} {:>9} {:>11} {:>12} {:>11} {:>10} {:>11} {:>10}",
        "strategy",
        "workers",
        "jobs/s",
        "× 1 worker",
        "in parallel",
        "trips/job",
        "jobs/claim",
        "WAL B/job",
        "dead/job"
    );
    for e in results {
        let strategy = e.strategy.as_deref().unwrap_or("-");
        let one = results
            .iter()
            .find(|r| r.strategy.as_deref() == Some(strategy) && r.workers == Some(1))
            .and_then(|r| r.jobs_per_s);
        let speedup = match (e.jobs_per_s, one) {
            (Some(n), Some(one)) if one > 0.0 => format!("{:.2}", n / one),
            _ => "-".to_owned(),
        };
        outln!(
            out,
            "{:<13} {:>7} {:>9} {:>11} {:>12} {:>11} {:>10} {:>11} {:>10}",
            strategy,
            e.workers.unwrap_or(0),
            opt(e.jobs_per_s),
            speedup,
            e.max_parallel
                .map_or_else(|| "-".to_owned(), |n| n.to_string()),
            opt(e.round_trips_per_job),
            opt(e.jobs_per_claim),
            opt(e.wal_bytes_per_job),
            opt(e.dead_tuples_per_job),
        );
    }
    outln!(
        out,
        "\nWhy SKIP LOCKED is faster by structure, not only by the numbers (the lesson):\n\
         1. One lock makes the queue sequential: one worker inside at a time, the others are\n   \
            refused and sleep 50 ms. More workers add only more refused attempts.\n\
         2. Each job costs the lock's round trips (lock, select, update, release) against one\n   \
            UPDATE … RETURNING for a whole batch.\n\
         3. Batches of 10 divide the cost per job again.\n\
         4. There is no lock to leak: a crashed worker leaves rows, not a held lock.\n\
         Partitioned (each worker claims only id % workers = its index) has no contention by\n\
         construction: no two workers ever want one row, so nothing is skipped or waited for.\n\
         Its price: a dead worker's rows wait until the partitioning changes (a live group,\n\
         `lockwise partition`, moves them within a lease)."
    );
}

/// `1234`, `12.3k` style: figures to three significant digits.
fn figure(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.1}k", v / 1000.0)
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn spread(s: &Spread) -> String {
    format!("{} [{}–{}]", figure(s.median), figure(s.min), figure(s.max))
}

pub(super) fn print_table(
    out: &mut String,
    servers: &[(String, ServerInfo)],
    skipped: &[String],
    plan: Plan,
    results: &[Entry],
) {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    outln!(
        out,
        "lockwise bench lock — {cores} cores, servers on this machine:"
    );
    for (_, info) in servers {
        let settings: Vec<String> = info
            .settings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        outln!(
            out,
            "  {} {} ({})",
            info.backend,
            info.version,
            settings.join(", ")
        );
    }
    for s in skipped {
        outln!(out, "  not measured: {s}");
    }
    outln!(
        out,
        "{} rounds of {:?} per side, lockwise and floor alternating; median [min–max]\n",
        plan.rounds,
        plan.round
    );
    outln!(
        out,
        "{:<11} {:<9} {:>5}  {:<34} {:<24} {:<18} detail",
        "bench",
        "backend",
        "tasks",
        "lockwise",
        "floor",
        "ratio"
    );
    for e in results {
        let detail = match e.bench.as_str() {
            "sequential" => format!(
                "acquire p50/p99 {}/{} µs, floor {}/{} µs",
                opt(e.p50_us),
                opt(e.p99_us),
                opt(e.floor_p50_us),
                opt(e.floor_p99_us)
            ),
            "handoff" => format!(
                "to another waiter p50/p99 {}/{} µs, fairness {} (max/min per waiter)",
                opt(e.p50_us),
                opt(e.p99_us),
                opt(e.fairness)
            ),
            _ => String::new(),
        };
        outln!(
            out,
            "{:<11} {:<9} {:>5}  {:<34} {:<24} {:<18} {}",
            e.bench,
            e.backend,
            e.tasks.map_or_else(|| "-".to_owned(), |t| t.to_string()),
            format!("{} {}", spread(&e.lockwise), e.unit),
            e.floor.as_ref().map_or_else(|| "-".to_owned(), spread),
            e.ratio.as_ref().map_or_else(|| "-".to_owned(), spread),
            detail
        );
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), figure)
}

/// The sustained load on MariaDB/MySQL: InnoDB's figures instead of dead tuples.
fn print_sustained_mysql(out: &mut String, length: Duration, e: &Entry) {
    outln!(
        out,
        "\nsustained (MariaDB/MySQL): a producer holds the queue near {} jobs while {} workers \
         run {} ms jobs, {} run(s) of {:?} per side{}\n(lockwise: one Worker; floor: the naive \
         claim-10 + complete loop in READ COMMITTED, jobs run one after the other per task)\n",
        e.backlog.unwrap_or(0),
        e.tasks.unwrap_or(0),
        e.job_ms.unwrap_or(0.0),
        e.rounds,
        length,
        e.retention_ms.map_or_else(String::new, |ms| format!(
            ", finished jobs kept {ms:.0} ms (both: DELETE once a second)"
        )),
    );
    outln!(
        out,
        "{:<24} {:<24} {:<18} longest InnoDB history list: lockwise, floor; most rows held: lockwise, floor",
        "lockwise jobs/s",
        "floor jobs/s",
        "ratio"
    );
    outln!(
        out,
        "{:<24} {:<24} {:<18} {}, {}; {}, {}",
        spread(&e.lockwise),
        e.floor.as_ref().map_or_else(|| "-".to_owned(), spread),
        e.ratio.as_ref().map_or_else(|| "-".to_owned(), spread),
        e.history_list_peak.unwrap_or(0),
        e.floor_history_list_peak.unwrap_or(0),
        e.rows_peak.unwrap_or(0),
        e.floor_rows_peak.unwrap_or(0),
    );
}
