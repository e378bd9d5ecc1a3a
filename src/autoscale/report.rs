//! What an autoscaled run reports: scaling counts, oscillations, time and cost by replica
//! state, and the replicas over time.

use super::fleet::{ReplicaState, ScaleCounts};
use crate::Nanos;
use serde_json::{Map, Value, json};
use std::fmt;

/// One template's replica time by state, and its price.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PoolCost {
    /// The template's name (its model, hardware and TP).
    pub name: String,
    /// GPUs per replica.
    pub gpus: u32,
    /// Price of one GPU-hour.
    pub price_per_gpu_hour: f64,
    /// Time to load a replica's weights.
    pub load_ns: Nanos,
    /// Replica-ns spent in each state, by [`ReplicaState::index`].
    pub replica_ns: [u128; 6],
}

impl PoolCost {
    /// Replica-seconds in `state`.
    pub fn replica_seconds(&self, state: ReplicaState) -> f64 {
        self.replica_ns[state.index()] as f64 / 1e9
    }

    /// GPU-seconds in `state`.
    pub fn gpu_seconds(&self, state: ReplicaState) -> f64 {
        self.replica_seconds(state) * f64::from(self.gpus)
    }

    /// Replica-seconds held (every state but off: a machine is billed from the moment it is
    /// asked for until it is gone).
    pub fn billed_replica_seconds(&self) -> f64 {
        ReplicaState::ALL[1..]
            .iter()
            .map(|&s| self.replica_seconds(s))
            .sum()
    }

    /// GPU-hours held (billed).
    pub fn gpu_hours(&self) -> f64 {
        self.billed_replica_seconds() * f64::from(self.gpus) / 3600.0
    }

    /// Cost of the GPU-time held, in the currency of its price per GPU-hour.
    pub fn cost(&self) -> f64 {
        self.gpu_hours() * self.price_per_gpu_hour
    }
}

/// The replicas at one tick.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaleSample {
    pub t_ns: Nanos,
    /// Replicas in each state, by [`ReplicaState::index`].
    pub replicas: [u32; 6],
    /// Requests routed per second since the previous tick.
    pub arrival_rate: f64,
    /// Mean utilization of the ready replicas, as the policies see it.
    pub utilization: f64,
}

/// The cost of `pools` with its basis: `1.6801 (0.4200 GPU-h x 4 per GPU-h)`; the price is in
/// whatever currency `cost_per_gpu_hour` was given in.
pub fn cost_text(pools: &[PoolCost]) -> String {
    let cost: f64 = pools.iter().map(PoolCost::cost).sum();
    let hours: f64 = pools.iter().map(PoolCost::gpu_hours).sum();
    let first = pools.first().map_or(0.0, |p| p.price_per_gpu_hour);
    if pools.iter().all(|p| p.price_per_gpu_hour == 0.0) {
        format!("0 ({hours:.4} GPU-h; no cost_per_gpu_hour given)")
    } else if pools.iter().all(|p| p.price_per_gpu_hour == first) {
        format!("{cost:.4} ({hours:.4} GPU-h x {first} per GPU-h)")
    } else {
        format!("{cost:.4} ({hours:.4} GPU-h at each template's cost_per_gpu_hour)")
    }
}

/// A replica slot's move to a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateChange {
    pub t_ns: Nanos,
    pub instance: u32,
    pub state: ReplicaState,
}

/// The autoscaling of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoscaleReport {
    pub policy: &'static str,
    pub drain: &'static str,
    pub min_replicas: u32,
    pub max_replicas: u32,
    pub counts: ScaleCounts,
    /// Per template.
    pub pools: Vec<PoolCost>,
    /// One row per tick.
    pub series: Vec<ScaleSample>,
    /// The template of every replica slot (by instance id), its state at time 0, and every
    /// change of state of the run in time order (replayed by [`ReplicaTimeline`]).
    pub slot_pools: Vec<u32>,
    pub initial: Vec<ReplicaState>,
    pub state_changes: Vec<StateChange>,
}

/// The replica slots' states replayed forward in time from an [`AutoscaleReport`]: each
/// slot's state and each template's replicas by state at any instant, instants in
/// increasing order.
#[derive(Debug)]
pub struct ReplicaTimeline<'a> {
    report: &'a AutoscaleReport,
    states: Vec<ReplicaState>,
    /// Per template: replicas in each state, by [`ReplicaState::index`].
    counts: Vec<[u32; 6]>,
    /// The next change not yet applied.
    next: usize,
}

impl<'a> ReplicaTimeline<'a> {
    /// The states at time 0.
    pub fn new(report: &'a AutoscaleReport) -> ReplicaTimeline<'a> {
        let mut counts = vec![[0u32; 6]; report.pools.len()];
        for (&pool, state) in report.slot_pools.iter().zip(&report.initial) {
            counts[pool as usize][state.index()] += 1;
        }
        ReplicaTimeline {
            report,
            states: report.initial.clone(),
            counts,
            next: 0,
        }
    }

    /// Applies every change at or before `t_ns` (a change at exactly `t_ns` has happened).
    pub fn advance_to(&mut self, t_ns: Nanos) {
        let changes = &self.report.state_changes;
        while let Some(c) = changes.get(self.next).filter(|c| c.t_ns <= t_ns) {
            let id = c.instance as usize;
            let pool = self.report.slot_pools[id] as usize;
            self.counts[pool][self.states[id].index()] -= 1;
            self.counts[pool][c.state.index()] += 1;
            self.states[id] = c.state;
            self.next += 1;
        }
    }

    /// Slot `id`'s template.
    pub fn template_of(&self, id: u32) -> u32 {
        self.report.slot_pools[id as usize]
    }

    /// Slot `id`'s state.
    pub fn state(&self, id: u32) -> ReplicaState {
        self.states[id as usize]
    }

    /// Template `pool`'s replicas in `state`.
    pub fn count(&self, pool: u32, state: ReplicaState) -> u32 {
        self.counts[pool as usize][state.index()]
    }
}

impl AutoscaleReport {
    /// Replica-seconds in `state`, over all templates.
    pub fn replica_seconds(&self, state: ReplicaState) -> f64 {
        self.pools.iter().map(|p| p.replica_seconds(state)).sum()
    }

