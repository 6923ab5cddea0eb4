//! The checks of a Redis deployment.

use std::time::{Duration, SystemTime};

use redis::aio::ConnectionLike;

use super::timing::{PROBES, Probe, timing};
use super::{Finding, Options};
use crate::backend::redis::RedisBackend;
use crate::error::{Error, Result};

/// How many keys the look for lock keys without a TTL reads at most.
const SCAN_LIMIT: usize = 100_000;

pub(super) async fn examine(url: &str, options: &Options) -> Result<Vec<Finding>> {
    let backend = RedisBackend::builder(url)
        .prefix(options.namespace.as_str())
        .connect()
        .await?;
    let mut conn = backend.conn();
    let fail = |what: &str, e: redis::RedisError| backend.fail(what, e);
    let mut probes = Vec::new();
    for _ in 0..PROBES {
        probes.push(Probe::take(server_time(&mut conn, &fail)).await?);
    }
    let info: String = redis::cmd("INFO")
        .arg("server")
        .arg("replication")
        .query_async(&mut conn)
        .await
        .map_err(|e| fail("INFO", e))?;
    let mut findings = vec![version(&info), replication(&info)];
    let policy = config(&mut conn, "maxmemory-policy").await;
    let maxmemory = config(&mut conn, "maxmemory").await;
    findings.push(eviction(policy.as_deref(), maxmemory.as_deref()));
    let appendonly = config(&mut conn, "appendonly").await;
    let save = config(&mut conn, "save").await;
    findings.push(persistence(appendonly.as_deref(), save.as_deref()));
    findings.push(
        keys_without_ttl(&mut conn, &options.namespace)
            .await
            .unwrap_or_else(|e| {
                Finding::warn(
                    "lock keys without TTL",
                    format!("cannot scan the keys: {e}"),
                    "",
                )
            }),
    );
    findings.extend(timing(&probes, options.ttl));
    Ok(findings)
}

/// The server's clock (`TIME`).
async fn server_time(
    conn: &mut impl ConnectionLike,
    fail: &impl Fn(&str, redis::RedisError) -> Error,
) -> Result<SystemTime> {
    let (secs, micros): (u64, u64) = redis::cmd("TIME")
        .query_async(conn)
        .await
        .map_err(|e| fail("TIME", e))?;
    Ok(SystemTime::UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros))
}

/// A `CONFIG GET` value; `None` where `CONFIG` is refused (managed services rename it).
async fn config(conn: &mut impl ConnectionLike, name: &str) -> Option<String> {
    let pair: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query_async(conn)
        .await
        .ok()?;
    pair.into_iter().nth(1)
}

/// A field of `INFO`'s answer.
fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

fn version(info: &str) -> Finding {
    let Some(version) = field(info, "redis_version") else {
        return Finding::warn("version", "INFO names no redis_version", "");
    };
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < 7 {
        Finding::warn(
            "version",
            format!(
                "Redis {version}: lockwise is tested on 7, and its cluster waiters need 7 (SPUBLISH)"
            ),
            "upgrade to Redis 7 or later",
        )
    } else {
        Finding::ok("version", format!("Redis {version}"))
    }
}

fn replication(info: &str) -> Finding {
    let role = field(info, "role").unwrap_or("unknown");
    let replicas: u32 = field(info, "connected_slaves")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    match role {
        "master" if replicas == 0 => Finding::ok("replication", "a primary without replicas"),
        "master" => Finding::warn(
            "replication",
            format!(
                "a primary with {replicas} replica(s), replicated asynchronously: a failover \
                 can lose a grant, and the new primary grant the lock again"
            ),
            "write through fenced resources (the token stops the stale holder), or make each \
             grant wait for replicas (RedisBackend::builder(url).replicas(n), WAIT)",
        ),
        other => Finding::fail(
            "replication",
            format!("connected to a {other}, not a primary: writes are refused or lost"),
            "connect to the primary, or through Sentinel (redis+sentinel://…)",
        ),
    }
}

