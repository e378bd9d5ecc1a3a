//! The decision trace's summary (`--summarize-trace`), kept as the trace goes: records by
//! kind, where the router sent requests, the regret of its decisions and the worst of them,
//! the gateway queue's depth and waits, the admission delays, and the autoscaler's actions
//! and replica states.

use super::{Decision, Kind};
use crate::Nanos;
use crate::autoscale::ReplicaState;
use crate::router::RouteDecision;
use serde_json::{Value, json};
use std::fmt;

/// How many of the worst routing decisions the summary lists.
pub const WORST_DECISIONS: usize = 10;

/// One routing decision among the worst.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Regretted {
    /// Its record's place in the trace.
    pub seq: u64,
    pub t: Nanos,
    pub request: u64,
    pub chosen: u32,
    /// The best candidate.
    pub best: u32,
    pub regret: f64,
}

/// The summary of a decision trace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceSummary {
    /// Records, by kind ([`Kind::ALL`] order).
    counts: [u64; Kind::ALL.len()],
    /// Requests routed to each instance, by id.
    targets: Vec<u64>,
    /// Routing decisions with an explanation, and the sum and maximum of their regrets.
    scored: u64,
    regret_sum: f64,
    regret_max: f64,
    /// The worst routing decisions: highest regret first, earliest first among equals.
    worst: Vec<Regretted>,
    /// The gateway queue.
    gateway: GatewayStats,
    /// Admission delays, and the requests delayed at least once.
    delays: u64,
    delayed_requests: u64,
    /// The autoscaler.
    scaling: ScalingStats,
}

/// The autoscaler as its trace records show it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScalingStats {
    /// Scaling actions up and down.
    pub scale_ups: u64,
    pub scale_downs: u64,
    /// Replica changes into each state, by [`ReplicaState::index`].
    pub entered: [u64; 6],
}

impl ScalingStats {
    /// Notes an autoscaler record; false for any other.
    fn note(&mut self, decision: &Decision<'_>) -> bool {
        match *decision {
            Decision::Scale(a) if a.up => self.scale_ups += 1,
            Decision::Scale(_) => self.scale_downs += 1,
            Decision::Replica { to, .. } => self.entered[to.index()] += 1,
            _ => return false,
        }
        true
    }

    fn to_json(self) -> Value {
        let entered: serde_json::Map<String, Value> = ReplicaState::ALL
            .iter()
            .map(|s| (s.name().to_owned(), self.entered[s.index()].into()))
            .collect();
        json!({"scale_ups": self.scale_ups, "scale_downs": self.scale_downs,
               "replicas_entered": entered})
    }
}

/// The gateway queue as its trace records show it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GatewayStats {
    /// Requests queued and dispatched.
    pub enqueued: u64,
    pub dispatched: u64,
    /// Most requests queued at once.
    pub max_depth: usize,
    /// Sum and maximum of the dispatched requests' waits, ns.
    pub wait_sum_ns: u128,
    pub max_wait_ns: Nanos,
}

impl GatewayStats {
    /// Notes a gateway record; false for any other.
    fn note(&mut self, decision: &Decision<'_>) -> bool {
        match *decision {
            Decision::GatewayEnqueue { depth, .. } => {
                self.enqueued += 1;
                self.max_depth = self.max_depth.max(depth);
            }
            Decision::GatewayDispatch { waited_ns, .. } => {
                self.dispatched += 1;
                self.wait_sum_ns += u128::from(waited_ns);
                self.max_wait_ns = self.max_wait_ns.max(waited_ns);
            }
            _ => return false,
        }
        true
    }

    /// Mean wait of the dispatched requests, ns (0 without any).
    pub fn mean_wait_ns(&self) -> f64 {
        if self.dispatched == 0 {
            0.0
        } else {
            self.wait_sum_ns as f64 / self.dispatched as f64
        }
    }

    fn to_json(self) -> Value {
        json!({
            "enqueued": self.enqueued,
            "dispatched": self.dispatched,
            "max_depth": self.max_depth,
            "mean_wait_ns": self.mean_wait_ns(),
            "max_wait_ns": self.max_wait_ns,
        })
    }
}

impl TraceSummary {
    /// Counts record `seq`, `decision`.
    pub fn note(&mut self, seq: u64, decision: &Decision<'_>) {
        let kind = decision.kind();
        self.counts[Kind::ALL.iter().position(|&k| k == kind).unwrap_or(0)] += 1;
        if self.gateway.note(decision) || self.scaling.note(decision) {
            return;
        }
        if let Decision::AdmissionDelay { attempt, .. } = *decision {
            self.delays += 1;
            self.delayed_requests += u64::from(attempt == 1);
            return;
        }
        let Decision::Routing {
            t,
            request,
            decision: RouteDecision::To(chosen),
            explanation,
        } = *decision
        else {
            return;
        };
        let i = chosen as usize;
        if self.targets.len() <= i {
            self.targets.resize(i + 1, 0);
        }
        self.targets[i] += 1;
        let Some(ex) = explanation else { return };
        let regret = ex.regret();
        self.scored += 1;
        self.regret_sum += regret;
        self.regret_max = self.regret_max.max(regret);
        let entry = Regretted {
            seq,
            t,
            request,
            chosen,
            best: ex.best().instance,
            regret,
        };
        self.keep_if_worst(entry);
    }

