//! What a scheduler notes for the run's anomaly counters and decision trace, when asked:
//! priority inversions among its admissions, and its admissions and preemptions.

use super::PreemptionOrder;
use crate::Nanos;

/// One scheduling decision of an instance, for the decision trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedDecision {
    /// `request` was admitted from the waiting queue into the step being formed.
    Admit {
        request: u64,
        /// Its priority in the run.
        priority: i32,
        /// Prompt tokens whose KV needed no computing (prefix-cache hits, received KV).
        cached_tokens: u32,
        /// Tokens it computes in this step.
        new_tokens: u32,
        /// Time since it arrived at the cluster, ns.
        waited_ns: Nanos,
        /// Whether it had been preempted before (it is recomputed).
        readmitted: bool,
    },
    /// `request` was preempted: KV blocks ran out while the running requests grew.
    Preempt {
        request: u64,
        /// Its priority in the run.
        priority: i32,
        /// How the victim was chosen.
        policy: PreemptionOrder,
        /// KV blocks it gave back.
        freed_blocks: usize,
    },
}

/// Anomaly detection state of one scheduler.
#[derive(Debug, Default)]
pub(super) struct Watch {
    /// The next queueing sequence number.
    next_seq: u64,
    /// Per nominal urgency among the waiting requests: the smallest sequence number (a
    /// scratch buffer, rebuilt after each step's admissions).
    earliest: Vec<(i32, u64)>,
}

impl Watch {
    /// The sequence number of a request being queued now.
    pub(super) fn next_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// Notes a waiting request (nominal urgency, sequence number) still waiting after the
    /// step's admissions.
    pub(super) fn note_waiting(&mut self, nominal: i32, seq: u64) {
        match self.earliest.iter_mut().find(|e| e.0 == nominal) {
            Some(e) => e.1 = e.1.min(seq),
            None => self.earliest.push((nominal, seq)),
        }
    }

    /// Forgets the waiting requests noted for the previous step.
    pub(super) fn clear_waiting(&mut self) {
        self.earliest.clear();
    }

    /// Whether an admitted request (nominal urgency, sequence number) overtook a strictly
    /// more urgent request queued before it that is still waiting.
    pub(super) fn overtook(&self, nominal: i32, seq: u64) -> bool {
        self.earliest.iter().any(|&(n, s)| n > nominal && s < seq)
    }
}
