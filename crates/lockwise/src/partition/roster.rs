//! The group's roster: its generation, the members of that generation (the *view*), the key
//! space, and one record per registered member with the generation it last acknowledged.
//! Stored as one small
//! text value that is only ever replaced by compare-and-swap on a version number, in the
//! store of the lock server (one file per server: `memory`, `redis`, `postgres`).
//!
//! Liveness is *not* in the roster: a member is alive while it holds its member lock (the
//! lease core renews it); the roster only says who registered and what each acknowledged.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

use crate::error::{Error, Result};
use crate::lease::OwnerToken;

/// The first line of a stored roster: its format. Version 2 added the `keys` line; a version 1
/// roster (no key space) is still read, and its key space is set by the next member to join.
const FORMAT: &str = "lockwise-roster 2";
const FORMAT_1: &str = "lockwise-roster 1";

/// One registered member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    /// The process id, for people reading `lockwise members`.
    pub(crate) pid: u32,
    /// The highest generation this member has adopted, after stopping the work on every key
    /// it no longer owns there.
    pub(crate) acked: u64,
}

/// What the store holds for one group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Roster {
    /// Strictly increases on every change of the view.
    pub(crate) generation: u64,
    /// The members of this generation, sorted: the keys are assigned among them.
    pub(crate) view: Vec<String>,
    /// The number of keys the group partitions, set by the first member that named one;
    /// `None` in a roster written before it was stored, or once the last member left.
    pub(crate) keys: Option<u64>,
    /// Every registered member, alive or not (yet) found dead.
    pub(crate) members: BTreeMap<String, Record>,
}

impl Roster {
    /// The stored text form: a header line, then `generation G`, `view ID…`, `keys N` (when
    /// known) and one `member ID PID ACKED` line per record. Ids contain no whitespace
    /// (checked on join).
    pub(crate) fn encode(&self) -> String {
        let mut out = format!("{FORMAT}\ngeneration {}\nview", self.generation);
        for id in &self.view {
            let _ = write!(out, " {id}");
        }
        out.push('\n');
        if let Some(keys) = self.keys {
            let _ = writeln!(out, "keys {keys}");
        }
        for (id, r) in &self.members {
            let _ = writeln!(out, "member {id} {} {}", r.pid, r.acked);
        }
        out
    }

    pub(crate) fn decode(text: &str) -> Result<Self> {
        let bad = |what: &str| Error::Backend {
            backend: "partition",
            message: format!("the stored roster is unreadable: {what}"),
            source: None,
        };
        let mut lines = text.lines();
        if !matches!(lines.next(), Some(FORMAT | FORMAT_1)) {
            return Err(bad("unknown format"));
        }
        let mut roster = Roster::default();
        for line in lines {
            let mut words = line.split_whitespace();
            match words.next() {
                Some("generation") => {
                    roster.generation = words
                        .next()
                        .and_then(|g| g.parse().ok())
                        .ok_or_else(|| bad("generation"))?;
                }
                Some("view") => roster.view = words.map(str::to_owned).collect(),
                Some("keys") => {
                    roster.keys = Some(
                        words
                            .next()
                            .and_then(|n| n.parse().ok())
                            .filter(|&n| n > 0)
                            .ok_or_else(|| bad("key space"))?,
                    );
                }
                Some("member") => {
                    let (Some(id), Some(pid), Some(acked)) =
                        (words.next(), words.next(), words.next())
                    else {
                        return Err(bad("member line"));
                    };
                    let pid = pid.parse().map_err(|_| bad("pid"))?;
                    let acked = acked.parse().map_err(|_| bad("acknowledged generation"))?;
                    roster.members.insert(id.to_owned(), Record { pid, acked });
                }
                None => {}
                Some(_) => return Err(bad("unknown line")),
            }
        }
        Ok(roster)
    }
}

/// Where a group's roster lives: one value per group, replaced only by compare-and-swap.
/// Internal: one implementation per server, next to this file.
#[async_trait]
pub(crate) trait RosterStore: Send + Sync + std::fmt::Debug + 'static {
    /// The stored roster text and its version; `(0, None)` when the group has none.
    async fn load(&self, group: &str) -> Result<(u64, Option<String>)>;

    /// Stores `roster` as version `expected + 1` if the stored version is still `expected`
    /// (0: nothing stored); `false` and nothing changed otherwise.
    async fn swap(&self, group: &str, expected: u64, roster: &str) -> Result<bool>;

    /// Removes the group's roster (whoever is still registered).
    async fn remove(&self, group: &str) -> Result<()>;

    /// Drops what the member lock `key` leaves on the server for good (on Redis its fencing
    /// counter), unless a holder other than `owner` has it. Called only once the member's
    /// record is gone from the roster; a no-op where nothing is left behind.
    async fn forget_member_lock(&self, key: &str, owner: Option<OwnerToken>) -> Result<()> {
        let _ = (key, owner);
        Ok(())
    }
}

/// The roster in this process's memory, for `memory:` groups.
#[derive(Debug, Clone, Default)]
pub(crate) struct MemoryRosters(Arc<Mutex<BTreeMap<String, (u64, String)>>>);

#[async_trait]
impl RosterStore for MemoryRosters {
    async fn load(&self, group: &str) -> Result<(u64, Option<String>)> {
        let all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(all
            .get(group)
            .map_or((0, None), |(v, text)| (*v, Some(text.clone()))))
    }

    async fn swap(&self, group: &str, expected: u64, roster: &str) -> Result<bool> {
        let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let current = all.get(group).map_or(0, |(v, _)| *v);
        if current != expected {
            return Ok(false);
        }
        all.insert(group.to_owned(), (expected + 1, roster.to_owned()));
        Ok(true)
    }

    async fn remove(&self, group: &str) -> Result<()> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(group);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips() {
        let mut roster = Roster {
            generation: 7,
            view: vec!["a".into(), "b".into()],
            ..Roster::default()
        };
        roster
            .members
            .insert("a".into(), Record { pid: 10, acked: 7 });
        roster
            .members
            .insert("c".into(), Record { pid: 12, acked: 3 });
        let text = roster.encode();
        assert_eq!(
            text,
            "lockwise-roster 2\ngeneration 7\nview a b\nmember a 10 7\nmember c 12 3\n"
        );
        assert_eq!(Roster::decode(&text).ok(), Some(roster.clone()));
        roster.keys = Some(50);
        let text = roster.encode();
        assert_eq!(
            text,
            "lockwise-roster 2\ngeneration 7\nview a b\nkeys 50\nmember a 10 7\nmember c 12 3\n"
        );
        assert_eq!(Roster::decode(&text).ok(), Some(roster));
        assert!(Roster::decode("something else").is_err());
        assert!(Roster::decode("lockwise-roster 1\ngeneration x\n").is_err());
        assert!(Roster::decode("lockwise-roster 2\nkeys 0\n").is_err());
    }

    /// A roster written before the key space was stored is read, without one.
    #[test]
    fn version_1_rosters_are_read() {
        let roster = Roster::decode("lockwise-roster 1\ngeneration 3\nview a\nmember a 9 3\n");
        let roster = roster.ok().filter(|r| r.generation == 3 && r.view == ["a"]);
        assert_eq!(roster.map(|r| r.keys), Some(None));
    }
}
