//! Static assertions, after tokio's `tests/async_send_sync.rs`: the public types can cross
//! threads, and the futures of the main async methods can be spawned on a multi-threaded
//! runtime. A regression fails to compile.

use std::time::Duration;

use futures_util::future::BoxFuture;
use lockwise::backend::file::FileBackend;
use lockwise::backend::memory::MemoryBackend;
use lockwise::backend::mysql::{MysqlBackend, MysqlBuilder};
use lockwise::backend::postgres::{PostgresBackend, PostgresBuilder};
use lockwise::backend::redis::{RedisBackend, RedisBuilder};
use lockwise::backend::{Attempt, ReleaseWatch};
use lockwise::postgres::{Once, Store, XactLock};
use lockwise::queue::{
    Claimed, ConnectOptions, Job, JobContext, JobId, JobInfo, Queue, Stats, Worker, WorkerReport,
};
use lockwise::{
    Election, Error, FencingToken, Guard, LockOptions, Locker, OwnerToken, Permit, ReadGuard,
    Retry, Role, RwLock, Semaphore, Singleton,
};
use sqlx::{Postgres, Transaction};
use tokio_util::sync::CancellationToken;

fn send_sync<T: Send + Sync>() {}

fn send<T: Send>(_: &T) {}

#[test]
fn public_types_are_send_and_sync() {
    send_sync::<Locker>();
    send_sync::<Guard>();
    send_sync::<LockOptions>();
    send_sync::<Retry>();
    send_sync::<Error>();
    send_sync::<FencingToken>();
    send_sync::<OwnerToken>();
    send_sync::<Election>();
    send_sync::<Semaphore>();
    send_sync::<Permit>();
    send_sync::<RwLock>();
    send_sync::<ReadGuard>();
    send_sync::<Role>();
    send_sync::<Singleton>();
    send_sync::<Store>();
    send_sync::<XactLock>();
    send_sync::<Once<()>>();
    send_sync::<Attempt>();
    send_sync::<ReleaseWatch>();
    send_sync::<MemoryBackend>();
    send_sync::<FileBackend>();
    send_sync::<RedisBackend>();
    send_sync::<RedisBuilder>();
    send_sync::<PostgresBackend>();
    send_sync::<PostgresBuilder>();
    send_sync::<MysqlBackend>();
    send_sync::<MysqlBuilder>();
    send_sync::<Queue>();
    send_sync::<Worker>();
    send_sync::<WorkerReport>();
    send_sync::<JobContext>();
    send_sync::<Job>();
    send_sync::<JobId>();
    send_sync::<Claimed>();
    send_sync::<Stats>();
    send_sync::<JobInfo>();
    send_sync::<ConnectOptions>();
}

/// Type-checked, never called: each line builds a future (without polling it) and requires it
/// to be `Send`.
#[allow(dead_code)]
fn futures_of_the_main_async_methods_are_send(
    locker: &Locker,
    guard: Guard,
    opts: &LockOptions,
    election: &Election,
    singleton: &Singleton,
    store: &Store,
    tx: &mut Transaction<'_, Postgres>,
) {
    send(&locker.acquire("k", opts));
    send(&locker.try_acquire("k", opts));
    send(&guard.is_held());
    send(&guard.extend(Duration::from_secs(1)));
    send(&guard.run(async {}));
    send(&election.run(|_term| async {}));
    send(&store.migrate());
    send(&store.lock_xact(tx, "k", Duration::ZERO));
    send(&store.fence(tx, "r", FencingToken::new(1)));
    send(&store.fenced_token("r"));
    send(
        &store.run_once("scope", "k", |_tx| -> BoxFuture<'_, lockwise::Result<()>> {
            Box::pin(async { Ok(()) })
        }),
    );
    send(&singleton.tick(
        std::time::SystemTime::now(),
        |_tx, _period| -> BoxFuture<'_, lockwise::Result<()>> { Box::pin(async { Ok(()) }) },
    ));
    send(&PostgresBackend::connect("postgres://localhost/db"));
    send(&MysqlBackend::connect("mysql://localhost/db"));
    send(&RedisBackend::connect("redis://localhost/"));
    send(&guard.release());
}

/// The same for the queue.
#[allow(dead_code)]
fn futures_of_the_queue_are_send(
    queue: &Queue,
    worker: Worker,
    tx: &mut Transaction<'_, Postgres>,
) {
    send(&queue.enqueue(Job::new(serde_json::json!({}))));
    send(&queue.enqueue_in(&mut **tx, Job::new(serde_json::json!({}))));
    send(&queue.protocol().claim("w", 8, Duration::from_secs(30), &[]));
    send(&queue.protocol().complete(&[]));
    send(&queue.protocol().reap());
    send(&lockwise::queue::connect(
        "postgres://localhost/db",
        ConnectOptions::default(),
    ));
    send(&worker.run(
        |_job| async { Ok::<(), std::io::Error>(()) },
        CancellationToken::new(),
    ));
}

#[test]
fn partition_types_are_send_and_sync() {
    use lockwise::partition::{
        Assignment, Group, GroupStatus, KeyHold, Member, MemberOptions, MemberStatus,
    };
    send_sync::<Group>();
    send_sync::<Member>();
    send_sync::<MemberOptions>();
    send_sync::<Assignment>();
    send_sync::<KeyHold>();
    send_sync::<GroupStatus>();
    send_sync::<MemberStatus>();
}

#[allow(dead_code)]
fn futures_of_partition_are_send(
    group: &lockwise::partition::Group,
    member: &lockwise::partition::Member,
    opts: &lockwise::partition::MemberOptions,
    hold: &lockwise::partition::KeyHold,
) {
    send(&lockwise::partition::Group::connect("memory:", "g"));
    send(&group.join(opts));
    send(&group.status(Some(10)));
    send(&member.run(["k"], |_key, _generation| async {}));
    send(&hold.lost());
}

#[allow(dead_code)]
fn futures_of_the_semaphore_are_send(semaphore: &Semaphore, permit: Permit, opts: &LockOptions) {
    send(&semaphore.acquire(opts));
    send(&semaphore.try_acquire(opts));
    send(&permit.release());
}

#[allow(dead_code)]
fn futures_of_the_rwlock_are_send(rw: &RwLock, read: ReadGuard, opts: &LockOptions) {
    send(&rw.read(opts));
    send(&rw.try_read(opts));
    send(&rw.write(opts));
    send(&rw.try_write(opts));
    send(&read.release());
}
