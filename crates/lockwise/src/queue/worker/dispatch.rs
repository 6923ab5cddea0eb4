//! The dispatcher: what a running worker keeps between the steps of its loop — the claims in
//! flight and the places they reserved, the jobs waiting for a handler, what to acknowledge
//! or hand back, the pace, the claim failures, and the report — and the decisions made on it:
//! when to send a claim and for how many jobs, and how to book a claim's answer.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::PoisonError;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::watch;
use tokio::time::Instant;

use super::claim::{ClaimAnswer, ClaimDone, ClaimRequest};
use super::execute::Finished;
use super::pace::{MAX_CLAIMS, MAX_PREFETCH, Pace, ahead_batch, claims_in_flight};
use super::running::Running;
use super::waiting::admit;
use super::{Worker, WorkerReport};
use crate::queue::{Claimed, JobId};

type ClaimInFlight = Pin<Box<dyn Future<Output = ClaimDone> + Send>>;

pub(super) struct Dispatcher {
    /// The queues claimed from, in priority order.
    queues: Vec<String>,
    /// Those of them that are paused now: left out of claims.
    paused: watch::Receiver<Vec<String>>,
    /// The handlers in flight and the jobs waiting for one, by job.
    running: Running,
    /// Confirmed jobs waiting for a free handler, in claim order (also in `running`).
    pub(super) waiting: VecDeque<Claimed>,
    /// Claims (each with its confirmation) in flight while handlers run.
    pub(super) claims: FuturesUnordered<ClaimInFlight>,
    /// How many jobs the claims in flight asked for in all.
    reserved: usize,
    /// Whether something may have changed since the last claim that found less than it
    /// asked for: a job finished, a notification, the poll interval.
    pub(super) want_claim: bool,
    /// Whether the last claim got all it asked for: more work is likely waiting, and further
    /// claims may go out beside one in flight.
    busy: bool,
    /// No claim before this instant (after a failed one).
    pub(super) not_before: Option<Instant>,
    /// Since when claims fail, and the last failure: logged once when claims start failing
    /// and once when they succeed again, not at every retry.
    pub(super) failing: Option<(Instant, String)>,
    pace: Pace,
    /// Finished jobs to acknowledge with the next claim.
    pub(super) acks: Vec<(JobId, i32)>,
    /// Jobs to give back at the end (stopped at the end of the grace period, or never run).
    pub(super) give_back: Vec<(JobId, i32)>,
    pub(super) report: WorkerReport,
    /// The batch of a claim while handlers are free, and of one that claims ahead.
    batch_for_free: usize,
    batch_ahead: usize,
    /// The most claims in flight while jobs are long.
    max_claims: usize,
    /// The most jobs claimed ahead of free handlers.
    most_ahead: usize,
    /// Jobs left to start under [`Worker::max_jobs`]; `None`: no limit.
    budget: Option<usize>,
}

impl Dispatcher {
    pub(super) fn new(
        worker: &Worker,
        queues: Vec<String>,
        running: Running,
        paused: watch::Receiver<Vec<String>>,
    ) -> Self {
        let (batch_for_free, batch_ahead) = worker.batch_sizes();
        // An explicit prefetch is held to; the default follows the pace, up to this. With a
        // batch the caller set, claims do not grow with the prefetch, so it stays at 15 of
        // them (the cap before claims ahead grew).
        let most_ahead = worker.prefetch.unwrap_or(match worker.batch {
            Some(_) => (batch_ahead * (MAX_CLAIMS - 1)).min(MAX_PREFETCH),
            None => MAX_PREFETCH,
        });
        Dispatcher {
            queues,
            paused,
            running,
            waiting: VecDeque::new(),
            claims: FuturesUnordered::new(),
            reserved: 0,
            want_claim: true,
            busy: false,
            not_before: None,
            failing: None,
            pace: Pace::default(),
            acks: Vec::new(),
            give_back: Vec::new(),
            report: WorkerReport::default(),
            batch_for_free,
            batch_ahead,
            max_claims: claims_in_flight(worker.concurrency),
            most_ahead,
            budget: worker
                .max_jobs
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        }
    }

    /// Whether [`Worker::max_jobs`] jobs started and every one of them finished, with no
    /// claim in flight.
    pub(super) fn spent(&self) -> bool {
        self.budget == Some(0)
            && self.claims.is_empty()
            && self
                .running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty()
    }

    /// Books a finished execution while the worker claims: it tells the pace, and frees a
    /// place for the next claim.
    pub(super) async fn settle(&mut self, worker: &Worker, f: Finished) {
        self.pace.handler(&f);
        self.settle_only(worker, f).await;
        self.want_claim = true;
    }

    /// Books a finished execution (see [`Worker::settle`]).
    pub(super) async fn settle_only(&mut self, worker: &Worker, f: Finished) {
        worker
            .settle(
                f,
                &self.running,
                &mut self.acks,
                &mut self.give_back,
                &mut self.report,
            )
            .await;
    }