fn eviction(policy: Option<&str>, maxmemory: Option<&str>) -> Finding {
    let (Some(policy), Some(maxmemory)) = (policy, maxmemory) else {
        return Finding::warn(
            "maxmemory-policy",
            "CONFIG GET is refused here, so the eviction policy is unknown",
            "make sure the policy is noeviction: any other evicts lock keys (they have a TTL) \
             under memory pressure, and another client is granted a held lock",
        );
    };
    if policy == "noeviction" {
        return Finding::ok(
            "maxmemory-policy",
            "noeviction: a full Redis refuses writes instead",
        );
    }
    if maxmemory == "0" {
        return Finding::ok(
            "maxmemory-policy",
            format!("{policy}, but no maxmemory: nothing is evicted"),
        )
        .fixed_by("set maxmemory-policy noeviction before setting maxmemory");
    }
    let which = if policy.starts_with("volatile") {
        "keys with a TTL, and every lock key has one"
    } else {
        "any key, lock keys and fencing counters among them"
    };
    Finding::fail(
        "maxmemory-policy",
        format!(
            "{policy} with maxmemory {maxmemory}: under memory pressure Redis evicts {which}, \
             and another client is granted a lock still held"
        ),
        "CONFIG SET maxmemory-policy noeviction (and in redis.conf), or a Redis of its own \
         for locks",
    )
}

fn persistence(appendonly: Option<&str>, save: Option<&str>) -> Finding {
    match (appendonly, save) {
        (Some("yes"), _) => Finding::ok("persistence", "appendonly yes"),
        (Some(_), Some(save)) if !save.trim().is_empty() => Finding::warn(
            "persistence",
            format!(
                "RDB snapshots only (save {save}): a restart brings back an older snapshot, \
                 forgetting locks granted since"
            ),
            "appendonly yes with appendfsync everysec; fencing tokens stay above every earlier \
             one after a restart anyway (clock floor)",
        ),
        (Some(_), Some(_)) => Finding::warn(
            "persistence",
            "no persistence: a restart forgets every lock, and its holders work on while \
             another is granted",
            "appendonly yes with appendfsync everysec, or accept it and fence the resources \
             (tokens stay above every earlier one after a restart: clock floor)",
        ),
        _ => Finding::warn(
            "persistence",
            "CONFIG GET is refused here, so persistence is unknown",
            "check that the service keeps an append-only file",
        ),
    }
}

/// Lock keys (`<prefix>:{<key>}`) that have no TTL: a lock nobody can lose or release but by
/// hand, left by a client that is not lockwise or by a hand-made `SET`.
async fn keys_without_ttl(
    conn: &mut impl ConnectionLike,
    prefix: &str,
) -> redis::RedisResult<Finding> {
    let pattern = format!("{prefix}:{{*}}");
    let (mut cursor, mut seen, mut forever) = (0u64, 0usize, Vec::new());
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await?;
        let locks: Vec<&String> = keys.iter().filter(|k| k.ends_with('}')).collect();
        if !locks.is_empty() {
            let mut pipe = redis::pipe();
            for key in &locks {
                pipe.cmd("PTTL").arg(key.as_str());
            }
            let ttls: Vec<i64> = pipe.query_async(conn).await?;
            forever.extend(
                locks
                    .iter()
                    .zip(ttls)
                    .filter(|(_, ttl)| *ttl == -1)
                    .map(|(k, _)| (*k).clone()),
            );
        }
        seen += keys.len();
        cursor = next;
        if cursor == 0 || seen >= SCAN_LIMIT {
            break;
        }
    }
    if forever.is_empty() {
        return Ok(Finding::ok(
            "lock keys without TTL",
            format!("none among {seen} keys under {prefix}:"),
        ));
    }
    let shown: Vec<&str> = forever.iter().take(5).map(String::as_str).collect();
    Ok(Finding::fail(
        "lock keys without TTL",
        format!(
            "{} lock key(s) never expire: {}{}",
            forever.len(),
            shown.join(", "),
            if forever.len() > shown.len() {
                ", …"
            } else {
                ""
            }
        ),
        "find who writes them (only lockwise's grant script belongs there); once their holder \
         is known to be gone, delete them",
    ))
}
