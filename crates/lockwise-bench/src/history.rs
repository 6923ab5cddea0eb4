//! The history checker: takes the events that processes recorded while they used a lock, a
//! fenced resource or a queue, and states what happened — overlapping critical sections,
//! stale writes accepted, jobs lost or done twice. The lab's verdicts come from here, never
//! from a script of what should have happened.
//!
//! ```
//! use lockwise_bench::history::{check, Event, What};
//!
//! let events = vec![
//!     Event::new("A", 10, 0, What::Enter { resource: "r".into() }),
//!     Event::new("B", 11, 5, What::Enter { resource: "r".into() }), // A is still inside
//!     Event::new("A", 10, 8, What::Exit { resource: "r".into() }),
//!     Event::new("B", 11, 9, What::Exit { resource: "r".into() }),
//! ];
//! let verdict = check(&events);
//! assert_eq!(verdict.max_inside_at_once, 2);
//! assert_eq!(verdict.entered, 2);
//! ```

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

/// One thing a process did, at a time on a clock every process of the machine shares
/// (nanoseconds, e.g. `CLOCK_BOOTTIME`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Event {
    /// The process's role in the scenario (`"A"`, `"B"`, …).
    pub process: String,
    /// Its OS process id.
    pub pid: u32,
    /// When, in nanoseconds on the shared clock.
    pub at: u64,
    /// What happened.
    pub what: What,
}

impl Event {
    /// An event.
    pub fn new(process: impl Into<String>, pid: u32, at: u64, what: What) -> Self {
        Event {
            process: process.into(),
            pid,
            at,
            what,
        }
    }
}

/// The kinds of events the checker understands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum What {
    /// The process was granted the lock on `resource`, with this fencing token.
    Acquired {
        /// The lock.
        resource: String,
        /// Its fencing token, if the backend gave one.
        token: Option<u64>,
        /// The grant's owner token (what a release compares), if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
    },
    /// The process asked for the lock on `resource` and was refused: someone holds it.
    Refused {
        /// The lock.
        resource: String,
    },
    /// The process asked the backend whether it still holds `resource`.
    Checked {
        /// The lock.
        resource: String,
        /// The answer.
        held: bool,
    },
    /// The process decided not to start work: its ownership check said no, or it holds no
    /// lock.
    Aborted {
        /// The lock.
        resource: String,
    },
    /// The process's lost-lock signal fired.
    Lost {
        /// The lock.
        resource: String,
    },
    /// The process starts work it believes the lock protects.
    Enter {
        /// The lock.
        resource: String,
    },
    /// The process is done with that work.
    Exit {
        /// The lock.
        resource: String,
    },
    /// The process released the lock; `removed` is the owner token of the lock the release
    /// removed (`None` when it removed nothing). A release that removes a lock the process was
    /// never granted is a wrong deletion.
    Released {
        /// The lock.
        resource: String,
        /// The owner token of the removed lock, if any.
        removed: Option<String>,
    },
    /// A write to a fenced resource with `token`, accepted or refused by the resource.
    Write {
        /// The resource.
        resource: String,
        /// The writer's token.
        token: u64,
        /// Whether the resource accepted it.
        accepted: bool,
    },
    /// A process read a fenced resource: its value and the token that wrote it (`None`:
    /// nothing written yet).
    Read {
        /// The resource.
        resource: String,
        /// The value and the token that wrote it.
        found: Option<(String, u64)>,
    },
    /// A job was enqueued.
    JobEnqueued {
        /// The job.
        job: String,
    },
    /// A worker started `attempt` of a job allowed `max_attempts`.
    JobAttempt {
        /// The job.
        job: String,
        /// The attempt number.
        attempt: u32,
        /// Attempts allowed.
        max_attempts: u32,
    },
    /// The job's effect was applied (once per effect, whoever applied it).
    JobEffect {
        /// The job.
        job: String,
    },
    /// Anything else worth a line in a timeline; the checker ignores it.
    Note {
        /// What to say.
        text: String,
    },
}

/// What the events show.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Verdict {
    /// The most distinct processes inside one resource's critical section at the same instant.
    pub max_inside_at_once: u32,
    /// Distinct processes that entered a critical section.
    pub entered: u32,
    /// Releases that removed another process's lock.
    pub wrong_deletions: u32,
    /// Writes a fenced resource accepted although a higher token had been accepted before.
    pub stale_writes_accepted: u32,
    /// Writes a fenced resource refused.
    pub stale_writes_rejected: u32,
    /// Grants whose token was not higher than an earlier grant's on the same lock.
    pub tokens_not_increasing: u32,
    /// Enqueued jobs whose effect never happened.
    pub jobs_lost: u32,
    /// Jobs whose effect happened more than once.
    pub jobs_done_twice: u32,
    /// Attempts numbered above the job's maximum.
    pub attempts_over_max: u32,
    /// Each pair of processes seen inside one resource's critical section together, first
    /// time only.
    pub overlaps: Vec<Overlap>,
}

