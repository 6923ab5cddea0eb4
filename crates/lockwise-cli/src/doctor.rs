//! `lockwise doctor`: the lesson's review checklist as checks against a live server.

use std::time::Duration;

use lockwise::doctor::{Finding, Options, Status, examine};
use lockwise::url::redact_url;

use crate::duration;
use crate::exit::{self, Failure, print_line};

/// Check that a Redis, PostgreSQL or MariaDB/MySQL server is configured so that lockwise's
/// guarantees hold: one line per check (ok, warn or fail), its reason, and the fix.
#[derive(Debug, clap::Args)]
#[command(after_help = "Exit codes:
  0   no check failed (warnings may remain)
  1   a check failed
  64  usage error: arguments, URL
  69  the server cannot be reached")]
pub(crate) struct DoctorArgs {
    /// The server: redis://…, postgres://… or mysql://…
    #[arg(long, env = "LOCKWISE_URL", hide_env_values = true, value_name = "URL")]
    url: String,
    /// Where lockwise's data lives: the Redis key prefix, the PostgreSQL schema, the MariaDB
    /// table prefix
    #[arg(long, default_value = "lockwise", value_name = "NAME")]
    namespace: String,
    /// The lock TTL the round trip and the server's timeouts are weighed against
    #[arg(long, default_value = "30s", value_parser = duration::parse, value_name = "DURATION")]
    ttl: Duration,
    /// How long a transaction may stay open (or idle in one) before it is reported
    #[arg(long, default_value = "60s", value_parser = duration::parse, value_name = "DURATION")]
    stale_after: Duration,
    /// One JSON object: {"url", "findings": [{"check", "status", "reason", "fix"}]}
    #[arg(long)]
    json: bool,
}

impl DoctorArgs {
    pub(crate) fn urls_mut(&mut self) -> Vec<&mut String> {
        vec![&mut self.url]
    }
}

pub(crate) async fn run(args: DoctorArgs) -> u8 {
    match doctor(args).await {
        Ok(code) => code,
        Err(failure) => failure.report(),
    }
}

async fn doctor(args: DoctorArgs) -> Result<u8, Failure> {
    let options = Options::default()
        .namespace(args.namespace.as_str())
        .ttl(args.ttl)
        .stale_after(args.stale_after);
    let findings = examine(&args.url, &options).await?;
    let shown = redact_url(&args.url);
    let text = if args.json {
        json(&shown, &findings)
    } else {
        lines(&shown, &findings)
    };
    print_line(text.trim_end(), "the findings")?;
    let failed = findings.iter().any(|f| f.status == Status::Fail);
    Ok(if failed { exit::FAILED_CHECK } else { 0 })
}

fn lines(shown: &str, findings: &[Finding]) -> String {
    let mut out = format!("{shown}\n");
    for f in findings {
        out.push_str(&format!(
            "{:<4}  {}: {}\n",
            f.status.as_str(),
            f.check,
            f.reason
        ));
        if f.status != Status::Ok && !f.fix.is_empty() {
            out.push_str(&format!("      fix: {}\n", f.fix));
        }
    }
    let count = |s: Status| findings.iter().filter(|f| f.status == s).count();
    out.push_str(&format!(
        "{} ok, {} warn, {} fail\n",
        count(Status::Ok),
        count(Status::Warn),
        count(Status::Fail)
    ));
    out
}

fn json(shown: &str, findings: &[Finding]) -> String {
    let findings: Vec<serde_json::Value> = findings
        .iter()
        .map(|f| {
            serde_json::json!({
                "check": f.check,
                "status": f.status.as_str(),
                "reason": f.reason,
                "fix": f.fix,
            })
        })
        .collect();
    serde_json::json!({ "url": shown, "findings": findings }).to_string()
}
