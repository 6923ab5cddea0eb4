//! Network faults between a queue worker and its database (reliability catalogue R15, R16),
//! on PostgreSQL and on MariaDB, with one worker connected through a [`TcpProxy`]:
//!
//! - R15: a worker cut off from the database cancels its handlers at their local deadline,
//!   before the reaper can give the jobs to another worker: two executions of one job never
//!   overlap, and every job still ends done.
//! - R16: a claim whose answer is lost (committed on the server, reply held back) costs no
//!   attempt: with `max_attempts = 1` no job is dead-lettered without having run, and every
//!   job runs exactly once on the healthy worker standing by.
//!
//! Each test counts the faults it injected (chunks the proxy held) and fails if the fault did
//! not hit real traffic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockwise::queue::{Job, JobContext, JobId, Queue, Worker, WorkerReport};
use lockwise_testkit::proxy::TcpProxy;
use lockwise_testkit::{MysqlDatabase, PgSchema};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, timeout};
use tokio_util::sync::CancellationToken;

/// Which database a case runs on.
#[derive(Debug, Clone, Copy)]
enum Db {
    Postgres,
    Mariadb,
}

/// A private store, a queue on it reached directly, and a way to reach the same queue
/// through a proxy.
struct Store {
    _pg: Option<PgSchema>,
    _my: Option<MysqlDatabase>,
    db: Db,
    url: String,
    schema: String,
    direct: Queue,
}

/// `url` with its host and port replaced by the proxy's.
fn through(url: &str, port: u16) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let user = authority.rsplit_once('@').map(|(u, _)| format!("{u}@"));
    format!(
        "{scheme}://{}127.0.0.1:{port}/{path}",
        user.unwrap_or_default()
    )
}

/// The server port in `url` (5432 / 3306 when none is given).
fn port_of(url: &str, default: u16) -> u16 {
    let rest = url.split_once("://").unwrap().1;
    let authority = rest.split('/').next().unwrap();
    let host = authority.rsplit('@').next().unwrap();
    host.rsplit_once(':')
        .map_or(default, |(_, p)| p.parse().unwrap())
}

impl Store {
    async fn new(db: Db, label: &str) -> Store {
        match db {
            Db::Postgres => {
                let schema = PgSchema::new(label);
                let url = schema.url().to_owned();
                let name = schema.name().to_owned();
                let direct = pg_queue(&url, &name).await;
                Store {
                    _pg: Some(schema),
                    _my: None,
                    db,
                    url,
                    schema: name,
                    direct,
                }
            }
            Db::Mariadb => {
                let database = MysqlDatabase::mysql(label);
                let url = database.url();
                let direct = my_queue(&url).await;
                Store {
                    _pg: None,
                    _my: Some(database),
                    db,
                    url,
                    schema: String::new(),
                    direct,
                }
            }
        }
    }

    /// A proxy in front of the store's server, and the queue reached through it.
    async fn proxied(&self) -> (TcpProxy, Queue) {
        let default = match self.db {
            Db::Postgres => 5432,
            Db::Mariadb => 3306,
        };
        let proxy = TcpProxy::start(port_of(&self.url, default));
        // In clear text: a reply hold aims at the bytes of one request.
        let plain = match self.db {
            Db::Postgres => "sslmode=disable",
            Db::Mariadb => "ssl-mode=DISABLED",
        };
        let sep = if self.url.contains('?') { '&' } else { '?' };
        let url = format!("{}{sep}{plain}", through(&self.url, proxy.port()));
        let queue = match self.db {
            Db::Postgres => pg_queue(&url, &self.schema).await,
            Db::Mariadb => my_queue(&url).await,
        };
        (proxy, queue)
    }
}

async fn pg_queue(url: &str, schema: &str) -> Queue {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(24)
        .connect(url)
        .await
        .expect("PostgreSQL is not reachable; run scripts/services");
    let q = Queue::with_schema(pool, schema, "q").unwrap();
    q.migrate().await.unwrap();
    q
}

async fn my_queue(url: &str) -> Queue {
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(24)
        .connect(url)
        .await
        .expect("MariaDB is not reachable; run scripts/services");
    let q = Queue::mysql(pool, "q");
    q.migrate().await.unwrap();
    q
}

