//! The decision trace's summary (`--summarize-trace`), kept as the trace goes: records by
//! kind, where the router sent requests, the regret of its decisions and the worst of them,
//! and the gateway queue's depth and waits.

use super::{Decision, Kind};
use crate::Nanos;
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
        if self.gateway.note(decision) {
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
        Ok(())
    }
}
