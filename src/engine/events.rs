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
}

/// One scheduled event. The queue pops them by `(time, phase, instance, seq)`: earlier first,
/// then by [`Phase`], then by the instance it is about, then by insertion order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// When, ns.
    pub time: Nanos,
    /// What.
    pub kind: EventKind,
    /// Insertion number: the last tie-breaker (below `2^29`: past that, the events queued
    /// are numbered again in the same order).
    pub seq: u64,
}

/// Bits of an entry's order word that number the events (see [`Entry`]).
const SEQ_BITS: u32 = 29;
/// The insertion numbers' mask in an entry's order word.
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;

/// A queued event with its order precomputed in two words, so that the heap compares one
/// 128-bit integer (no branch) rather than matching on the kinds: the time, then the phase
/// (3 bits), the subject (32 bits) and the insertion number (the low [`SEQ_BITS`] bits,
/// renumbered in the same order once they run out: [`EventQueue::renumber`]). The kind is
/// kept as its tag and its replica epoch, and rebuilt with the subject when popped. 24 bytes,
/// against 40 for the time, two words of order and the kind.
#[derive(Debug, Clone, Copy)]
struct Entry {
    time: Nanos,
    order: u64,
    epoch: u32,
    tag: Tag,
}

/// Which [`EventKind`] an entry holds.
#[derive(Debug, Clone, Copy)]
enum Tag {
    StepEnd,
    TransferEnd,
    StageFree,
    Replica,
    ScaleTick,
    Arrival,
    Control,
    Timeout,
}

impl Entry {
    /// The entry of `kind` at `time`, numbered `seq`: its tag, its phase (as
    /// [`EventKind::phase`]), the instance it is about (the sender of a transfer; none for
    /// arrivals) and its epoch, read in one match.
    #[inline]
    fn new(time: Nanos, kind: EventKind, seq: u64) -> Entry {
        let (tag, phase, subject, epoch) = match kind {
            EventKind::StepEnd { instance } => (Tag::StepEnd, Phase::StepEnds, instance, 0),
            EventKind::TransferEnd { sender } => (Tag::TransferEnd, Phase::TransferEnds, sender, 0),
            EventKind::StageFree { instance } => (Tag::StageFree, Phase::StagesFree, instance, 0),
            EventKind::Replica { instance, epoch } => {
                (Tag::Replica, Phase::Scaling, instance, epoch)
            }
            // After every replica's change of the instant.
            EventKind::ScaleTick => (Tag::ScaleTick, Phase::Scaling, u32::MAX, 0),
            EventKind::Arrival => (Tag::Arrival, Phase::Arrivals, 0, 0),
            EventKind::Control => (Tag::Control, Phase::Control, 0, 0),
            EventKind::Timeout => (Tag::Timeout, Phase::Timeouts, 0, 0),
        };
        let order = ((phase as u64) << (32 + SEQ_BITS))
            | (u64::from(subject) << SEQ_BITS)
            | (seq & SEQ_MASK);
        Entry {
            time,
            order,
            epoch,
            tag,
        }
    }

    /// `(time, phase, subject, seq)` as one integer.
    #[inline(always)]
    fn key(&self) -> u128 {
        (u128::from(self.time) << 64) | u128::from(self.order)
    }

    fn subject(&self) -> u32 {
        (self.order >> SEQ_BITS) as u32
    }

    fn kind(&self) -> EventKind {
        let subject = self.subject();
        match self.tag {
            Tag::StepEnd => EventKind::StepEnd { instance: subject },
            Tag::TransferEnd => EventKind::TransferEnd { sender: subject },
            Tag::StageFree => EventKind::StageFree { instance: subject },
            Tag::Replica => EventKind::Replica {
                instance: subject,
                epoch: self.epoch,
            },
            Tag::ScaleTick => EventKind::ScaleTick,
            Tag::Arrival => EventKind::Arrival,
            Tag::Control => EventKind::Control,
            Tag::Timeout => EventKind::Timeout,
        }
    }

    /// The instance whose step ends, for a step end.
    fn step_end(&self) -> Option<u32> {
        matches!(self.tag, Tag::StepEnd).then(|| self.subject())
    }

    fn event(self) -> Event {
        Event {
            time: self.time,
            kind: self.kind(),
            seq: self.order & SEQ_MASK,
        }
    }
}

/// Children of an entry in the heap: a 4-ary heap is half as deep as a binary one, and the
/// four children of an entry lie side by side (96 bytes).
const ARITY: usize = 4;

