//! `lockwise locks` (who holds what) and `lockwise unlock --force` (break a lock).

use std::fmt::Write as _;
use std::time::Duration;

use lockwise::backend::HeldLock;
use lockwise::lease::validate_key;

use crate::exit::print_line;
use crate::run::locker;

/// List the locks held now: key, fencing token, holder, time held, TTL left, waiters
#[derive(Debug, clap::Args)]
#[command(after_help = "Exit codes:
  0   listed (possibly none)
  64  usage error: arguments, URL
  69  the backend failed")]
pub(crate) struct LocksArgs {
    /// Backend, as for `lockwise run` [default: the per-user lock directory of `run`]
    #[arg(long, env = "LOCKWISE_URL", hide_env_values = true, value_name = "URL")]
    url: Option<String>,
    /// Only the locks whose key starts with this
    #[arg(long, default_value = "", value_name = "PREFIX")]
    prefix: String,
    /// One JSON object per line: {"key", "token", "holder": {"host", "pid", "name",
    /// "session"}, "held_ms", "ttl_left_ms", "waiters"} (null where the backend cannot tell)
    #[arg(long)]
    json: bool,
}

/// Break a lock whoever holds it (an operator's action): the next grant's fencing token is
/// above the broken one, and the broken holder is told it lost the lock
#[derive(Debug, clap::Args)]
#[command(after_help = "Exit codes:
  0   broken, or not held (then nothing changed)
  64  usage error: arguments, key, URL, no --force
  69  the backend failed")]
pub(crate) struct UnlockArgs {
    /// Backend, as for `lockwise run` [default: the per-user lock directory of `run`]
    #[arg(long, env = "LOCKWISE_URL", hide_env_values = true, value_name = "URL")]
    url: Option<String>,
    /// The lock's key
    #[arg(long, value_name = "KEY")]
    key: String,
    /// Required: breaking a lock ends someone else's hold on it
    #[arg(long, required = true)]
    force: bool,
    /// One JSON object: {"broken": the lock as `locks --json` shows it, or null}
    #[arg(long)]
    json: bool,
}

impl LocksArgs {
    pub(crate) fn urls_mut(&mut self) -> Vec<&mut String> {
        self.url.iter_mut().collect()
    }
}

impl UnlockArgs {
    pub(crate) fn urls_mut(&mut self) -> Vec<&mut String> {
        self.url.iter_mut().collect()
    }
}

pub(crate) async fn locks(args: LocksArgs) -> u8 {
    let listed = async {
        let (locker, _) = locker(args.url.as_deref()).await?;
        let held = locker.held(&args.prefix).await?;
        let text = if args.json {
            held.iter()
                .map(|lock| json(lock).to_string() + "\n")
                .collect()
        } else {
            table(&held)
        };
        if text.is_empty() {
            return Ok(()); // --json and no lock: no line
        }
        print_line(text.trim_end(), "the locks were listed")
    };
    match listed.await {
        Ok(()) => 0,
        Err(failure) => failure.report(),
    }
}

pub(crate) async fn unlock(args: UnlockArgs) -> u8 {
    let broken = async {
        validate_key(&args.key)?;
        let (locker, _) = locker(args.url.as_deref()).await?;
        let broken = locker.break_lock(&args.key).await?;
        let text = match (&broken, args.json) {
            (_, true) => serde_json::json!({ "broken": broken.as_ref().map(json) }).to_string(),
            (Some(lock), false) => broken_line(lock),
            (None, false) => format!("{:?} was not held: nothing changed", args.key),
        };
        print_line(text.trim_end(), "the lock was broken")
    };
    match broken.await {
        Ok(()) => 0,
        Err(failure) => failure.report(),
    }
}

fn json(lock: &HeldLock) -> serde_json::Value {
    let ms = |d: Option<Duration>| d.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    serde_json::json!({
        "key": lock.key,
        "token": lock.token.map(|t| t.get()),
        "holder": {
            "host": lock.holder.host,
            "pid": lock.holder.pid,
            "name": lock.holder.name,
            "session": lock.holder.session,
        },
        "held_ms": ms(lock.held_for),
        "ttl_left_ms": ms(lock.ttl_left),
        "waiters": lock.waiters,
    })
}

/// One line per lock under a header, columns aligned; `-` where the backend cannot tell.
fn table(held: &[HeldLock]) -> String {
    if held.is_empty() {
        return "no locks held".to_owned();
    }
    let secs = |d: Option<Duration>| match d {
        Some(d) => format!("{:.1}s", d.as_secs_f64()),
        None => "-".to_owned(),
    };
    let or_dash = |s: Option<String>| s.unwrap_or_else(|| "-".to_owned());
    let rows: Vec<[String; 6]> = held
        .iter()
        .map(|lock| {
            [
                escaped(&lock.key),
                or_dash(lock.token.map(|t| t.get().to_string())),
                holder(lock),
                secs(lock.held_for),
                secs(lock.ttl_left),
                or_dash(lock.waiters.map(|w| w.to_string())),
            ]
        })
        .collect();
    let header = ["KEY", "TOKEN", "HOLDER", "HELD", "TTL LEFT", "WAITERS"].map(String::from);
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `broken: KEY (token T, held by H for D)`, the parts the backend knows.
fn broken_line(lock: &HeldLock) -> String {
    let mut about = Vec::new();
    if let Some(token) = lock.token {
        about.push(format!("token {}", token.get()));
    }
    let mut by = format!("held by {}", holder(lock));
    if let Some(d) = lock.held_for {
        let _ = write!(by, " for {:.1}s", d.as_secs_f64());
    }
    about.push(by);
    format!("broken: {} ({})", escaped(&lock.key), about.join(", "))
}

/// `host pid N name (session S)`, the parts the backend knows.
fn holder(lock: &HeldLock) -> String {
    let h = &lock.holder;
    let mut parts = Vec::new();
    if let Some(host) = &h.host {
        parts.push(escaped(host));
    }
    if let Some(pid) = h.pid {
        parts.push(format!("pid {pid}"));
    }
    if let Some(name) = h.name.as_deref().filter(|n| !n.is_empty()) {
        parts.push(escaped(name));
    }
    if let Some(session) = h.session {
        parts.push(format!("(session {session})"));
    }
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join(" ")
    }
}

/// Control characters escaped, so that a key or a name cannot move the terminal's cursor.
fn escaped(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_listing_says_so_and_keys_cannot_move_the_cursor() {
        assert_eq!(table(&[]), "no locks held");
        assert_eq!(escaped("a\u{1b}[2Jb\n"), "a\\u{1b}[2Jb\\n");
    }
}
