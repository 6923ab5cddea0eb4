//! Steps several scenarios share: time in the actors' units, the acquire op, and the lesson's
//! central move (a holder frozen past its TTL while another takes the lock).

use std::time::Duration;

use super::actor::sleep_until;
use super::client::Proc;
use super::engine::Lab;
use super::error::LabResult;
use super::proto::Op;

/// How long a resumed holder works before it ends.
pub(super) const WORK: Duration = Duration::from_millis(50);

pub(super) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

pub(super) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(super) fn acquire(ttl: Duration, renew: bool, wait: Duration) -> Op {
    Op::Acquire {
        ttl_ms: ms(ttl),
        renew,
        wait_ms: ms(wait),
    }
}

/// When a lease granted at `t0` has surely expired on the backend.
pub(super) fn after_expiry(lab: &Lab, t0: u64) -> u64 {
    t0 + nanos(lab.ttl) + nanos((lab.ttl / 10).max(Duration::from_millis(30)))
}

/// A works for [`WORK`]; then A and B end their work and release with their owner tokens.
pub(super) async fn finish_work(a: &mut Proc, b: &mut Proc) -> LabResult<()> {
    tokio::time::sleep(WORK).await;
    a.end_work().await?;
    b.end_work().await
}

/// A holds the lock and is frozen past its TTL; B takes the lock and starts work; A resumes.
/// Returns A, B and the time of A's grant. `a_first` runs on A before the freeze.
pub(super) async fn pause_past_ttl(
    lab: &Lab,
    key: &str,
    a_renews: bool,
    a_first: &[Op],
) -> LabResult<(Proc, Proc, u64)> {
    let extra = lab.lock_extra();
    let mut a = lab.spawn("A", key, &extra).await?;
    let mut b = lab.spawn("B", key, &extra).await?;
    a.call(acquire(lab.ttl, a_renews, Duration::ZERO)).await?;
    let t0 = lab.granted_at("A")?;
    for op in a_first {
        a.call(op.clone()).await?;
    }
    lab.freeze(&a, lab.pause, a_renews);
    sleep_until(after_expiry(lab, t0)).await;
    // B is healthy: it renews, so it keeps the lock for as long as it works.
    b.call(acquire(lab.ttl, true, lab.pause)).await?;
    b.call(Op::Enter).await?;
    sleep_until(t0 + nanos(lab.pause)).await;
    lab.thaw(&a);
    Ok((a, b, t0))
}
