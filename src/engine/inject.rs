//! Work that enters the run while it runs: requests released when earlier ones finish
//! (agentic workflow steps, conversation follow-ups) and the concurrency gate of replay.
//!
//! The engine's one hook is [`crate::workload::Injector::request_finished`]: every finished
//! request is reported to it, and it answers with zero or more new requests, each arriving at
//! or after the finish.
//! Finished means the last token: under prefill/decode disaggregation, on the decode instance
//! (the hand-off at the end of a prefill is not reported; see `pd.rs`).
//! They join the requests still to arrive in the order LLMServingSim uses: by arrival time,
//! and at equal times after every request already pending (the initial list first, then
//! released requests in release order). A generated workload's requests may come as a stream
//! ([`ArrivalStream`]) instead of a list: drawn one ahead of the run, they enter as listed ones
//! would (after the listed ones at equal times), and only the requests in flight are held.
//!
//! With [`super::Run::max_in_flight`] the run is in concurrency mode: at most that many requests
//! are in the cluster (arrived and not finished, a request whose KV cache is on its way to a
//! decode instance included) at once. A request due while the cluster is full waits, in
//! arrival order, for a completion, and its arrival is stamped with the time it is let in.
//! Without it (trace mode) every request arrives exactly at its arrival time.

use super::eligibility::{Eligibility, Groups};
use super::{Setups, SimError};
use crate::Nanos;
use crate::workload::Request;
use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Requests drawn as the run reaches them instead of listed before it (a workload generated
/// from a spec): in arrival order, ids ascending, so that a workload of any size runs in the
/// memory of the requests in flight.
pub type ArrivalStream<'r> = Box<dyn Iterator<Item = Request> + 'r>;

/// Where the next request due comes from, in the order requests due at one time enter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Source {
    Listed,
    Streamed,
    Released,
}

/// A request whose turn to arrive has come.
pub(super) enum Due<'r> {
    /// The initial request at this index of the initial list.
    Initial(usize, &'r Request),
    /// A released request.
    Released(Request),
}

impl<'r> Due<'r> {
    /// The request as it enters the run at `now`, with its candidate lists. Arrivals are
    /// stamped with the time they enter: their own in trace mode (an initial request is then
    /// borrowed as listed), the admission time in concurrency mode; a released request gets
    /// its lists (under the roles of a disaggregated run) here.
    pub fn enter(
        self,
        now: Nanos,
        eligibility: &mut Eligibility,
        setups: Setups<'_>,
    ) -> Result<(Cow<'r, Request>, Groups), SimError> {
        Ok(match self {
            Due::Initial(index, r) if r.arrival_ns == now => {
                (Cow::Borrowed(r), eligibility.groups(index))
            }
            Due::Initial(index, r) => {
                let r = Request {
                    arrival_ns: now,
                    ..r.clone()
                };
                (Cow::Owned(r), eligibility.groups(index))
            }
            Due::Released(r) => {
                let r = Request {
                    arrival_ns: now,
                    ..r
                };
                let groups = eligibility.groups_for(&r, setups)?;
                (Cow::Owned(r), groups)
            }
        })
    }
}

/// The requests still to arrive: the initial list (sorted by arrival), the stream, the
/// released ones, and the concurrency gate.
pub(super) struct Arrivals<'r> {
    initial: &'r [Request],
    next: usize,
    /// Requests drawn as the run reaches them ([`super::Run::streamed`]), and the next of
    /// them, drawn ahead so that its arrival is known.
    stream: Option<ArrivalStream<'r>>,
    stream_head: Option<Request>,
    /// Requests drawn from the stream so far.
    streamed: u64,
    /// Released requests by slot; `None` once routed.
    slots: Vec<Option<Request>>,
    free: Vec<usize>,
    /// (arrival, release order, slot) of every released request not yet routed.
    pending: BinaryHeap<Reverse<(Nanos, u64, usize)>>,
    seq: u64,
    limit: usize,
    /// Arrival time of the initial request the pending arrival event is for.
    scheduled: Option<Nanos>,
    /// Requests routed so far.
    routed: u64,
    /// Requests released so far.
    released: u64,
}

