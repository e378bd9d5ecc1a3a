//! The evaluation result of a run (`--evaluation-json PATH`): what a policy-search framework
//! reads of one simulation — its fitness (`--fitness-weights`), the raw metrics behind it,
//! anomaly and outcome counts, a trace summary and the run's identity. The layout is the
//! versioned schema `docs/src/evaluation-schema.json` ([`SCHEMA_VERSION`]).

pub mod identity;

pub use identity::sha256_hex;

use std::path::Path;

use serde_json::{Value, json};

use crate::control::OutcomeReport;
use crate::metrics::{AnomalyCounts, Fitness, FitnessInputs, FitnessWeights, SloReport, Summary};
use crate::output::Finished;
use crate::setup::SimConfig;

/// Version of the evaluation JSON's layout; raised on any change a reader could notice.
pub const SCHEMA_VERSION: u32 = 2;

/// What the evaluation reads from the run's anomaly detector and decision-trace summary,
/// filled by them when present; a run without them reports zero anomalies and no trace
/// summary (`null`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunSignals {
    pub anomalies: AnomalyCounts,
    /// The trace summary as JSON, when the run wrote decision traces.
    pub trace_summary: Option<Value>,
}

/// Everything an evaluation is made of.
pub struct EvaluationInputs<'a> {
    pub config: &'a SimConfig,
    pub summary: &'a Summary,
    pub slo: &'a SloReport,
    pub outcomes: &'a OutcomeReport,
    pub signals: &'a RunSignals,
}

impl EvaluationInputs<'_> {
    /// The run's fitness under `weights` (see [`crate::metrics::Fitness`]).
    pub fn fitness(&self, weights: &FitnessWeights) -> anyhow::Result<Fitness> {
        let inputs = FitnessInputs {
            slo: self.slo.headline(),
            requests: self.outcomes.requests(),
            anomalies: self.signals.anomalies.total(),
        };
        Fitness::of(weights, &inputs)
    }

    /// The evaluation document with fitness `fitness`, the run having taken `wall_time_s`.
    pub fn document(&self, fitness: &Fitness, wall_time_s: f64) -> anyhow::Result<Value> {
        let s = self.summary;
        let per_second = |n: u64| {
            if s.duration_s() > 0.0 {
                n as f64 / s.duration_s()
            } else {
                0.0
            }
        };
        Ok(json!({
            "schema_version": SCHEMA_VERSION,
            "fitness": fitness.to_json(),
            "metrics": {
                "requests": self.outcomes.requests(),
                "completed": s.completed(),
                "duration_s": s.duration_s(),
                "request_throughput": per_second(s.completed()),
                "slo": self.slo.to_json(),
            },
            "anomalies": self.signals.anomalies.to_json(),
            "outcomes": self.outcomes.to_json(),
            "trace_summary": self.signals.trace_summary,
            "autoscale": self.autoscale(),
            "metadata": self.metadata(wall_time_s)?,
        }))
    }

    /// The autoscaling's counts, replica- and GPU-seconds and cost (its summary without the
    /// per-tick series); `null` without autoscaling.
    fn autoscale(&self) -> Value {
        let Some(report) = self.summary.autoscale() else {
            return Value::Null;
        };
        let mut json = report.to_json();
        if let Value::Object(m) = &mut json {
            m.remove("series");
        }
        json
    }

    fn metadata(&self, wall_time_s: f64) -> anyhow::Result<Value> {
        let config = self.config;
        Ok(json!({
            "simulator": "blis-cosim",
            "version": env!("CARGO_PKG_VERSION"),
            "seed": config.seed,
            "simulated_duration_s": self.summary.duration_s(),
            "wall_time_s": wall_time_s,
            "policy": identity::policy(config)?,
            "workload": identity::workload(&config.workload)?,
        }))
    }
}

/// Writes `document` pretty-printed for `path`, to be put in place by [`Finished::commit`].
pub fn prepare(path: &Path, document: &Value) -> anyhow::Result<Finished> {
    crate::output::prepare(path, |out| {
        serde_json::to_writer_pretty(&mut *out, document)?;
        out.write_all(b"\n")
    })
}
