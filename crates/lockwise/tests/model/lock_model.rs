//! The lock model: clients, a lease server with fencing, and the resource.

use super::*;

/// The lease's TTL in ticks.
pub(super) const TTL: u8 = 3;
/// The local safety margin (`lease::drift`), in ticks.
pub(super) const DRIFT: u8 = 1;
/// `acquire.lua`'s `× 1024`: more grants than this in one tick would break the floor; the
/// bounds allow far fewer.
pub(super) const FLOOR: u16 = 16;

/// How far the lock model is explored.
#[derive(Debug, Clone, Copy)]
pub(super) struct LockBounds {
    /// Acquire attempts per client.
    pub(super) attempts: u8,
    /// Renewals per grant.
    pub(super) renewals: u8,
    /// Writes per grant.
    pub(super) writes: u8,
    /// Server crashes.
    pub(super) crashes: u8,
    /// The last tick.
    pub(super) horizon: u8,
}

pub(super) const LOCK_BOUNDS: LockBounds = LockBounds {
    attempts: 1,
    renewals: 1,
    writes: 1,
    crashes: 1,
    horizon: 6,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Client {
    Idle,
    /// An acquire request sent at `sent` is out.
    Acquiring {
        attempt: u8,
        sent: u8,
    },
    /// Holds grant `grant` (ghost) with `token` until `deadline` (local).
    Holding {
        grant: u8,
        token: u16,
        deadline: u8,
        renewals: u8,
        writes: u8,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum LockMsg {
    Acquire {
        c: u8,
        attempt: u8,
        sent: u8,
    },
    Granted {
        c: u8,
        attempt: u8,
        grant: u8,
        token: u16,
        sent: u8,
    },
    Held {
        c: u8,
        attempt: u8,
    },
    Extend {
        c: u8,
        grant: u8,
        sent: u8,
    },
    Extended {
        c: u8,
        grant: u8,
        sent: u8,
        ok: bool,
    },
    Write {
        c: u8,
        grant: u8,
        token: u16,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum LockViolation {
    LowerToken { token: u16, accepted: u16 },
    SharedToken { token: u16, grants: (u8, u8) },
    StaleWrite { grant: u8, newer: u8 },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct LockState {
    pub(super) now: u8,
    pub(super) clients: [(u8, Client); 2], // (attempts made, state)
    /// The live lease: (grant, expiry).
    pub(super) lease: Option<(u8, u8)>,
    /// The last token issued (0: none, or lost).
    pub(super) last: u16,
    /// Grants issued (ghost: the grant order).
    pub(super) grants: u8,
    pub(super) down: bool,
    pub(super) crashes: u8,
    /// The store: highest accepted token and the grant that wrote it.
    pub(super) accepted: Option<(u16, u8)>,
    /// The newest grant (ghost) whose write the store accepted.
    pub(super) newest_writer: u8,
    pub(super) violation: Option<LockViolation>,
    pub(super) net: Vec<LockMsg>,
}

/// A step of the lock model (its fields are read through `Debug`, in traces).
#[allow(dead_code)]
#[derive(Debug)]
pub(super) enum LockAction {
    Tick,
    Crash { keeps_counter: bool },
    SendAcquire(u8),
    Renew(u8),
    CheckAndWrite(u8),
    Deliver(LockMsg),
}

pub(super) struct LockModel {
    pub(super) design: Design,
    pub(super) bounds: LockBounds,
}

impl LockState {
    pub(super) fn send(&mut self, m: LockMsg) {
        let at = self.net.partition_point(|x| *x <= m);
        self.net.insert(at, m);
    }
}

impl LockModel {
    pub(super) fn deliver(&self, s: &mut LockState, m: LockMsg) {
        let now = s.now;
        match m {
            LockMsg::Acquire { c, attempt, sent } => {
                if s.lease.is_some_and(|(_, expiry)| expiry > now) {
                    s.send(LockMsg::Held { c, attempt });
                } else {
                    let floor = if self.design.token_floor {
                        u16::from(now) * FLOOR
                    } else {
                        0
                    };
                    let token = (s.last + 1).max(floor);
                    s.last = token;
                    s.grants += 1;
                    s.lease = Some((s.grants, now + TTL));
                    s.send(LockMsg::Granted {
                        c,
                        attempt,
                        grant: s.grants,
                        token,
                        sent,
                    });
                }
            }
            LockMsg::Extend { c, grant, sent } => {
                let ok = s
                    .lease
                    .is_some_and(|(g, expiry)| g == grant && expiry > now);
                if ok {
                    s.lease = Some((grant, now + TTL));
                }
                s.send(LockMsg::Extended { c, grant, sent, ok });
            }
            LockMsg::Granted {
                c,
                attempt,
                grant,
                token,
                sent,
            } => {
                let (_, st) = &mut s.clients[c as usize];
                if *st == (Client::Acquiring { attempt, sent }) {
                    let deadline = sent + TTL - DRIFT;
                    // A grant that arrives after its local deadline is never used.
                    *st = if now < deadline {
                        Client::Holding {
                            grant,
                            token,
                            deadline,
                            renewals: self.bounds.renewals,
                            writes: self.bounds.writes,
                        }
                    } else {
                        Client::Idle
                    };
                }
            }
            LockMsg::Held { c, attempt } => {
                let (_, st) = &mut s.clients[c as usize];
                if matches!(*st, Client::Acquiring { attempt: a, .. } if a == attempt) {
                    *st = Client::Idle;
                }
            }
            LockMsg::Extended { c, grant, sent, ok } => {
                let (_, st) = &mut s.clients[c as usize];
                if let Client::Holding {
                    grant: g, deadline, ..
                } = st
                    && *g == grant
                {
                    if ok && now < *deadline {
                        *deadline = (*deadline).max(sent + TTL - DRIFT);
                    } else {
                        *st = Client::Idle;
                    }
                }
            }
            LockMsg::Write { c: _, grant, token } => {
                let passes = match s.accepted {
                    None => true,
                    Some((highest, _)) => !self.design.fence || token >= highest,
                };
                if !passes {
                    return;
                }
                if let Some((highest, by)) = s.accepted {
                    let v = if token < highest {
                        Some(LockViolation::LowerToken {
                            token,
                            accepted: highest,
                        })
                    } else if token == highest && by != grant {
                        Some(LockViolation::SharedToken {
                            token,
                            grants: (by, grant),
                        })
                    } else if grant < s.newest_writer {
                        Some(LockViolation::StaleWrite {
                            grant,
                            newer: s.newest_writer,
                        })
                    } else {
                        None
                    };
                    s.violation = s.violation.or(v);
                }
                s.accepted = Some((token, grant));
                s.newest_writer = s.newest_writer.max(grant);
            }
        }
    }
}

impl Model for LockModel {
    type State = LockState;
    type Action = LockAction;

    fn init(&self) -> LockState {
        LockState {
            now: 0,
            clients: [(0, Client::Idle); 2],
            lease: None,
            last: 0,
            grants: 0,
            down: false,
            crashes: 0,
            accepted: None,
            newest_writer: 0,
            violation: None,
            net: Vec::new(),
        }
    }

    fn next(&self, s: &LockState, out: &mut Vec<(LockAction, LockState)>) {
        if s.violation.is_some() {
            return;
        }
        if s.now < self.bounds.horizon {
            let mut t = s.clone();
            t.now += 1;
            t.down = false;
            for (_, c) in &mut t.clients {
                if matches!(*c, Client::Holding { deadline, .. } if deadline <= t.now) {
                    *c = Client::Idle; // the lost signal fires at the local deadline
                }
            }
            out.push((LockAction::Tick, t));
        }
        if !s.down && s.crashes < self.bounds.crashes {
            for keeps_counter in [true, false] {
                let mut t = s.clone();
                t.crashes += 1;
                t.down = true;
                t.lease = None;
                if !keeps_counter {
                    t.last = 0;
                }
                out.push((LockAction::Crash { keeps_counter }, t));
            }
        }
        for (i, &(attempts, st)) in s.clients.iter().enumerate() {
            let c = i as u8;
            let mut step = |action: LockAction, f: &dyn Fn(&mut LockState)| {
                let mut t = s.clone();
                f(&mut t);
                out.push((action, t));
            };
            match st {
                Client::Idle if attempts < self.bounds.attempts => {
                    step(LockAction::SendAcquire(c), &|t| {
                        let sent = t.now;
                        t.clients[i] = (
                            attempts + 1,
                            Client::Acquiring {
                                attempt: attempts + 1,
                                sent,
                            },
                        );
                        t.send(LockMsg::Acquire {
                            c,
                            attempt: attempts + 1,
                            sent,
                        });
                    });
                }
                Client::Idle => {}
                Client::Acquiring { .. } => {}
                Client::Holding {
                    grant,
                    token,
                    deadline,
                    renewals,
                    writes,
                } => {
                    let holding = |renewals, writes| Client::Holding {
                        grant,
                        token,
                        deadline,
                        renewals,
                        writes,
                    };
                    // Holding implies `now < deadline`: a tick past the deadline loses it.
                    if renewals > 0 {
                        step(LockAction::Renew(c), &|t| {
                            t.clients[i].1 = holding(renewals - 1, writes);
                            let sent = t.now;
                            t.send(LockMsg::Extend { c, grant, sent });
                        });
                    }
                    if writes > 0 {
                        step(LockAction::CheckAndWrite(c), &|t| {
                            t.clients[i].1 = holding(renewals, writes - 1);
                            t.send(LockMsg::Write { c, grant, token });
                        });
                    }
                }
            }
        }
        let mut last = None;
        for (k, &m) in s.net.iter().enumerate() {
            if last == Some(m) {
                continue; // the same message twice: one successor is enough
            }
            if s.down && matches!(m, LockMsg::Acquire { .. } | LockMsg::Extend { .. }) {
                continue; // the server is restarting: requests wait (or retry) until it is up
            }
            last = Some(m);
            let mut t = s.clone();
            t.net.remove(k);
            self.deliver(&mut t, m);
            out.push((LockAction::Deliver(m), t));
        }
    }

    fn check(&self, s: &LockState) -> Result<(), String> {
        match s.violation {
            None => Ok(()),
            Some(v) => Err(format!("the fenced store accepted a bad write: {v:?}")),
        }
    }
}

// ----------------------------------------------------------------------------------------------
// The queue model
// ----------------------------------------------------------------------------------------------
