//! `lockwise members`: who is in a partition group, its generation, and each member's keys
//! and lease.

use std::io::Write as _;

use lockwise::partition::Group;

use crate::exit::Failure;

/// Show a partition group: its generation and its members, with their key counts and leases.
#[derive(Debug, clap::Args)]
pub(crate) struct MembersArgs {
    /// The group's server: file:///dir (processes on one machine), redis://…, postgres://…,
    /// mysql://… or (built with the feature etcd) etcd://…
    #[arg(long, env = "LOCKWISE_URL", hide_env_values = true, value_name = "URL")]
    url: String,
    /// The group's name
    #[arg(long, value_name = "G")]
    group: String,
    /// The key space the members partition (keys 0 to N-1) [default: the group's, stored by
    /// its first member]; refused when it differs from the group's
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    keys: Option<u64>,
    /// Print JSON: {"group", "generation", "keys", "members": [{"id", "pid", "keys", "lease_left_ms", "alive", "acknowledged"}]}
    #[arg(long)]
    json: bool,
}

impl MembersArgs {
    /// The URL, for `--password-file`.
    pub(crate) fn urls_mut(&mut self) -> Vec<&mut String> {
        vec![&mut self.url]
    }
}

pub(crate) async fn run(args: MembersArgs) -> u8 {
    match members(args).await {
        Ok(()) => 0,
        Err(failure) => failure.report(),
    }
}

async fn members(args: MembersArgs) -> Result<(), Failure> {
    let group = Group::connect(&args.url, &args.group).await?;
    let status = group.status(args.keys).await.map_err(|e| match e {
        lockwise::Error::KeySpaceMismatch {
            group,
            stored,
            requested,
        } => Failure::usage(format!(
            "group {group:?} partitions {stored} keys, not --keys {requested} (leave --keys out \
             to use the group's)"
        )),
        e => Failure::from(e),
    })?;
    let mut out = Vec::new();
    if args.json {
        let members: Vec<serde_json::Value> = status
            .members
            .iter()
            .map(|m| {
                serde_json::json!({
                    "id": m.id,
                    "pid": m.pid,
                    "keys": m.keys,
                    "lease_left_ms": m.lease_left.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
                    "alive": m.alive,
                    "acknowledged": m.acknowledged,
                })
            })
            .collect();
        let doc = serde_json::json!({
            "group": status.group,
            "generation": status.generation,
            "keys": status.keys,
            "members": members,
        });
        let _ = writeln!(out, "{doc}");
    } else {
        let _ = writeln!(
            out,
            "group {}  generation {}  keys {}  members {}",
            status.group,
            status.generation,
            status
                .keys
                .map_or_else(|| "unknown".to_owned(), |k| k.to_string()),
            status.members.len()
        );
        let _ = writeln!(
            out,
            "{:<24} {:>8} {:>6} {:>10} {:>6}",
            "id", "pid", "keys", "lease", "acked"
        );
        for m in &status.members {
            let keys = m.keys.map_or_else(|| "-".to_owned(), |k| k.to_string());
            let lease = match (m.alive, m.lease_left) {
                (false, _) => "dead".to_owned(),
                (true, Some(left)) => format!("{}ms", left.as_millis()),
                (true, None) => "held".to_owned(),
            };
            let acked = if m.acknowledged == status.generation {
                "yes"
            } else {
                "no"
            };
            let _ = writeln!(
                out,
                "{:<24} {:>8} {:>6} {:>10} {:>6}",
                m.id, m.pid, keys, lease, acked
            );
        }
    }
    let mut stdout = std::io::stdout().lock();
    (stdout.write_all(&out).and_then(|()| stdout.flush())).map_err(|e| Failure {
        code: crate::exit::OUTPUT,
        message: format!("cannot write to stdout: {e}"),
    })
}