/// Two processes inside one critical section at the same time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Overlap {
    /// The lock.
    pub resource: String,
    /// The process that was inside first, and the one that entered while it was.
    pub processes: [String; 2],
    /// When the second one entered.
    pub at: u64,
}

impl Verdict {
    /// Whether `a` and `b` were ever inside one critical section together.
    pub fn together(&self, a: &str, b: &str) -> bool {
        self.overlaps
            .iter()
            .any(|o| o.processes.iter().any(|p| p == a) && o.processes.iter().any(|p| p == b))
    }
}

/// Checks a history; events may come in any order (they are sorted by time).
pub fn check(events: &[Event]) -> Verdict {
    let mut events: Vec<&Event> = events.iter().collect();
    events.sort_by_key(|e| e.at);
    let mut v = Verdict::default();

    // Critical sections: a sweep over enter/exit, per resource.
    let mut inside: HashMap<&str, HashSet<&str>> = HashMap::new();
    let mut entered: HashSet<&str> = HashSet::new();
    // Tokens: grants per lock, accepted writes per resource.
    let mut last_grant: HashMap<&str, u64> = HashMap::new();
    let mut highest_accepted: HashMap<&str, u64> = HashMap::new();
    // Owner tokens each process was granted (any time: a grant is what makes a token yours).
    let mut granted: HashSet<(&str, &str, &str)> = HashSet::new();
    for e in &events {
        if let What::Acquired {
            resource,
            owner: Some(owner),
            ..
        } = &e.what
        {
            granted.insert((&e.process, resource, owner));
        }
    }
    // Queue.
    let mut enqueued: BTreeMap<&str, u32> = BTreeMap::new();
    for e in &events {
        match &e.what {
            What::Enter { resource } => {
                let now = inside.entry(resource).or_default();
                for other in now.iter().filter(|p| **p != e.process) {
                    let seen = v.overlaps.iter().any(|o| {
                        o.resource == *resource
                            && o.processes.contains(&(*other).to_owned())
                            && o.processes.contains(&e.process)
                    });
                    if !seen {
                        v.overlaps.push(Overlap {
                            resource: resource.clone(),
                            processes: [(*other).to_owned(), e.process.clone()],
                            at: e.at,
                        });
                    }
                }
                now.insert(&e.process);
                entered.insert(&e.process);
                v.max_inside_at_once = v.max_inside_at_once.max(now.len() as u32);
            }
            What::Exit { resource } => {
                if let Some(now) = inside.get_mut(resource.as_str()) {
                    now.remove(e.process.as_str());
                }
            }
            What::Acquired {
                resource, token, ..
            } => {
                if let Some(token) = token {
                    if last_grant
                        .get(resource.as_str())
                        .is_some_and(|last| token <= last)
                    {
                        v.tokens_not_increasing += 1;
                    }
                    last_grant.insert(resource, *token);
                }
            }
            What::Released { resource, removed } => {
                if removed.as_deref().is_some_and(|owner| {
                    !granted.contains(&(e.process.as_str(), resource.as_str(), owner))
                }) {
                    v.wrong_deletions += 1;
                }
            }
            What::Write {
                resource,
                token,
                accepted,
            } => {
                let highest = highest_accepted.entry(resource).or_insert(0);
                if *accepted {
                    if token < highest {
                        v.stale_writes_accepted += 1;
                    }
                    *highest = (*highest).max(*token);
                } else {
                    v.stale_writes_rejected += 1;
                }
            }
            What::JobEnqueued { job } => {
                enqueued.entry(job).or_insert(0);
            }
            What::JobAttempt {
                attempt,
                max_attempts,
                ..
            } => {
                if attempt > max_attempts {
                    v.attempts_over_max += 1;
                }
            }
            What::JobEffect { job } => {
                *enqueued.entry(job).or_insert(0) += 1;
            }
            What::Refused { .. }
            | What::Read { .. }
            | What::Checked { .. }
            | What::Aborted { .. }
            | What::Lost { .. }
            | What::Note { .. } => {}
        }
    }
    v.entered = entered.len() as u32;
    v.jobs_lost = enqueued.values().filter(|n| **n == 0).count() as u32;
    v.jobs_done_twice = enqueued.values().filter(|n| **n > 1).count() as u32;
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_and_verdicts_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Event>();
        send_sync::<Verdict>();
    }

    fn ev(p: &str, at: u64, what: What) -> Event {
        Event::new(p, 1, at, what)
    }

    fn enter(r: &str) -> What {
        What::Enter { resource: r.into() }
    }

    fn exit(r: &str) -> What {
        What::Exit { resource: r.into() }
    }

    #[test]
    fn sequential_sections_never_overlap() {
        let v = check(&[
            ev("A", 0, enter("r")),
            ev("A", 5, exit("r")),
            ev("B", 6, enter("r")),
            ev("B", 9, exit("r")),
        ]);
        assert_eq!((v.max_inside_at_once, v.entered), (1, 2));
        assert!(v.overlaps.is_empty());
    }

    #[test]
    fn three_inside_together_is_seen_and_resources_are_separate() {
        let v = check(&[
            ev("C", 3, enter("r")),
            ev("A", 1, enter("r")),
            ev("B", 2, enter("r")),
            ev("D", 2, enter("other")),
            ev("A", 4, exit("r")),
        ]);
        assert_eq!(v.max_inside_at_once, 3);
        assert_eq!(v.entered, 4);
        assert!(v.together("A", "C") && v.together("C", "B"));
        assert!(!v.together("A", "D"), "different resources never overlap");
    }

    #[test]
    fn releases_that_remove_someone_elses_lock_are_counted() {
        let acquired = |p: &str, owner: &str| {
            ev(
                p,
                0,
                What::Acquired {
                    resource: "r".into(),
                    token: None,
                    owner: Some(owner.into()),
                },
            )
        };
        let released = |p: &str, owner: Option<&str>| {
            ev(
                p,
                1,
                What::Released {
                    resource: "r".into(),
                    removed: owner.map(Into::into),
                },
            )
        };
        let v = check(&[
            acquired("A", "a1"),
            acquired("B", "b1"),
            released("A", Some("b1")), // A's DEL removed B's lock
            released("B", Some("b1")),
            released("C", None),
            released("C", Some("zz")), // never granted to C
        ]);
        assert_eq!(v.wrong_deletions, 2);
    }

    #[test]
    fn fencing_writes_and_grants() {
        let write = |at, token, accepted| {
            ev(
                "x",
                at,
                What::Write {
                    resource: "r".into(),
                    token,
                    accepted,
                },
            )
        };
        let grant = |at, token| {
            ev(
                "x",
                at,
                What::Acquired {
                    resource: "l".into(),
                    token: Some(token),
                    owner: None,
                },
            )
        };
        let v = check(&[
            write(1, 42, true),
            write(2, 42, true), // same grant writes again: fine
            write(3, 41, false),
            write(4, 40, true), // a stale write accepted: the violation
            grant(1, 7),
            grant(2, 8),
            grant(3, 8),
        ]);
        assert_eq!((v.stale_writes_accepted, v.stale_writes_rejected), (1, 1));
        assert_eq!(v.tokens_not_increasing, 1);
    }

    #[test]
    fn queue_jobs_lost_twice_and_over_budget() {
        let job = |at, what| ev("w", at, what);
        let v = check(&[
            job(1, What::JobEnqueued { job: "1".into() }),
            job(1, What::JobEnqueued { job: "2".into() }),
            job(1, What::JobEnqueued { job: "3".into() }),
            job(2, What::JobEffect { job: "1".into() }),
            job(3, What::JobEffect { job: "2".into() }),
            job(4, What::JobEffect { job: "2".into() }),
            job(
                5,
                What::JobAttempt {
                    job: "3".into(),
                    attempt: 6,
                    max_attempts: 5,
                },
            ),
        ]);
        assert_eq!(
            (v.jobs_lost, v.jobs_done_twice, v.attempts_over_max),
            (1, 1, 1)
        );
    }

    #[test]
    fn events_round_trip_as_json_lines() {
        let e = ev(
            "A",
            123,
            What::Acquired {
                resource: "r".into(),
                token: Some(41),
                owner: Some("ab".into()),
            },
        );
        let line = serde_json::to_string(&e).unwrap_or_default();
        assert!(line.contains(r#""kind":"acquired""#), "{line}");
        assert_eq!(serde_json::from_str::<Event>(&line).ok(), Some(e));
    }
}