    /// GPU-seconds in `state`, over all templates.
    pub fn gpu_seconds(&self, state: ReplicaState) -> f64 {
        self.pools.iter().map(|p| p.gpu_seconds(state)).sum()
    }

    /// Replica-seconds held (every state but off), over all templates.
    pub fn billed_replica_seconds(&self) -> f64 {
        self.pools
            .iter()
            .map(PoolCost::billed_replica_seconds)
            .sum()
    }

    /// Cost of the GPU-time held, over all templates.
    pub fn cost(&self) -> f64 {
        self.pools.iter().map(PoolCost::cost).sum()
    }

    /// GPU-hours held (billed), over all templates.
    pub fn gpu_hours(&self) -> f64 {
        self.pools.iter().map(PoolCost::gpu_hours).sum()
    }

    /// The cost with its basis, see [`cost_text`].
    pub fn cost_text(&self) -> String {
        cost_text(&self.pools)
    }

    /// The report as JSON (the summary's `autoscale` key).
    pub fn to_json(&self) -> Value {
        let by_state = |f: &dyn Fn(ReplicaState) -> f64| {
            let mut m = Map::new();
            for s in ReplicaState::ALL {
                m.insert(s.name().to_owned(), f(s).into());
            }
            Value::Object(m)
        };
        let c = self.counts;
        let pools: Vec<Value> = self
            .pools
            .iter()
            .map(|p| {
                json!({
                    "template": p.name,
                    "gpus_per_replica": p.gpus,
                    "cost_per_gpu_hour": p.price_per_gpu_hour,
                    "load_s": p.load_ns as f64 / 1e9,
                    "replica_seconds": by_state(&|s| p.replica_seconds(s)),
                    "cost": p.cost(),
                })
            })
            .collect();
        let series: Vec<Value> = self
            .series
            .iter()
            .map(|s| {
                let mut row = Map::new();
                row.insert("t_s".into(), (s.t_ns as f64 / 1e9).into());
                for st in ReplicaState::ALL {
                    row.insert(st.name().to_owned(), s.replicas[st.index()].into());
                }
                row.insert("arrival_rate".into(), s.arrival_rate.into());
                row.insert("utilization".into(), s.utilization.into());
                Value::Object(row)
            })
            .collect();
        json!({
            "policy": self.policy,
            "drain": self.drain,
            "min_replicas": self.min_replicas,
            "max_replicas": self.max_replicas,
            "scale_ups": c.scale_ups,
            "scale_downs": c.scale_downs,
            "replicas_added": c.replicas_added,
            "replicas_removed": c.replicas_removed,
            "scale_oscillations": c.oscillations,
            "dropped_on_drain": c.dropped_on_drain,
            "redirected_on_drain": c.redirected,
            "replica_seconds": by_state(&|s| self.replica_seconds(s)),
            "gpu_seconds": by_state(&|s| self.gpu_seconds(s)),
            "billed_replica_seconds": self.billed_replica_seconds(),
            "cost": self.cost(),
            "templates": pools,
            "series": series,
        })
    }
}

impl fmt::Display for AutoscaleReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.counts;
        writeln!(f, "{:=^50}", " Autoscaling ")?;
        let row = |f: &mut fmt::Formatter<'_>, label: &str, value: String| {
            writeln!(f, "{label:<41}{value:<10}")
        };
        let bounds = format!("{}..{}", self.min_replicas, self.max_replicas);
        row(
            f,
            "Policy / drain:",
            format!("{} / {}", self.policy, self.drain),
        )?;
        row(f, "Replicas per template:", bounds)?;
        row(
            f,
            "Scale-ups / scale-downs:",
            format!("{} / {}", c.scale_ups, c.scale_downs),
        )?;
        let moved = format!("{} / {}", c.replicas_added, c.replicas_removed);
        row(f, "Replicas added / removed:", moved)?;
        row(f, "Scale oscillations:", c.oscillations.to_string())?;
        if c.dropped_on_drain > 0 || c.redirected > 0 {
            let drained = format!("{} / {}", c.dropped_on_drain, c.redirected);
            row(f, "Drain: dropped / redirected:", drained)?;
        }
        for s in &ReplicaState::ALL[1..] {
            let label = format!("Replica-s / GPU-s {}:", s.name());
            let value = format!(
                "{:.1} / {:.1}",
                self.replica_seconds(*s),
                self.gpu_seconds(*s)
            );
            row(f, &label, value)?;
        }
        row(
            f,
            "Billed replica-seconds:",
            format!("{:.1}", self.billed_replica_seconds()),
        )?;
        row(f, "Cost (cost_per_gpu_hour's currency):", self.cost_text())?;
        Ok(())
    }
}