impl<'r> Arrivals<'r> {
    pub fn new(
        initial: &'r [Request],
        mut stream: Option<ArrivalStream<'r>>,
        max_in_flight: Option<usize>,
    ) -> Arrivals<'r> {
        Arrivals {
            initial,
            next: 0,
            stream_head: stream.as_mut().and_then(Iterator::next),
            stream,
            streamed: 0,
            slots: Vec::new(),
            free: Vec::new(),
            pending: BinaryHeap::new(),
            seq: 0,
            limit: max_in_flight.unwrap_or(usize::MAX),
            scheduled: None,
            routed: 0,
            released: 0,
        }
    }

    /// Whether the cluster may take another request, given `ended` requests so far
    /// (finished or rejected).
    fn has_room(&self, ended: u64) -> bool {
        ((self.routed - ended) as usize) < self.limit
    }

    /// Whether the run is in concurrency mode.
    pub fn gated(&self) -> bool {
        self.limit != usize::MAX
    }

    /// Adds a released request; returns its arrival time (an arrival event is due then).
    pub fn release(&mut self, request: Request) -> Nanos {
        let arrival = request.arrival_ns;
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s] = Some(request);
                s
            }
            None => {
                self.slots.push(Some(request));
                self.slots.len() - 1
            }
        };
        self.pending.push(Reverse((arrival, self.seq, slot)));
        self.seq += 1;
        self.released += 1;
        arrival
    }

    /// The next request due at `now` that the cluster may take (with `ended` requests
    /// finished or rejected so far), counted as routed: initial requests before released ones
    /// at equal arrival times.
    pub fn next_due(&mut self, now: Nanos, ended: u64) -> Option<Due<'r>> {
        if !self.has_room(ended) {
            return None;
        }
        // The earliest of the three heads; at equal times listed, then streamed, then
        // released requests.
        let heads = [
            (
                self.initial.get(self.next).map(|r| r.arrival_ns),
                Source::Listed,
            ),
            (
                self.stream_head.as_ref().map(|r| r.arrival_ns),
                Source::Streamed,
            ),
            (self.pending.peek().map(|e| e.0.0), Source::Released),
        ];
        let (_, source) = heads
            .into_iter()
            .filter_map(|(t, source)| Some((t.filter(|&t| t <= now)?, source)))
            .min()?;
        let due = match source {
            Source::Listed => {
                let (initial, index) = (self.initial, self.next);
                self.next += 1;
                Due::Initial(index, &initial[index])
            }
            // A streamed request enters as a released one does: owned, its lists found now.
            Source::Streamed => {
                let next = self.stream.as_mut().and_then(Iterator::next);
                self.streamed += 1;
                Due::Released(std::mem::replace(&mut self.stream_head, next)?)
            }
            Source::Released => {
                let Reverse((_, _, slot)) = self.pending.pop()?;
                self.free.push(slot);
                Due::Released(
                    self.slots[slot]
                        .take()
                        .expect("a pending slot holds a request"),
                )
            }
        };
        self.routed += 1;
        Some(due)
    }

    /// Whether every initial request (listed or streamed) has entered and no released one
    /// is pending.
    pub fn exhausted(&self) -> bool {
        self.next >= self.initial.len() && self.stream_head.is_none() && self.pending.is_empty()
    }

    /// Requests known to the run so far: those listed, those drawn from the stream and
    /// those released.
    pub fn known(&self) -> u64 {
        self.initial.len() as u64 + self.streamed + self.released
    }

    /// The arrival of the next initial request, listed or streamed.
    fn next_initial(&self) -> Option<Nanos> {
        let listed = self.initial.get(self.next).map(|r| r.arrival_ns);
        let streamed = self.stream_head.as_ref().map(|r| r.arrival_ns);
        listed.into_iter().chain(streamed).min()
    }

    /// When the next request arrives that is known now (initial, or released and pending).
    pub fn next_arrival(&self) -> Option<Nanos> {
        let released = self.pending.peek().map(|e| e.0.0);
        self.next_initial().into_iter().chain(released).min()
    }

    /// When an arrival event is needed for the next initial request (arriving after `now`,
    /// at `None` before the run starts) and none is pending for it yet.
    pub fn initial_event(&mut self, now: Option<Nanos>) -> Option<Nanos> {
        let t = self.next_initial()?;
        if now.is_some_and(|now| t <= now) || self.scheduled == Some(t) {
            return None;
        }
        self.scheduled = Some(t);
        Some(t)
    }

    /// Whether a request is due but waits for room (concurrency mode).
    pub fn has_waiting(&self, now: Nanos) -> bool {
        self.next_initial().is_some_and(|t| t <= now)
            || self.pending.peek().is_some_and(|e| e.0.0 <= now)
    }
}
