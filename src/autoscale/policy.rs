//! The scaling policies: from what one template's replicas look like (an [`Observation`],
//! through the run's stale signals) to the number of replicas they want. Bounds, windows
//! and cooldown are applied afterwards, by the fleet.

use super::config::AutoscalePolicy;
use crate::router::InstanceSnapshot;

/// What a policy sees of one template's replicas at a tick.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Observation {
    /// Replicas ready to serve.
    pub ready: u32,
    /// Replicas on their way (pending, loading, warming up).
    pub starting: u32,
    /// Mean over ready replicas of `max(KV blocks used / total, (running + waiting) /
    /// max_num_seqs)`, plus the hand-offs held for the pool spread over them (below).
    pub utilization: f64,
    /// Mean waiting requests per ready replica (one if none), held hand-offs included.
    pub queue_per_replica: f64,
    /// KV tokens in use over the ready replicas.
    pub kv_tokens_used: f64,
    /// Waiting requests over the ready replicas, held hand-offs included.
    pub waiting: f64,
    /// KV tokens of one replica.
    pub kv_tokens_per_replica: f64,
    /// A decode pool's demand not yet on any of its replicas: requests prefilled and
    /// waiting for a ready replica of it (their KV held on the prefill side).
    pub held_handoffs: f64,
    /// `max_num_seqs` of one replica (`None`: unlimited).
    pub max_num_seqs: Option<u32>,
    /// Mean over the ready replicas that have finished a request of their recent TTFT and
    /// TPOT (moving averages), ms (0 when none has), and how many such replicas.
    pub recent_ttft_ms: f64,
    pub recent_tpot_ms: f64,
    pub ttft_measured: u32,
    pub tpot_measured: u32,
    /// With an `slo` attainment window: the requests finished on the pool within it, and
    /// how many of them met every target.
    pub window_finished: u32,
    pub window_met: u32,
}

impl Observation {
    /// Replicas up or coming up: the count the bounds apply to.
    pub fn current(&self) -> u32 {
        self.ready + self.starting
    }

    /// Notes a replica's size (KV tokens, sequences), known whatever its state.
    pub fn size(&mut self, snap: &InstanceSnapshot) {
        self.kv_tokens_per_replica =
            snap.kv_blocks_total.max(1) as f64 * f64::from(snap.block_size);
        self.max_num_seqs = snap.max_num_seqs;
    }

    /// Adds one ready replica's snapshot (call [`Observation::finish`] after the last).
    pub fn add(&mut self, snap: &InstanceSnapshot) {
        let kv = snap.kv_utilization();
        let seqs = snap.max_num_seqs.map_or(0.0, |m| {
            (snap.running + snap.waiting) as f64 / f64::from(m.max(1))
        });
        self.ready += 1;
        self.utilization += kv.max(seqs);
        self.queue_per_replica += snap.waiting as f64;
        self.waiting += snap.waiting as f64;
        self.kv_tokens_used += snap.kv_blocks_used as f64 * f64::from(snap.block_size);
        if snap.recent_ttft_ns > 0 {
            self.recent_ttft_ms += snap.recent_ttft_ns as f64 / 1e6;
            self.ttft_measured += 1;
        }
        if snap.recent_tpot_ns > 0 {
            self.recent_tpot_ms += snap.recent_tpot_ns as f64 / 1e6;
            self.tpot_measured += 1;
        }
        self.size(snap);
    }

    /// Turns the sums of [`Observation::add`] into means, the held hand-offs counted as
    /// waiting requests spread evenly over the ready replicas (one if none): each adds 1 to
    /// the waiting count, `1 / ready` to the queue per replica and `1 / (ready ×
    /// max_num_seqs)` to the utilization (0 when the sequences are unlimited, as for a
    /// queued request).
    pub fn finish(&mut self) {
        let replicas = f64::from(self.ready.max(1));
        let held = self.held_handoffs;
        self.waiting += held;
        self.queue_per_replica = (self.queue_per_replica + held) / replicas;
        let held_seqs = self
            .max_num_seqs
            .map_or(0.0, |m| held / f64::from(m.max(1)));
        self.utilization = (self.utilization + held_seqs) / replicas;
        self.recent_ttft_ms /= f64::from(self.ttft_measured.max(1));
        self.recent_tpot_ms /= f64::from(self.tpot_measured.max(1));
    }

