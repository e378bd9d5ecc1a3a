//! Per-request timeouts (BLIS's client timeout): a request not completed within its own
//! timeout of its arrival ends as timed out at `arrival + timeout`, wherever it is then:
//! parked in the control plane, held by the router, waiting or running on an instance (its
//! KV blocks freed), or in a KV transfer. A request that completes at its deadline
//! completes (the timeouts are the last events of an instant, [`super::Phase::Timeouts`]).
//!
//! A request's timer is armed when it enters the run (its arrival; in concurrency mode, when
//! the gate lets it in) and disarmed when it ends otherwise. Deadlines wait in a min-heap,
//! earliest first (equal deadlines in the order their requests entered); the loop schedules
//! one event at the earliest. A run whose requests have no timeouts has no [`Timeouts`] at
//! all, so it costs nothing.

use crate::Nanos;
use crate::workload::{Request, RequestClasses};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

/// What a timer keeps of its request: enough to report it ([`Timer::request`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Timer {
    /// When it times out.
    pub deadline: Nanos,
    /// Arming order: the tie-breaker.
    seq: u64,
    pub id: u64,
    line: u64,
    arrival_ns: Nanos,
    input_toks: u32,
    output_toks: u32,
}

impl Timer {
    /// The request as its observers hear of it when it times out: id, line, arrival and
    /// token counts (neither its model name nor its token ids are kept).
    pub fn request(&self) -> Request {
        Request {
            id: self.id,
            line: self.line,
            model: None,
            arrival_ns: self.arrival_ns,
            input_toks: self.input_toks,
            output_toks: self.output_toks,
            token_ids: Vec::new(),
            prompt_blocks: None,
            known_hashes: None,
        }
    }
}

/// The timers of a run.
pub(super) struct Timeouts<'r> {
    classes: &'r RequestClasses,
    pending: BinaryHeap<Reverse<Timer>>,
    /// Ids of the requests whose timer is armed and that have not ended.
    armed: HashSet<u64>,
    seq: u64,
}

impl<'r> Timeouts<'r> {
    /// The timers of a workload whose clients are `classes`; `None` when no request has a
    /// timeout.
    pub fn new(classes: Option<&'r RequestClasses>) -> Option<Timeouts<'r>> {
        let classes = classes.filter(|c| c.has_timeouts())?;
        Some(Timeouts {
            classes,
            pending: BinaryHeap::new(),
            armed: HashSet::new(),
            seq: 0,
        })
    }

    /// Arms the timer of `request`, entering the run at `now`, if it has a timeout; returns
    /// its deadline.
    pub fn arm(&mut self, request: &Request, now: Nanos) -> Option<Nanos> {
        let timeout = self.classes.timeout_ns(request.id)?;
        let timer = Timer {
            deadline: now.saturating_add(timeout),
            seq: self.seq,
            id: request.id,
            line: request.line,
            arrival_ns: now,
            input_toks: request.input_toks,
            output_toks: request.output_toks,
        };
        self.seq += 1;
        self.armed.insert(request.id);
        self.pending.push(Reverse(timer));
        Some(timer.deadline)
    }

    /// Request `id` ended otherwise: its timer will do nothing.
    pub fn disarm(&mut self, id: u64) {
        self.armed.remove(&id);
    }

    /// The next timer due by `now` whose request has not ended.
    pub fn next_due(&mut self, now: Nanos) -> Option<Timer> {
        while let Some(Reverse(timer)) = self.pending.peek().copied() {
            if timer.deadline > now {
                return None;
            }
            self.pending.pop();
            if self.armed.remove(&timer.id) {
                return Some(timer);
            }
        }
        None
    }

    /// The earliest deadline held, of a request that has ended or not: no timer runs out
    /// before it.
    pub fn earliest_deadline(&self) -> Option<Nanos> {
        self.pending.peek().map(|Reverse(timer)| timer.deadline)
    }

    /// The earliest deadline of a request that has not ended (the timers of those that
    /// have are dropped on the way).
    pub fn next_deadline(&mut self) -> Option<Nanos> {
        while let Some(Reverse(timer)) = self.pending.peek() {
            if self.armed.contains(&timer.id) {
                return Some(timer.deadline);
            }
            self.pending.pop();
        }
        None
    }
}