/// One execution of a handler.
#[derive(Debug, Clone)]
struct Execution {
    job: JobId,
    worker: usize,
    start: Instant,
    end: Option<Instant>,
    /// Stopped before it finished (its future dropped).
    cancelled: bool,
    /// For a cancelled execution: how long after the job's local deadline it was dropped.
    after_deadline: Option<Duration>,
}

#[derive(Debug, Clone, Default)]
struct Log(Arc<Mutex<Vec<Execution>>>);

impl Log {
    fn all(&self) -> Vec<Execution> {
        self.0.lock().unwrap().clone()
    }
}

/// Records the end of an execution when the handler's future ends or is dropped.
struct Recording {
    log: Log,
    index: usize,
    ctx: JobContext,
    completed: bool,
}

impl Drop for Recording {
    fn drop(&mut self) {
        let now = Instant::now();
        let mut all = self.log.0.lock().unwrap();
        let e = &mut all[self.index];
        e.end = Some(now);
        e.cancelled = !self.completed;
        if !self.completed {
            e.after_deadline = Some(now.saturating_duration_since(self.ctx.deadline()));
        }
    }
}

/// A handler that runs `for_` and records its execution as worker `worker`'s.
fn recording(
    log: &Log,
    worker: usize,
    for_: Duration,
) -> impl Fn(JobContext) -> futures_util::future::BoxFuture<'static, Result<(), String>>
+ Send
+ Sync
+ 'static {
    let log = log.clone();
    move |ctx: JobContext| {
        let log = log.clone();
        Box::pin(async move {
            let index = {
                let mut all = log.0.lock().unwrap();
                all.push(Execution {
                    job: ctx.id,
                    worker,
                    start: Instant::now(),
                    end: None,
                    cancelled: false,
                    after_deadline: None,
                });
                all.len() - 1
            };
            let mut rec = Recording {
                log,
                index,
                ctx,
                completed: false,
            };
            sleep(for_).await;
            rec.completed = true;
            Ok(())
        })
    }
}

/// The lease of the tests' workers.
const LEASE: Duration = Duration::from_secs(2);

fn worker(q: &Queue, concurrency: usize) -> Worker {
    Worker::new(q.clone())
        .lease(LEASE)
        .concurrency(concurrency)
        .batch(concurrency)
        .poll_interval(Duration::from_millis(50))
        .backoff(Duration::from_millis(10), Duration::from_millis(20))
        .grace(Duration::from_secs(1))
}

fn start(
    w: Worker,
    log: &Log,
    index: usize,
    for_: Duration,
    stop: &CancellationToken,
) -> JoinHandle<lockwise::Result<WorkerReport>> {
    tokio::spawn(w.run(recording(log, index, for_), stop.clone()))
}

/// Waits until `cond` holds, checking every 20 ms; panics with `what` after `limit`.
async fn wait_for<F, Fut>(limit: Duration, what: &str, cond: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let give_up = Instant::now() + limit;
    while !cond().await {
        assert!(Instant::now() < give_up, "timed out waiting for {what}");
        sleep(Duration::from_millis(20)).await;
    }
}

/// Stops a worker: its report, or `None` when it did not stop within 10 s (then aborted).
async fn stop_worker(task: JoinHandle<lockwise::Result<WorkerReport>>) -> Option<WorkerReport> {
    let abort = task.abort_handle();
    match timeout(Duration::from_secs(10), task).await {
        Ok(joined) => Some(joined.unwrap().unwrap()),
        Err(_) => {
            abort.abort();
            None
        }
    }
}