    /// Sends the claims there is room for, unless claims wait for `not_before`. Whether every
    /// place was taken, with no claim in flight and nothing to acknowledge.
    pub(super) fn send_claims(&mut self, worker: &Worker) -> bool {
        if self.not_before.is_some_and(|at| Instant::now() < at) {
            return false;
        }
        self.not_before = None;
        let (held, idle, longest) = {
            let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
            let longest = running
                .values()
                .filter(|job| job.task.is_some())
                .map(|job| job.started.elapsed())
                .max()
                .unwrap_or_default();
            (running.len(), running.is_empty(), longest)
        };
        let (places, batch, most_claims) = if self.pace.short_jobs(longest) {
            let ahead = match worker.prefetch {
                Some(n) => n,
                None => self
                    .pace
                    .ahead(worker.concurrency, self.batch_ahead, self.most_ahead),
            };
            (
                worker.concurrency + ahead,
                ahead_batch(worker.batch, self.batch_ahead, ahead),
                MAX_CLAIMS,
            )
        } else {
            (worker.concurrency, self.batch_for_free, self.max_claims)
        };
        let idle_full = self.claims.is_empty()
            && places.saturating_sub(held + self.reserved) == 0
            && self.acks.is_empty();
        // Paused queues are left out (`None`: none is); with all of them paused, a claim
        // only acknowledges.
        let (active, all_paused) = {
            let paused = self.paused.borrow();
            if paused.is_empty() {
                (None, false)
            } else {
                let active: Vec<String> = self
                    .queues
                    .iter()
                    .filter(|q| !paused.contains(q))
                    .cloned()
                    .collect();
                let all_paused = active.is_empty();
                (Some(active), all_paused)
            }
        };
        loop {
            let mut free = places.saturating_sub(held + self.reserved).min(batch);
            if let Some(left) = self.budget {
                free = free.min(left.saturating_sub(self.reserved));
            }
            if all_paused {
                free = 0;
            }
            let launch = if self.claims.is_empty() {
                (self.want_claim || self.busy) && (free > 0 || !self.acks.is_empty())
            } else {
                self.busy && free == batch && self.claims.len() < most_claims
            };
            if !launch {
                break;
            }
            self.want_claim = false;
            self.reserved += free;
            let request = ClaimRequest {
                queue: worker.queue.clone(),
                names: match &active {
                    Some(active) if !all_paused => active.clone(),
                    _ => self.queues.clone(),
                },
                worker: worker.id.clone(),
                limit: free,
                lease: worker.lease,
                acks: std::mem::take(&mut self.acks),
                idle: idle && self.claims.is_empty(),
            };
            self.claims.push(Box::pin(request.send_on_own_task()));
        }
        idle_full
    }

    /// With [`Worker::until_idle`]: whether every queue is paused and nothing runs, waits,
    /// is being claimed or is left to acknowledge, so that nothing can come.
    pub(super) fn idle_while_paused(&self, worker: &Worker) -> bool {
        if !(worker.until_idle
            && self.claims.is_empty()
            && self.acks.is_empty()
            && self.waiting.is_empty())
        {
            return false;
        }
        let paused = self.paused.borrow();
        self.queues.iter().all(|q| paused.contains(q))
            && self
                .running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty()
    }

    /// Books a claim's answer: its jobs join the line, its failure is remembered and its
    /// acknowledgements go out again with the next claim. Whether the queue is drained (with
    /// [`Worker::until_idle`]).
    pub(super) fn claimed(&mut self, worker: &Worker, done: ClaimDone) -> bool {
        self.reserved = self.reserved.saturating_sub(done.asked);
        self.pace.claim(done.took);
        match done.answer {
            ClaimAnswer::Claimed { jobs, not_started } => {
                if let Some((since, _)) = self.failing.take() {
                    let ms = u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX);
                    tracing::warn!(failing_ms = ms, "claims succeed again");
                }
                let asked = done.asked;
                self.report.not_started += not_started;
                if worker.until_idle
                    && done.idle
                    && asked > 0
                    && jobs.is_empty()
                    && not_started == 0
                {
                    if self.claims.is_empty() {
                        return true;
                    }
                    // Another claim still in flight may hold the jobs this one skipped (SKIP
                    // LOCKED): the next idle claim decides.
                    self.want_claim = true;
                }
                if let Some(left) = &mut self.budget {
                    *left = left.saturating_sub(jobs.len());
                }
                // More work is likely waiting when the claim got all it asked for.
                self.busy =
                    asked > 0 && jobs.len() + usize::try_from(not_started).unwrap_or(0) == asked;
                admit(jobs, done.deadline, &self.running, &mut self.waiting);
            }
            ClaimAnswer::Failed(error, sent) => {
                worker.claim_failed(&mut self.failing, error.to_string());
                self.busy = false;
                self.acks.splice(0..0, sent);
                self.not_before = Some(Instant::now() + worker.poll.min(Duration::from_secs(1)));
                self.want_claim = true;
            }
            ClaimAnswer::NoAnswer(sent) => {
                worker.claim_failed(
                    &mut self.failing,
                    "no answer before the claim's lease would have run out (jobs it may have \
                     claimed come back through the reaper, attempt not counted)"
                        .to_owned(),
                );
                self.acks.splice(0..0, sent);
                self.want_claim = true;
            }
        }
        false
    }

    /// At shutdown: waits for the claims in flight (each is bounded by its jobs' deadline)
    /// and puts their jobs in line.
    pub(super) async fn drain_claims(&mut self) {
        while let Some(done) = self.claims.next().await {
            match done.answer {
                ClaimAnswer::Claimed {
                    jobs, not_started, ..
                } => {
                    self.report.not_started += not_started;
                    admit(jobs, done.deadline, &self.running, &mut self.waiting);
                }
                ClaimAnswer::Failed(_, sent) | ClaimAnswer::NoAnswer(sent) => {
                    self.acks.extend(sent)
                }
            }
        }
    }
}
