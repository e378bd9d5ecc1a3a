//! The engine's event queue: a min-heap in a total, deterministic order, and the one place
//! that states the same-instant order ([`Phase`]).

use crate::Nanos;

/// The phases of one simulated instant, in the order the loop settles them. Events at the
/// same time are applied phase by phase, and within a phase by instance id (the subject of
/// the event), then in the order they were scheduled; once every event of the instant is
/// applied, idle instances with work start their steps, by instance id.
///
/// Decision (issue 27): completions come before arrivals. The design seed (§E.3) put
/// arrivals first; we keep completions first because (1) a router polling real engines sees
/// a step's results as soon as the engine has processed them, so a request arriving at the
/// instant a step ends is routed on the state after it (freed KV blocks, finished requests
/// gone from the running count); (2) released requests (an agentic session's next call) can
/// then arrive at the very instant their parent finishes and be routed in that instant; and
/// (3) it is the order of LLMServingSim, whose outputs the golden tests reproduce exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Steps that end now: tokens out, requests finished, prefills handed off.
    StepEnds,
    /// KV transfers that arrive now deliver requests to decode instances.
    TransferEnds,
    /// Stage 0 of pipelined instances frees up.
    StagesFree,
    /// The autoscaler (`crate::autoscale`): replicas whose provisioning, loading or warm-up
    /// ends now move on (by instance id; one that becomes ready takes requests from this
    /// very instant), then the autoscaler's tick decides on the instances' state after the
    /// completions above. Before the control plane and the arrivals, for the reason
    /// completions are: what is routed now is routed on the cluster as it is now, new
    /// replicas included and replicas starting to drain excluded.
    Scaling,
    /// The control plane's decisions due now (`crate::control`): admissions whose latency
    /// ran out, requests expiring in or dispatched from the gateway queue, routings whose
    /// latency ran out. Before the arrivals of the instant, for the reason the router's
    /// held requests are asked first: these requests came earlier. (The seed's §E.3 orders
    /// cluster arrival < admission < routing; we keep completions first, above, and settle
    /// older requests before newer ones.)
    Control,
    /// Requests due now (initial, released, admitted, retried from the gateway) are routed.
    Arrivals,
    /// Requests whose own timeout runs out now end as timed out, wherever they are (see
    /// `timeouts.rs`). Last of the events, as in BLIS (its timeout event has the lowest
    /// same-tick priority): a request that completes at its deadline completes (the
    /// completion wins), and every arrival and control decision of the instant is settled
    /// first; what the timeouts free is then used by the steps that start at this instant.
    Timeouts,
    /// Idle instances with work form and price their next step (not an event: it closes
    /// every instant).
    StartSteps,
}

/// What happens at an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// Replica `instance`'s current lifecycle stage ends (stale unless `epoch` is its
    /// current one: it was cancelled or restarted since).
    Replica {
        /// Instance id.
        instance: u32,
        /// The replica's start number when the event was scheduled.
        epoch: u32,
    },
    /// The autoscaler's periodic evaluation.
    ScaleTick,
    /// The next request(s) of the workload arrive.
    Arrival,
    /// A control-plane decision falls due (a latency or a time to live runs out), or the
    /// gateway queue may dispatch after something ended.
    Control,
    /// Requests' own timeouts run out.
    Timeout,
}

impl EventKind {
    /// The phase of the instant in which the event is applied.
    pub fn phase(self) -> Phase {
        match self {
            EventKind::StepEnd { .. } => Phase::StepEnds,
            EventKind::TransferEnd { .. } => Phase::TransferEnds,
            EventKind::StageFree { .. } => Phase::StagesFree,
            EventKind::Replica { .. } | EventKind::ScaleTick => Phase::Scaling,
            EventKind::Arrival => Phase::Arrivals,
            EventKind::Control => Phase::Control,
            EventKind::Timeout => Phase::Timeouts,
        }
    }

    /// The instance the event is about (the sender of a transfer; none for arrivals).
    fn subject(self) -> u32 {
        match self {
            EventKind::StepEnd { instance } | EventKind::StageFree { instance } => instance,
            EventKind::TransferEnd { sender } => sender,
            EventKind::Replica { instance, .. } => instance,
            // After every replica's change of the instant.
            EventKind::ScaleTick => u32::MAX,
            EventKind::Arrival | EventKind::Control | EventKind::Timeout => 0,
        }
    }
}

/// One scheduled event. The queue pops them by `(time, phase, instance, seq)`: earlier first,
/// then by [`Phase`], then by the instance it is about, then by insertion order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// When, ns.
    pub time: Nanos,
    /// What.
    pub kind: EventKind,
    /// Insertion number: the last tie-breaker.
    pub seq: u64,
}

/// A queued event with its order precomputed: `(time, rank, seq)`, the rank holding the
/// phase above the subject, so that the heap compares three integers rather than matching
/// on the kinds at every comparison.
#[derive(Debug, Clone, Copy)]
struct Entry {
    time: Nanos,
    rank: u64,
    seq: u64,
    kind: EventKind,
}