    /// Keeps `entry` among the [`WORST_DECISIONS`] worst if it is one of them (a decision
    /// without regret never is).
    fn keep_if_worst(&mut self, entry: Regretted) {
        if entry.regret <= 0.0 {
            return;
        }
        // Sorted by regret, descending; a later decision goes after its equals.
        let at = self.worst.partition_point(|w| w.regret >= entry.regret);
        if at < WORST_DECISIONS {
            if self.worst.len() == WORST_DECISIONS {
                self.worst.pop();
            }
            self.worst.insert(at, entry);
        }
    }

    /// Records of `kind`.
    pub fn count(&self, kind: Kind) -> u64 {
        self.counts[Kind::ALL.iter().position(|&k| k == kind).unwrap_or(0)]
    }

    /// Requests routed to each instance, by id.
    pub fn targets(&self) -> &[u64] {
        &self.targets
    }

    /// Mean regret over the explained routing decisions (0 without any).
    pub fn mean_regret(&self) -> f64 {
        if self.scored == 0 {
            0.0
        } else {
            self.regret_sum / self.scored as f64
        }
    }

    /// Largest regret of a routing decision.
    pub fn max_regret(&self) -> f64 {
        self.regret_max
    }

    /// The worst routing decisions, worst first.
    pub fn worst(&self) -> &[Regretted] {
        &self.worst
    }

    /// The gateway queue's counts, depth and waits.
    pub fn gateway(&self) -> GatewayStats {
        self.gateway
    }

    /// Admission delays, and the requests delayed at least once.
    pub fn admission_delays(&self) -> (u64, u64) {
        (self.delays, self.delayed_requests)
    }

    /// The autoscaler's actions and replica changes.
    pub fn scaling(&self) -> ScalingStats {
        self.scaling
    }

    /// The summary as the summary JSON's `trace_summary` object.
    pub fn to_json(&self) -> Value {
        let by_kind: serde_json::Map<String, Value> = Kind::ALL
            .iter()
            .map(|&k| (k.name().to_owned(), self.count(k).into()))
            .collect();
        let worst: Vec<Value> = self
            .worst
            .iter()
            .map(|w| {
                json!({"seq": w.seq, "t": w.t, "request": w.request, "chosen": w.chosen,
                       "best": w.best, "regret": w.regret})
            })
            .collect();
        json!({
            "records": self.counts.iter().sum::<u64>(),
            "by_kind": by_kind,
            "targets": self.targets,
            "routing_decisions_scored": self.scored,
            "mean_regret": self.mean_regret(),
            "max_regret": self.max_regret(),
            "worst": worst,
            "gateway": self.gateway.to_json(),
            "admission_delays": {"delays": self.delays, "requests_delayed": self.delayed_requests},
            "autoscaler": self.scaling.to_json(),
        })
    }
}

/// The console section.
impl fmt::Display for TraceSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{:=^50}", " Decision trace ")?;
        let records: u64 = self.counts.iter().sum();
        writeln!(f, "{:<40} {:<10}", "Records:", records)?;
        for &k in &Kind::ALL {
            let n = self.count(k);
            if n > 0 {
                writeln!(f, "{:<40} {:<10}", format!("  {}:", k.name()), n)?;
            }
        }
        for (id, n) in self.targets.iter().enumerate() {
            writeln!(f, "{:<40} {:<10}", format!("Routed to instance {id}:"), n)?;
        }
        writeln!(
            f,
            "{:<40} {:<10.4}",
            "Mean routing regret:",
            self.mean_regret()
        )?;
        writeln!(
            f,
            "{:<40} {:<10.4}",
            "Max routing regret:",
            self.max_regret()
        )?;
        for w in &self.worst {
            writeln!(
                f,
                "  seq {} t={} ns request {}: chose {}, best {}, regret {:.4}",
                w.seq, w.t, w.request, w.chosen, w.best, w.regret
            )?;
        }
        let g = &self.gateway;
        if g.enqueued > 0 {
            writeln!(f, "{:<40} {:<10}", "Gateway queue max depth:", g.max_depth)?;
            let mean_ms = g.mean_wait_ns() / 1e6;
            writeln!(
                f,
                "{:<40} {:<10.4}",
                "Gateway queue mean wait (ms):", mean_ms
            )?;
            let max_ms = g.max_wait_ns as f64 / 1e6;
            writeln!(f, "{:<40} {:<10.4}", "Gateway queue max wait (ms):", max_ms)?;
        }
        if self.delays > 0 {
            writeln!(f, "{:<40} {:<10}", "Admission delays:", self.delays)?;
            let n = self.delayed_requests;
            writeln!(f, "{:<40} {:<10}", "Requests delayed at admission:", n)?;
        }
        self.fmt_scaling(f)
    }
}

impl TraceSummary {
    /// The autoscaler's lines, when it acted or replicas changed state.
    fn fmt_scaling(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.scaling;
        if s.scale_ups + s.scale_downs + s.entered.iter().sum::<u64>() == 0 {
            return Ok(());
        }
        writeln!(f, "{:<40} {:<10}", "Autoscaler scale-ups:", s.scale_ups)?;
        writeln!(f, "{:<40} {:<10}", "Autoscaler scale-downs:", s.scale_downs)?;
        for state in ReplicaState::ALL {
            let n = s.entered[state.index()];
            if n > 0 {
                let what = format!("  replicas entering {}:", state.name());
                writeln!(f, "{what:<40} {n:<10}")?;
            }
        }
        Ok(())
    }
}
