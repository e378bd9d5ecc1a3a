//! The engine's event queue: a min-heap in a total, deterministic order.

use crate::Nanos;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// What happens at an event. The variant order is the same-time processing order: every
/// step completion (by instance id), then every KV transfer completion (by sending instance),
/// then pipeline stage 0 becoming free (by instance id), before the arrival cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EventKind {
    /// The step in flight on `instance` finishes.
    StepEnd {
        /// Instance id.
        instance: u32,
    },
    /// The KV transfer in flight from prefill instance `sender` arrives at its decode
    /// instance (prefill/decode disaggregation).
    TransferEnd {
        /// Sending instance id.
        sender: u32,
    },
    /// Stage 0 of pipelined `instance` has finished its part of a step (its send included)
    /// and can take a new one.
    StageFree {
        /// Instance id.
        instance: u32,
    },
    /// The next request(s) of the workload arrive.
    Arrival,
}

/// One scheduled event. Ordered by `(time, kind, seq)`: earlier first, then by kind (see
/// [`EventKind`]), then by insertion order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Event {
    /// When, ns.
    pub time: Nanos,
    /// What.
    pub kind: EventKind,
    /// Insertion number: the last tie-breaker.
    pub seq: u64,
}

/// Pending events, popped in [`Event`] order.
#[derive(Debug, Default)]
pub struct EventQueue {
    heap: BinaryHeap<Reverse<Event>>,
    next_seq: u64,
}

impl EventQueue {
    /// An empty queue with room for `capacity` events before it grows.
    pub fn with_capacity(capacity: usize) -> EventQueue {
        EventQueue {
            heap: BinaryHeap::with_capacity(capacity),
            next_seq: 0,
        }
    }

    /// Schedules `kind` at `time`.
    pub fn push(&mut self, time: Nanos, kind: EventKind) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Reverse(Event { time, kind, seq }));
    }

    /// Time of the earliest pending event.
    pub fn next_time(&self) -> Option<Nanos> {
        self.heap.peek().map(|e| e.0.time)
    }

    /// Removes and returns the earliest event if it happens at or before `time`.
    pub fn pop_until(&mut self, time: Nanos) -> Option<Event> {
        if self.next_time()? <= time {
            self.heap.pop().map(|e| e.0)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_pop_by_time_then_completions_by_instance_then_arrivals_then_insertion() {
        let mut q = EventQueue::with_capacity(8);
        q.push(20, EventKind::Arrival);
        q.push(10, EventKind::Arrival);
        q.push(10, EventKind::StepEnd { instance: 3 });
        q.push(10, EventKind::StepEnd { instance: 1 });
        q.push(5, EventKind::StepEnd { instance: 7 });
        q.push(10, EventKind::StepEnd { instance: 1 });
        let mut order = Vec::new();
        while let Some(e) = q.pop_until(u64::MAX) {
            order.push((e.time, e.kind, e.seq));
        }
        use EventKind::{Arrival, StepEnd};
        assert_eq!(
            order,
            [
                (5, StepEnd { instance: 7 }, 4),
                (10, StepEnd { instance: 1 }, 3),
                (10, StepEnd { instance: 1 }, 5),
                (10, StepEnd { instance: 3 }, 2),
                (10, Arrival, 1),
                (20, Arrival, 0),
            ]
        );
    }

    #[test]
    fn transfer_ends_come_after_step_ends_and_before_arrivals() {
        let mut q = EventQueue::with_capacity(4);
        q.push(10, EventKind::Arrival);
        q.push(10, EventKind::TransferEnd { sender: 0 });
        q.push(10, EventKind::StepEnd { instance: 5 });
        q.push(10, EventKind::TransferEnd { sender: 2 });
        let mut order = Vec::new();
        while let Some(e) = q.pop_until(10) {
            order.push(e.kind);
        }
        use EventKind::{Arrival, StepEnd, TransferEnd};
        assert_eq!(
            order,
            [
                StepEnd { instance: 5 },
                TransferEnd { sender: 0 },
                TransferEnd { sender: 2 },
                Arrival
            ]
        );
    }

    #[test]
    fn pop_until_stops_at_the_instant() {
        let mut q = EventQueue::with_capacity(2);
        q.push(7, EventKind::Arrival);
        q.push(9, EventKind::StepEnd { instance: 0 });
        assert_eq!(q.next_time(), Some(7));
        assert_eq!(q.pop_until(6), None);
        assert_eq!(q.pop_until(7).map(|e| e.time), Some(7));
        assert_eq!(q.pop_until(7), None);
        assert_eq!(q.next_time(), Some(9));
    }
}