impl Entry {
    fn new(time: Nanos, kind: EventKind, seq: u64) -> Entry {
        let rank = ((kind.phase() as u64) << 32) | u64::from(kind.subject());
        Entry {
            time,
            rank,
            seq,
            kind,
        }
    }

    fn key(&self) -> (Nanos, u64, u64) {
        (self.time, self.rank, self.seq)
    }

    fn event(self) -> Event {
        Event {
            time: self.time,
            kind: self.kind,
            seq: self.seq,
        }
    }
}

/// Pending events, popped in [`Event`] order: a binary min-heap of [`Entry`]s (their order
/// is total, so any heap pops them in the same order), which can also replace its earliest
/// event in one pass ([`EventQueue::replace_next`]) and tell whether it is alone at its
/// instant ([`EventQueue::lone_step_end`]).
#[derive(Debug, Default)]
pub struct EventQueue {
    heap: Vec<Entry>,
    next_seq: u64,
}

impl EventQueue {
    /// An empty queue with room for `capacity` events before it grows.
    pub fn with_capacity(capacity: usize) -> EventQueue {
        EventQueue {
            heap: Vec::with_capacity(capacity),
            next_seq: 0,
        }
    }

    /// The entry of `kind` at `time`, numbered in scheduling order.
    fn entry(&mut self, time: Nanos, kind: EventKind) -> Entry {
        let seq = self.next_seq;
        self.next_seq += 1;
        Entry::new(time, kind, seq)
    }

    /// Schedules `kind` at `time`.
    pub fn push(&mut self, time: Nanos, kind: EventKind) {
        let entry = self.entry(time, kind);
        self.heap.push(entry);
        self.sift_up(self.heap.len() - 1, entry);
    }

    /// Time of the earliest pending event.
    pub fn next_time(&self) -> Option<Nanos> {
        self.heap.first().map(|e| e.time)
    }

    /// The earliest pending event.
    pub fn peek(&self) -> Option<Event> {
        self.heap.first().map(|e| e.event())
    }

    /// The instance whose step ends first, when the earliest pending event is a step end.
    pub fn next_step_end(&self) -> Option<u32> {
        match self.heap.first()?.kind {
            EventKind::StepEnd { instance } => Some(instance),
            _ => None,
        }
    }

    /// The instance whose step ends at `time`, when that is the earliest pending event and
    /// no other is pending at `time`.
    pub fn lone_step_end(&self, time: Nanos) -> Option<u32> {
        let first = self.heap.first().filter(|e| e.time == time)?;
        if self.first_children().iter().any(|e| e.time == time) {
            return None;
        }
        match first.kind {
            EventKind::StepEnd { instance } => Some(instance),
            _ => None,
        }
    }

    /// The instance whose step ends second, when the second earliest pending event is a
    /// step end.
    pub fn second_step_end(&self) -> Option<u32> {
        match self.first_children().iter().min_by_key(|e| e.key())?.kind {
            EventKind::StepEnd { instance } => Some(instance),
            _ => None,
        }
    }

    /// The earliest entry's children in the heap (none, one or two): the second earliest
    /// entry is one of them.
    fn first_children(&self) -> &[Entry] {
        self.heap.get(1..self.heap.len().min(3)).unwrap_or_default()
    }

    /// Removes and returns the earliest event if it happens at or before `time`.
    pub fn pop_until(&mut self, time: Nanos) -> Option<Event> {
        if self.next_time()? > time {
            return None;
        }
        let last = self.heap.pop()?;
        let first = match self.heap.is_empty() {
            true => last,
            false => {
                let first = self.heap[0];
                self.sift_down_into(last);
                first
            }
        };
        Some(first.event())
    }

    /// Removes the earliest event and schedules `kind` at `time` in one pass: what
    /// [`EventQueue::pop_until`] then [`EventQueue::push`] do.
    pub fn replace_next(&mut self, time: Nanos, kind: EventKind) {
        let entry = self.entry(time, kind);
        match self.heap.is_empty() {
            false => self.sift_down_into(entry),
            true => self.heap.push(entry),
        }
    }

    /// Moves `entry`, the one at `k`, up to its place.
    fn sift_up(&mut self, mut k: usize, entry: Entry) {
        while k > 0 {
            let parent = (k - 1) / 2;
            if self.heap[parent].key() <= entry.key() {
                break;
            }
            self.heap[k] = self.heap[parent];
            k = parent;
        }
        self.heap[k] = entry;
    }

    /// Fills the root's place with `entry`, moved down to its place: the root's content is
    /// dropped (read it first). The entry travels in registers, not read back from the slot
    /// it was just written to, and the smaller child is chosen without a branch (which of
    /// two step ends comes first is as good as random).
    fn sift_down_into(&mut self, entry: Entry) {
        let heap = &mut self.heap[..];
        let n = heap.len();
        let key = entry.key();
        let mut k = 0;
        loop {
            let left = 2 * k + 1;
            if left >= n {
                break;
            }
            // The right child, or the left again when there is none.
            let right = (left + 1).min(n - 1);
            let child = left + usize::from(heap[right].key() < heap[left].key());
            if heap[child].key() >= key {
                break;
            }
            heap[k] = heap[child];
            k = child;
        }
        heap[k] = entry;
    }
}