/// Pending events, popped in [`Event`] order: a 4-ary min-heap of [`Entry`]s (their order
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
        EventQueue::numbered_from(capacity, 0)
    }

    /// An empty queue with room for `capacity` events, which numbers the events scheduled
    /// from `seq` on (below `2^29`: for tests of the numbering past `2^29`, where the events
    /// queued are numbered again in the same order).
    pub fn numbered_from(capacity: usize, seq: u64) -> EventQueue {
        EventQueue {
            heap: Vec::with_capacity(capacity),
            next_seq: seq & SEQ_MASK,
        }
    }

    /// The entry of `kind` at `time`, numbered in scheduling order.
    #[inline]
    fn entry(&mut self, time: Nanos, kind: EventKind) -> Entry {
        if self.next_seq > SEQ_MASK {
            self.renumber();
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        Entry::new(time, kind, seq)
    }

    /// Numbers the pending events `0..len` in the order of their insertion numbers, once
    /// those have run out of bits: every two events compare as before (so the heap stays a
    /// heap), and numbering goes on from `len`. Once every `2^29` events scheduled; the
    /// queue holds far fewer (about one event per instance).
    fn renumber(&mut self) {
        let mut by_seq: Vec<u32> = (0..self.heap.len() as u32).collect();
        by_seq.sort_unstable_by_key(|&k| self.heap[k as usize].order & SEQ_MASK);
        for (seq, &k) in by_seq.iter().enumerate() {
            let entry = &mut self.heap[k as usize];
            entry.order = (entry.order & !SEQ_MASK) | seq as u64;
        }
        self.next_seq = self.heap.len() as u64;
    }

    /// Schedules `kind` at `time`.
    #[inline]
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
        self.heap.first()?.step_end()
    }

    /// The instance whose step ends at `time`, when that is the earliest pending event and
    /// no other is pending at `time`.
    pub fn lone_step_end(&self, time: Nanos) -> Option<u32> {
        let first = self.heap.first().filter(|e| e.time == time)?;
        // Any other event at `time` would have one at `time` above it, up to the root.
        if self.first_children().iter().any(|e| e.time == time) {
            return None;
        }
        first.step_end()
    }

    /// The instance whose step ends second, when the second earliest pending event is a
    /// step end.
    pub fn second_step_end(&self) -> Option<u32> {
        let second = match self.heap.len() {
            0 | 1 => return None,
            n if n > ARITY => least_of_four(&self.heap, 1),
            n => least_of(&self.heap, 1, n),
        };
        self.heap[second].step_end()
    }

    /// Time of the second earliest pending event (`None`: one event or none is pending).
    pub fn second_time(&self) -> Option<Nanos> {
        self.first_children().iter().map(|e| e.time).min()
    }

    /// The earliest entry's children in the heap (up to [`ARITY`]): the second earliest
    /// entry is one of them.
    fn first_children(&self) -> &[Entry] {
        self.heap
            .get(1..self.heap.len().min(ARITY + 1))
            .unwrap_or_default()
    }

    /// Removes and returns the earliest event if it happens at or before `time`.
    #[inline]
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
    #[inline]
    pub fn replace_next(&mut self, time: Nanos, kind: EventKind) {
        let entry = self.entry(time, kind);
        match self.heap.is_empty() {
            false => self.sift_down_into(entry),
            true => self.heap.push(entry),
        }
    }

    /// Moves `entry`, the one at `k`, up to its place.
    fn sift_up(&mut self, mut k: usize, entry: Entry) {
        let key = entry.key();
        while k > 0 {
            let parent = (k - 1) / ARITY;
            if self.heap[parent].key() <= key {
                break;
            }
            self.heap[k] = self.heap[parent];
            k = parent;
        }
        self.heap[k] = entry;
    }

    /// Fills the root's place with `entry`, moved down to its place: the root's content is
    /// dropped (read it first). The entry travels in registers, not read back from the slot
    /// it was just written to, and the least of four children is chosen without a branch
    /// (which of several step ends comes first is as good as random).
    fn sift_down_into(&mut self, entry: Entry) {
        let heap = &mut self.heap[..];
        let n = heap.len();
        let key = entry.key();
        let mut k = 0;
        loop {
            let first = ARITY * k + 1;
            let child = match n.checked_sub(first) {
                Some(children) if children >= ARITY => least_of_four(heap, first),
                Some(children) if children > 0 => least_of(heap, first, n),
                _ => break,
            };
            if heap[child].key() >= key {
                break;
            }
            heap[k] = heap[child];
            k = child;
        }
        heap[k] = entry;
    }
}

/// The index of the least of the four entries from `first`, chosen without a branch.
#[inline(always)]
fn least_of_four(heap: &[Entry], first: usize) -> usize {
    let four = &heap[first..first + ARITY];
    let a = usize::from(four[1].key() < four[0].key());
    let b = 2 + usize::from(four[3].key() < four[2].key());
    let c = if four[b].key() < four[a].key() { b } else { a };
    first + c
}

/// The index of the least entry in `first..end` (fewer than four: the heap's last ones).
fn least_of(heap: &[Entry], first: usize, end: usize) -> usize {
    (first + 1..end).fold(first, |least, k| {
        if heap[k].key() < heap[least].key() {
            k
        } else {
            least
        }
    })
}