    /// The highest of the recent TTFT and TPOT over their targets (ms; 0: none), among the
    /// metrics measured and targeted; `None` without any.
    pub fn slo_pressure(&self, ttft_target_ms: f64, tpot_target_ms: f64) -> Option<f64> {
        let ratio = |v: f64, n: u32, target: f64| (n > 0 && target > 0.0).then(|| v / target);
        let ttft = ratio(self.recent_ttft_ms, self.ttft_measured, ttft_target_ms);
        let tpot = ratio(self.recent_tpot_ms, self.tpot_measured, tpot_target_ms);
        ttft.into_iter().chain(tpot).reduce(f64::max)
    }

    /// The share of the requests finished in the attainment window that met their targets;
    /// `None` when none finished in it.
    pub fn attainment(&self) -> Option<f64> {
        (self.window_finished > 0)
            .then(|| f64::from(self.window_met) / f64::from(self.window_finished))
    }

    /// The misses in the attainment window over the share `target_attainment` allows:
    /// `(1 − attainment) / (1 − target_attainment)`; `None` when nothing finished in it.
    pub fn miss_pressure(&self, target_attainment: f64) -> Option<f64> {
        self.attainment()
            .map(|a| (1.0 - a) / (1.0 - target_attainment))
    }
}

/// A policy and the little state it keeps between ticks.
#[derive(Debug, Clone)]
pub struct Policy {
    kind: AutoscalePolicy,
    /// The oscillator's next direction.
    up_next: bool,
}

impl Policy {
    /// A fresh `kind` policy.
    pub fn new(kind: AutoscalePolicy) -> Policy {
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
        match &self.kind {
            AutoscalePolicy::Threshold(p) => step(
                o.utilization > p.scale_up_threshold,
                o.utilization < p.scale_down_threshold,
            ),
            AutoscalePolicy::QueueDepth(p) => step(
                o.queue_per_replica > p.scale_up_queue_depth,
                o.queue_per_replica < p.scale_down_queue_depth,
            ),
            AutoscalePolicy::TargetUtilization(p) => {
                let ratio = o.utilization / p.target_utilization;
                if (ratio - 1.0).abs() <= p.tolerance {
                    current
                } else {
                    (f64::from(o.ready.max(1)) * ratio).ceil() as u32
                }
            }
            AutoscalePolicy::Saturation(p) => {
                let supply = o.kv_tokens_per_replica * p.kv_cache_threshold;
                // With no ready replica, held hand-offs are the only demand it can judge.
                if supply <= 0.0 || (o.ready == 0 && o.held_handoffs == 0.0) {
                    return current;
                }
                let required = (o.kv_tokens_used + o.waiting * p.avg_input_tokens) / supply;
                let need = (required / p.scale_up_threshold).ceil() as u32;
                if need > current {
                    need
                } else {
                    let fewer = f64::from(current.saturating_sub(1)) * p.scale_down_boundary;
                    step(false, required < fewer)
                }
            }
            AutoscalePolicy::Slo(p) => match if p.window_ms > 0.0 {
                o.miss_pressure(p.target_attainment)
            } else {
                o.slo_pressure(p.ttft_target_ms, p.tpot_target_ms)
            } {
                Some(x) if x > p.scale_up_ratio => {
                    let want = (f64::from(o.ready.max(1)) * x / p.scale_up_ratio).ceil() as u32;
                    want.max(current)
                }
                Some(x) if x < p.scale_down_ratio => current.saturating_sub(1),
                _ => current,
            },
            AutoscalePolicy::Oscillator => {
                self.up_next = !self.up_next;
                step(!self.up_next, self.up_next)
            }
        }
    }
}
