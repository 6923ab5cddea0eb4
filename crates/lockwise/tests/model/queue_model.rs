//! The queue model: workers, leases, the reaper, and the rows.

use super::*;

/// The job lease in ticks.
pub(super) const LEASE: u8 = 3;

/// How far the queue model is explored.
#[derive(Debug, Clone, Copy)]
pub(super) struct QueueBounds {
    pub(super) claims: u8,
    pub(super) heartbeats: u8,
    pub(super) horizon: u8,
}

pub(super) const QUEUE_BOUNDS: QueueBounds = QueueBounds {
    claims: 2,
    heartbeats: 1,
    horizon: 5,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Worker {
    Idle,
    Claiming {
        sent: u8,
    },
    /// Runs the handler of `attempt` until `deadline` (local).
    Running {
        attempt: u8,
        deadline: u8,
        heartbeats: u8,
        beating: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Row {
    Available,
    Running,
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum QueueMsg {
    Claim {
        w: u8,
        sent: u8,
    },
    Claimed {
        w: u8,
        attempt: u8,
        sent: u8,
    },
    Empty {
        w: u8,
    },
    Heartbeat {
        w: u8,
        attempt: u8,
        sent: u8,
    },
    Beat {
        w: u8,
        attempt: u8,
        sent: u8,
        ok: bool,
    },
    Complete {
        attempt: u8,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct QueueState {
    pub(super) now: u8,
    pub(super) workers: [(u8, Worker); 2], // (claims made, state)
    pub(super) row: Row,
    pub(super) attempt: u8,
    pub(super) lease_until: u8,
    /// Ghost: a completion of attempt `.0` was accepted while the row ran attempt `.1`.
    pub(super) late_completion: Option<(u8, u8)>,
    pub(super) net: Vec<QueueMsg>,
}

impl QueueState {
    pub(super) fn send(&mut self, m: QueueMsg) {
        let at = self.net.partition_point(|x| *x <= m);
        self.net.insert(at, m);
    }
}

/// A step of the queue model (its fields are read through `Debug`, in traces).
#[allow(dead_code)]
#[derive(Debug)]
pub(super) enum QueueAction {
    Tick,
    Reap,
    SendClaim(u8),
    SendHeartbeat(u8),
    Finish(u8),
    Deliver(QueueMsg),
}

pub(super) struct QueueModel {
    pub(super) design: Design,
    pub(super) bounds: QueueBounds,
}

impl QueueModel {
    pub(super) fn deliver(&self, s: &mut QueueState, m: QueueMsg) {
        let now = s.now;
        match m {
            QueueMsg::Claim { w, sent } => {
                if s.row == Row::Available {
                    s.row = Row::Running;
                    s.attempt += 1;
                    s.lease_until = now + LEASE;
                    s.send(QueueMsg::Claimed {
                        w,
                        attempt: s.attempt,
                        sent,
                    });
                } else {
                    s.send(QueueMsg::Empty { w });
                }
            }
            QueueMsg::Heartbeat { w, attempt, sent } => {
                let ok = s.row == Row::Running && s.attempt == attempt;
                if ok {
                    s.lease_until = now + LEASE;
                }
                s.send(QueueMsg::Beat {
                    w,
                    attempt,
                    sent,
                    ok,
                });
            }
            QueueMsg::Complete { attempt } => {
                let matches = !self.design.fence || s.attempt == attempt;
                if s.row == Row::Running && matches {
                    if attempt != s.attempt {
                        s.late_completion = s.late_completion.or(Some((attempt, s.attempt)));
                    }
                    s.row = Row::Done;
                }
            }
            QueueMsg::Claimed { w, attempt, sent } => {
                let (_, st) = &mut s.workers[w as usize];
                if *st == (Worker::Claiming { sent }) {
                    let deadline = sent + LEASE - DRIFT;
                    *st = if !self.design.local_deadline || now < deadline {
                        Worker::Running {
                            attempt,
                            deadline,
                            heartbeats: self.bounds.heartbeats,
                            beating: false,
                        }
                    } else {
                        Worker::Idle // cancelled before it started
                    };
                }
            }
            QueueMsg::Empty { w } => {
                let (_, st) = &mut s.workers[w as usize];
                if matches!(*st, Worker::Claiming { .. }) {
                    *st = Worker::Idle;
                }
            }
            QueueMsg::Beat {
                w,
                attempt,
                sent,
                ok,
            } => {
                let (_, st) = &mut s.workers[w as usize];
                if let Worker::Running {
                    attempt: a,
                    deadline,
                    beating,
                    ..
                } = st
                    && *a == attempt
                {
                    *beating = false;
                    if !ok {
                        *st = Worker::Idle; // rescued elsewhere: the handler is stopped
                    } else if now < *deadline {
                        *deadline = (*deadline).max(sent + LEASE - DRIFT);
                    }
                }
            }
        }
    }
}

impl Model for QueueModel {
    type State = QueueState;
    type Action = QueueAction;

    fn init(&self) -> QueueState {
        QueueState {
            now: 0,
            workers: [(0, Worker::Idle); 2],
            row: Row::Available,
            attempt: 0,
            lease_until: 0,
            late_completion: None,
            net: Vec::new(),
        }
    }

    fn next(&self, s: &QueueState, out: &mut Vec<(QueueAction, QueueState)>) {
        if self.check(s).is_err() {
            return;
        }
        if s.now < self.bounds.horizon {
            let mut t = s.clone();
            t.now += 1;
            if self.design.local_deadline {
                for (_, w) in &mut t.workers {
                    if matches!(*w, Worker::Running { deadline, .. } if deadline <= t.now) {
                        *w = Worker::Idle; // cancelled at the local deadline
                    }
                }
            }
            out.push((QueueAction::Tick, t));
        }
        if s.row == Row::Running && s.lease_until < s.now {
            let mut t = s.clone();
            t.row = Row::Available;
            out.push((QueueAction::Reap, t));
        }
        for (i, &(claims, st)) in s.workers.iter().enumerate() {
            let w = i as u8;
            match st {
                Worker::Idle if claims < self.bounds.claims => {
                    let mut t = s.clone();
                    t.workers[i] = (claims + 1, Worker::Claiming { sent: s.now });
                    t.send(QueueMsg::Claim { w, sent: s.now });
                    out.push((QueueAction::SendClaim(w), t));
                }
                Worker::Idle => {}
                Worker::Claiming { .. } => {}
                Worker::Running {
                    attempt,
                    deadline,
                    heartbeats,
                    beating,
                } => {
                    if heartbeats > 0 && !beating {
                        let mut t = s.clone();
                        t.workers[i].1 = Worker::Running {
                            attempt,
                            deadline,
                            heartbeats: heartbeats - 1,
                            beating: true,
                        };
                        t.send(QueueMsg::Heartbeat {
                            w,
                            attempt,
                            sent: s.now,
                        });
                        out.push((QueueAction::SendHeartbeat(w), t));
                    }
                    let mut t = s.clone();
                    t.workers[i].1 = Worker::Idle;
                    t.send(QueueMsg::Complete { attempt });
                    out.push((QueueAction::Finish(w), t));
                }
            }
        }
        let mut last = None;
        for (k, &m) in s.net.iter().enumerate() {
            if last == Some(m) {
                continue;
            }
            last = Some(m);
            let mut t = s.clone();
            t.net.remove(k);
            self.deliver(&mut t, m);
            out.push((QueueAction::Deliver(m), t));
        }
    }

    fn check(&self, s: &QueueState) -> Result<(), String> {
        let running: Vec<_> = s
            .workers
            .iter()
            .filter_map(|(_, w)| match w {
                Worker::Running { attempt, .. } => Some(*attempt),
                _ => None,
            })
            .collect();
        if running.len() > 1 {
            return Err(format!(
                "two executions of the job overlap (attempts {running:?}) at t={}",
                s.now
            ));
        }
        if let Some((late, current)) = s.late_completion {
            return Err(format!(
                "a late completion of attempt {late} was accepted while attempt {current} ran"
            ));
        }
        Ok(())
    }
}

// ----------------------------------------------------------------------------------------------
// The tests
// ----------------------------------------------------------------------------------------------
