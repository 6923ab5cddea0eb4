//! A fencing token stops the paused holder's stale write: the resource checks it.

use std::time::Duration;

use lockwise_bench::history::What;
use lockwise_bench::lab::Database;

use super::{Backends, Scenario};
use crate::lab::actor::sleep_until;
use crate::lab::backend::LabBackend;
use crate::lab::engine::{Extra, Lab};
use crate::lab::error::{LabError, LabResult};
use crate::lab::fenced_file::FencedFile;
use crate::lab::judge::expect;
use crate::lab::proto::Op;
use crate::lab::report::{Report, Variant};
use crate::lab::steps::{acquire, after_expiry, nanos};

pub(super) static SCENARIO: Scenario = Scenario {
    name: "fencing",
    title: "the resource rejects the paused holder's older token",
    exercise: None,
    about: "A fencing token stops the paused holder's stale write",
    backends: Backends::All,
    on_demand: false,
    run: |lab, report| Box::pin(run(lab, report)),
};

async fn run(lab: &Lab, report: &mut Report) -> LabResult<()> {
    let key = lab.key(SCENARIO.name, 1);
    let (extra, file) = with_fence(lab, &key).await?;
    let result = fenced_writes(lab, &key, &extra).await;
    // (Redis keys and the PostgreSQL schema go in the lab's clean-up.)
    if let Some(file) = file {
        file.remove();
    }
    report.variants.push(result?);
    Ok(())
}

/// What actors on `key` need to write through a fenced resource of the backend's kind (Redis
/// `fenced_set`, the PostgreSQL fence, a fenced file for the others), and the file to remove
/// afterwards, if any.
pub(super) async fn with_fence(lab: &Lab, key: &str) -> LabResult<(Extra, Option<FencedFile>)> {
    let mut extra = lab.lock_extra();
    let fenced_path = |dir: &std::path::Path| dir.join(format!("{}.fenced", key.replace(':', "-")));
    let mut file = None;
    let fence = match &lab.backend {
        LabBackend::Redis(_) => "redis".to_owned(),
        LabBackend::Postgres(url) => {
            let schema = lab
                .pg_schema()
                .ok_or_else(|| LabError("no schema".into()))?;
            prepare_pg_fence(url, &schema).await?;
            "postgres".to_owned()
        }
        LabBackend::File(dir) => {
            let path = fenced_path(dir);
            file = Some(FencedFile::new(&path));
            format!("file:{}", path.display())
        }
        LabBackend::Mysql | LabBackend::Etcd(_) => {
            let path = fenced_path(&std::env::temp_dir());
            file = Some(FencedFile::new(&path));
            format!("file:{}", path.display())
        }
    };
    extra.fence = Some(fence);
    Ok((extra, file))
}

async fn fenced_writes(lab: &Lab, key: &str, extra: &Extra) -> LabResult<Variant> {
    let mut a = lab.spawn("A", key, extra).await?;
    let mut b = lab.spawn("B", key, extra).await?;
    a.call(acquire(lab.ttl, false, Duration::ZERO)).await?;
    let t0 = lab.granted_at("A")?;
    lab.freeze(&a, lab.pause, false);
    sleep_until(after_expiry(lab, t0)).await;
    b.call(acquire(lab.ttl, true, lab.pause)).await?;
    b.call(Op::Enter).await?;
    b.call(Op::Write {
        value: "written by B".into(),
    })
    .await?;
    sleep_until(t0 + nanos(lab.pause)).await;
    lab.thaw(&a);
    a.call(Op::Enter).await?;
    a.call(Op::Write {
        value: "written by A".into(),
    })
    .await?;
    a.call(Op::Read).await?;
    a.end_work().await?;
    b.end_work().await?;
    Ok(lab
        .conclude(
            vec![a, b],
            "a fencing token checked by the resource",
            "both believe they hold the lock, but the resource refuses A's older token; the data is B's",
            |events, v| {
                let b_token = events.iter().find_map(|e| match &e.what {
                    What::Acquired { token, .. } if e.process == "B" => *token,
                    _ => None,
                });
                let data_is_b = events.iter().any(|e| match &e.what {
                    What::Read {
                        found: Some((value, token)),
                        ..
                    } => value == "written by B" && Some(*token) == b_token,
                    _ => false,
                });
                let outcome = expect(
                    "B wrote with the newer token; A woke up and wrote with its older token and \
                     the resource refused it; the stored data is B's",
                    &[
                        (v.stale_writes_rejected == 1, "one stale write rejected"),
                        (v.stale_writes_accepted == 0, "no stale write accepted"),
                        (data_is_b, "A read back B's data"),
                    ],
                );
                (
                    outcome,
                    vec!["Mutual exclusion failed (both were inside) and it did not matter: the resource checked the token.".into()],
                )
            },
        )
        .await)
}

/// The fence's tables and the lab's own data table (the user's side of the lesson: the
/// resource the token protects).
async fn prepare_pg_fence(url: &str, schema: &str) -> LabResult<()> {
    let db = Database::connect(url, schema, 1, Duration::from_secs(30)).await?;
    db.prepare_fence().await?;
    Ok(())
}