/// R15: lease 2 s, handlers of 6 s, three workers, one of them through a proxy that first adds
/// 200 ms of latency, then cuts the link for 8 s.
async fn a_cut_off_worker_cancels_its_handlers_before_anyone_else_runs_the_job(db: Db) {
    const JOBS: usize = 6;
    let store = Store::new(db, "r15").await;
    let q = store.direct.clone();
    let (proxy, via_proxy) = store.proxied().await;
    q.enqueue_many((0..JOBS).map(|i| Job::new(json!({ "n": i }))))
        .await
        .unwrap();
    let log = Log::default();
    let run_for = Duration::from_secs(6);
    let stop = CancellationToken::new();

    // The proxied worker takes two jobs first; the healthy ones take the rest and keep free
    // slots, so that a rescued job would run again at once.
    let cut_off = start(worker(&via_proxy, 2), &log, 0, run_for, &stop);
    wait_for(
        Duration::from_secs(10),
        "the proxied worker's two jobs",
        || {
            let log = log.clone();
            async move { log.all().iter().filter(|e| e.worker == 0).count() == 2 }
        },
    )
    .await;
    let healthy: Vec<_> = (1..=2)
        .map(|i| start(worker(&q, 4), &log, i, run_for, &stop))
        .collect();
    wait_for(Duration::from_secs(10), "every job to start", || {
        let log = log.clone();
        async move { log.all().len() == JOBS }
    })
    .await;

    proxy.delay(Duration::from_millis(200));
    sleep(Duration::from_millis(700)).await;
    let cut_at = Instant::now();
    proxy.cut();
    sleep(Duration::from_secs(8)).await;
    proxy.heal();
    let healed_at = Instant::now();
    proxy.delay(Duration::ZERO);

    let done_in_time = timeout(Duration::from_secs(60), async {
        while q.stats().await.unwrap().done < JOBS as i64 {
            sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .is_ok();
    stop.cancel();
    let cut_off_report = stop_worker(cut_off).await;
    for w in healthy {
        stop_worker(w).await;
    }
    let stats = q.stats().await.unwrap();
    let all = log.all();

    // The fault hit real traffic, and a running job of the proxied worker.
    let held = proxy.held();
    let hit: Vec<&Execution> = all
        .iter()
        .filter(|e| e.worker == 0 && e.start < cut_at && e.end.is_none_or(|end| end > cut_at))
        .collect();

    // Overlaps between two executions of one job.
    let mut by_job: BTreeMap<JobId, Vec<&Execution>> = BTreeMap::new();
    for e in &all {
        by_job.entry(e.job).or_default().push(e);
    }
    let now = Instant::now();
    let mut overlaps = 0;
    let mut overlap_total = Duration::ZERO;
    for runs in by_job.values() {
        for (i, a) in runs.iter().enumerate() {
            for b in &runs[i + 1..] {
                let (a_end, b_end) = (a.end.unwrap_or(now), b.end.unwrap_or(now));
                let (from, to) = (a.start.max(b.start), a_end.min(b_end));
                if from < to {
                    overlaps += 1;
                    overlap_total += to - from;
                }
            }
        }
    }
    let cancelled: Vec<&Execution> = all.iter().filter(|e| e.cancelled).collect();
    let late: Vec<u128> = cancelled
        .iter()
        .filter_map(|e| e.after_deadline.map(|d| d.as_millis()))
        .collect();
    let cut_to_cancel: Vec<u128> = cancelled
        .iter()
        .filter_map(|e| {
            e.end
                .map(|end| end.saturating_duration_since(cut_at).as_millis())
        })
        .collect();
    println!(
        "R15 {db:?}: {} executions of {JOBS} jobs, {overlaps} overlaps ({overlap_total:?} in all), \
         done {}, dead {}, lost {}; faults: {held} chunks held by an 8 s cut ({:?} long), \
         {} running executions hit; cancelled {} (ms after the local deadline: {late:?}; \
         ms after the cut: {cut_to_cancel:?}); cut-off worker: {cut_off_report:?}",
        all.len(),
        stats.done,
        stats.dead,
        JOBS as i64 - stats.done,
        healed_at - cut_at,
        hit.len(),
        cancelled.len(),
    );
    assert!(
        held >= 2,
        "the cut held {held} chunks: too few to be a fault"
    );
    assert!(
        !hit.is_empty(),
        "no job of the proxied worker was running when the link was cut"
    );
    assert_eq!(
        overlaps, 0,
        "two executions of one job overlapped {overlaps} times ({overlap_total:?})"
    );
    assert!(
        done_in_time,
        "not every job was done within 60 s: {stats:?}"
    );
    assert_eq!((stats.done, stats.dead), (JOBS as i64, 0), "{stats:?}");
    for e in &hit {
        assert!(e.cancelled, "a cut-off handler ran to its end: {e:?}");
        let after = e.after_deadline.unwrap();
        assert!(
            after < Duration::from_millis(500),
            "cancelled {after:?} after its deadline"
        );
    }
    let report = cut_off_report.expect("the cut-off worker stopped");
    assert!(report.lease_lost >= hit.len() as u64, "{report:?}");
}

/// R16: the proxied worker's claim commits, its reply is held back; the jobs allow one attempt.
async fn a_claim_whose_reply_is_lost_costs_no_attempt(db: Db) {
    const JOBS: usize = 3;
    let store = Store::new(db, "r16").await;
    let q = store.direct.clone();
    let (proxy, via_proxy) = store.proxied().await;
    let ids = q
        .enqueue_many((0..JOBS).map(|i| Job::new(json!({ "n": i })).max_attempts(1)))
        .await
        .unwrap();
    // The claim is one statement on PostgreSQL, run when its parameters arrive (its Bind
    // message, where the worker's id follows the lease in seconds, each value after its
    // length: the worker's row among the live workers carries the id too, but not after the
    // lease); on MariaDB a transaction, applied when its COMMIT arrives. Every reply is held
    // from the moment that request reached the server.
    let cut_off = worker(&via_proxy, JOBS);
    let after: Vec<u8> = match db {
        Db::Postgres => {
            let id = cut_off.id();
            let mut bind = Vec::new();
            bind.extend_from_slice(&8_i32.to_be_bytes());
            bind.extend_from_slice(&LEASE.as_secs_f64().to_be_bytes());
            bind.extend_from_slice(&i32::try_from(id.len()).unwrap().to_be_bytes());
            bind.extend_from_slice(id.as_bytes());
            bind
        }
        Db::Mariadb => b"\x03COMMIT".to_vec(),
    };
    proxy.hold_replies_after(&after);
    let log = Log::default();
    let run_for = Duration::from_millis(100);
    let stop = CancellationToken::new();
    let lost = start(cut_off, &log, 0, run_for, &stop);
    wait_for(
        Duration::from_secs(10),
        "the claim to commit with its reply held",
        || {
            let (q, proxy) = (q.clone(), &proxy);
            async move { proxy.held() > 0 && q.stats().await.unwrap().running == JOBS as i64 }
        },
    )
    .await;
    let claimed_at = Instant::now();
    let healthy = start(worker(&q, JOBS), &log, 1, run_for, &stop);
    let settled = timeout(Duration::from_secs(30), async {
        loop {
            let s = q.stats().await.unwrap();
            if s.done + s.dead == JOBS as i64 {
                return s;
            }
            sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let settled_after = claimed_at.elapsed();
    let stats = q.stats().await.unwrap();
    let held = proxy.held();
    let dead = q.dead(10).await.unwrap();
    let all = log.all();
    stop.cancel();
    let healthy_report = stop_worker(healthy).await;
    proxy.heal();
    let lost_report = stop_worker(lost).await;

    let mut runs: BTreeMap<JobId, usize> = ids.iter().map(|id| (*id, 0)).collect();
    for e in &all {
        *runs.entry(e.job).or_default() += 1;
    }
    let never_ran_dead = dead.iter().filter(|d| runs.get(&d.id) == Some(&0)).count();
    println!(
        "R16 {db:?}: {JOBS} jobs (max_attempts 1); faults: {held} reply chunks held after the \
         claim committed; settled {:?} after the lost claim: done {}, dead {} ({never_ran_dead} \
         of them never ran); executions per job {runs:?}, by the cut-off worker {}; \
         healthy worker {healthy_report:?}, cut-off worker {lost_report:?}",
        settled_after,
        stats.done,
        stats.dead,
        all.iter().filter(|e| e.worker == 0).count(),
    );
    assert!(held > 0, "no reply was held: the fault was not injected");
    assert!(
        all.iter().all(|e| e.worker == 1),
        "the cut-off worker ran a job although its claim's answer never came"
    );
    assert_eq!(
        never_ran_dead, 0,
        "jobs dead-lettered without ever running: {dead:?}"
    );
    assert!(settled.is_ok(), "jobs not settled within 30 s: {stats:?}");
    assert_eq!((stats.done, stats.dead), (JOBS as i64, 0), "{stats:?}");
    assert!(
        runs.values().all(|n| *n == 1),
        "every job runs exactly once: {runs:?}"
    );
}

/// What a handler saw of its job's lease running out.
#[derive(Debug, Default)]
struct NearDeadline {
    /// How long before the job's local deadline it was asked to stop.
    asked_before: Option<Duration>,
    /// How long after the deadline its future was dropped (`None`: before it).
    dropped_after: Option<Option<Duration>>,
}

/// Records when the handler's future is dropped, relative to its job's deadline.
struct DropAt(Arc<Mutex<NearDeadline>>, JobContext);

impl Drop for DropAt {
    fn drop(&mut self) {
        let now = Instant::now();
        let after = now.checked_duration_since(self.1.deadline());
        self.0.lock().unwrap().dropped_after = Some(after);
    }
}

/// `kill_after` near a lease that is no longer renewed: a worker cut off from its database
/// asks its handler to stop `min(kill_after, lease / 3)` before the job's local deadline (here
/// lease / 3 = 1 s), and
/// drops it *at* the deadline all the same, never `kill_after` later.
async fn near_an_unrenewed_deadline_a_handler_is_asked_to_stop_and_dropped_at_it(db: Db) {
    let store = Store::new(db, "near").await;
    let (proxy, via_proxy) = store.proxied().await;
    store.direct.enqueue(Job::new(json!({}))).await.unwrap();
    let seen = Arc::new(Mutex::new(NearDeadline::default()));
    let started = Arc::new(tokio::sync::Notify::new());
    let (seen2, started2) = (seen.clone(), started.clone());
    let stop = CancellationToken::new();
    let task = tokio::spawn(
        Worker::new(via_proxy)
            // Long enough that the claim through the proxy (new connections) and the start
            // are well over before the warning.
            .lease(Duration::from_secs(3))
            .kill_after(Duration::from_secs(5))
            .poll_interval(Duration::from_millis(50))
            .run(
                move |ctx: JobContext| {
                    let (seen, started) = (seen2.clone(), started2.clone());
                    async move {
                        let _drop_at = DropAt(seen.clone(), ctx.clone());
                        started.notify_one();
                        ctx.stop_requested().await;
                        assert!(ctx.is_stop_requested());
                        let before = ctx.deadline().checked_duration_since(Instant::now());
                        seen.lock().unwrap().asked_before = before;
                        // Ignores the request: only the drop stops it.
                        std::future::pending::<()>().await;
                        Ok::<_, String>(())
                    }
                },
                stop.clone(),
            ),
    );
    timeout(Duration::from_secs(10), started.notified())
        .await
        .expect("the job started");
    proxy.cut(); // no heartbeat gets through from now on
    wait_for(Duration::from_secs(5), "the handler to be dropped", || {
        let seen = seen.clone();
        async move { seen.lock().unwrap().dropped_after.is_some() }
    })
    .await;
    proxy.heal();
    stop.cancel();
    let report = stop_worker(task).await.expect("the worker stopped");
    assert!(proxy.held() > 0, "the cut hit heartbeats");
    let seen = seen.lock().unwrap();
    println!("{db:?}: {seen:?}");
    let asked = seen
        .asked_before
        .expect("asked to stop before the deadline");
    // lease / 3 = 1 s before the deadline (not kill_after = 5 s).
    assert!(
        asked > Duration::from_millis(900) && asked <= Duration::from_millis(1000),
        "{seen:?}"
    );
    let dropped = seen
        .dropped_after
        .flatten()
        .expect("dropped at the deadline, not before");
    assert!(dropped < Duration::from_millis(150), "{seen:?}");
    assert_eq!(report.lease_lost, 1, "{report:?}");
}

mod postgres {
    use super::Db;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn near_an_unrenewed_deadline_a_handler_is_asked_to_stop_and_dropped_at_it() {
        super::near_an_unrenewed_deadline_a_handler_is_asked_to_stop_and_dropped_at_it(
            Db::Postgres,
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cut_off_worker_cancels_its_handlers_before_anyone_else_runs_the_job() {
        super::a_cut_off_worker_cancels_its_handlers_before_anyone_else_runs_the_job(Db::Postgres)
            .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_claim_whose_reply_is_lost_costs_no_attempt() {
        super::a_claim_whose_reply_is_lost_costs_no_attempt(Db::Postgres).await;
    }
}

mod mariadb {
    use super::Db;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn near_an_unrenewed_deadline_a_handler_is_asked_to_stop_and_dropped_at_it() {
        super::near_an_unrenewed_deadline_a_handler_is_asked_to_stop_and_dropped_at_it(Db::Mariadb)
            .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cut_off_worker_cancels_its_handlers_before_anyone_else_runs_the_job() {
        super::a_cut_off_worker_cancels_its_handlers_before_anyone_else_runs_the_job(Db::Mariadb)
            .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_claim_whose_reply_is_lost_costs_no_attempt() {
        super::a_claim_whose_reply_is_lost_costs_no_attempt(Db::Mariadb).await;
    }
}
