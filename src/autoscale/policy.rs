//! The scaling policies: from what one template's replicas look like (an [`Observation`],
//! through the run's stale signals) to the number of replicas they want. Bounds, windows
//! and cooldown are applied afterwards, by the fleet.

use super::config::PolicyKind;
use crate::router::InstanceSnapshot;

/// What a policy sees of one template's replicas at a tick.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Observation {
    /// Replicas ready to serve.
    pub ready: u32,
    /// Replicas on their way (pending, loading, warming up).
    pub starting: u32,
    /// Mean over ready replicas of `max(KV blocks used / total, (running + waiting) /
    /// max_num_seqs)`.
    pub utilization: f64,
    /// Mean waiting requests per ready replica.
    pub queue_per_replica: f64,
    /// KV tokens in use over the ready replicas.
    pub kv_tokens_used: f64,
    /// Waiting requests over the ready replicas.
    pub waiting: f64,
    /// KV tokens of one replica.
    pub kv_tokens_per_replica: f64,
}

impl Observation {
    /// Replicas up or coming up: the count the bounds apply to.
    pub fn current(&self) -> u32 {
        self.ready + self.starting
    }

    /// Adds one ready replica's snapshot (call [`Observation::finish`] after the last).
    pub fn add(&mut self, snap: &InstanceSnapshot) {
        let kv_total = snap.kv_blocks_total.max(1) as f64;
        let kv = snap.kv_blocks_used as f64 / kv_total;
        let seqs = snap.max_num_seqs.map_or(0.0, |m| {
            (snap.running + snap.waiting) as f64 / f64::from(m.max(1))
        });
        self.ready += 1;
        self.utilization += kv.max(seqs);
        self.queue_per_replica += snap.waiting as f64;
        self.waiting += snap.waiting as f64;
        let block = f64::from(snap.block_size);
        self.kv_tokens_used += snap.kv_blocks_used as f64 * block;
        self.kv_tokens_per_replica = kv_total * block;
    }

    /// Turns the sums of [`Observation::add`] into means.
    pub fn finish(&mut self) {
        if self.ready > 0 {
            self.utilization /= f64::from(self.ready);
            self.queue_per_replica /= f64::from(self.ready);
        }
    }
}

/// A policy and the little state it keeps between ticks.
#[derive(Debug, Clone)]
pub struct Policy {
    kind: PolicyKind,
    /// The oscillator's next direction.
    up_next: bool,
}

impl Policy {
    /// A fresh `kind` policy.
    pub fn new(kind: PolicyKind) -> Policy {
        Policy {
            kind,
            up_next: true,
        }
    }

    /// How many replicas (ready and starting) the template wants, before bounds.
    pub fn desired(&mut self, o: &Observation) -> u32 {
        let current = o.current();
        let step = |more: bool, fewer: bool| {
            if more {
                current + 1
            } else if fewer {
                current.saturating_sub(1)
            } else {
                current
            }
        };
        match self.kind {
            PolicyKind::Threshold { up, down } => step(o.utilization > up, o.utilization < down),
            PolicyKind::QueueDepth { up, down } => {
                step(o.queue_per_replica > up, o.queue_per_replica < down)
            }
            PolicyKind::TargetUtilization { target, tolerance } => {
                let ratio = o.utilization / target;
                if (ratio - 1.0).abs() <= tolerance {
                    current
                } else {
                    (f64::from(o.ready) * ratio).ceil() as u32
                }
            }
            PolicyKind::Saturation {
                kv_cache_threshold,
                scale_up_threshold,
                scale_down_boundary,
                avg_input_tokens,
            } => {
                let supply = o.kv_tokens_per_replica * kv_cache_threshold;
                if supply <= 0.0 {
                    return current;
                }
                let required = (o.kv_tokens_used + o.waiting * avg_input_tokens) / supply;
                let need = (required / scale_up_threshold).ceil() as u32;
                if need > current {
                    need
                } else {
                    let fewer = f64::from(current.saturating_sub(1)) * scale_down_boundary;
                    step(false, required < fewer)
                }
            }
            PolicyKind::Oscillator => {
                self.up_next = !self.up_next;
                step(!self.up_next, self.up_next)
            }
        }
    }
}
