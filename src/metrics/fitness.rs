//! Fitness: one number in [0, 1] that ranks a run, a weighted mean of named metrics each
//! normalised so that higher is better and its value lies in [0, 1]
//! (`--fitness-weights metric=w,...`).
//!
//! The metrics ([`METRICS`]); `requests` counts every request of the workload, served or not:
//! - `attainment`: share of the completed requests with SLO targets that met every one;
//! - `goodput`: goodput over the offered load, i.e. requests that met every target over
//!   `requests` (a dropped request offered load and earned nothing);
//! - `completion`: completed over `requests` (1 − the share rejected, shed or expired);
//! - `ttft_p99`, `tpot_p99`, `itl_p99`, `e2e_p99`: `1 / (1 + p99 / reference)`, 1 at zero
//!   latency, ½ at the reference: the reference is the run's target on that metric
//!   (`--slo-ttft`, `--slo-tpot` for TPOT and ITL, `--slo-e2e`) when given, else
//!   [`REFERENCE_MS`] (TTFT 1 s, TPOT and ITL 100 ms, E2E 10 s);
//! - `jain_tokens`, `jain_attainment`: Jain's index over tenants of the tokens served and of
//!   the attainments (1 for a single tenant);
//! - `prefix_hit_rate`: prefix-cache hit tokens over looked-up prompt tokens (0 without
//!   caching);
//! - `preemption_free`: `1 / (1 + preemptions per completed request)`;
//! - `anomaly_free`: `1 / (1 + anomalies per request)` (the anomaly counters' total).
//!
//! Fitness is `Σ wᵢ·mᵢ / Σ wᵢ`: weights are finite and non-negative, at least one positive.
//! `attainment`, `goodput` and `jain_attainment` need SLO targets: weighting one in a run
//! whose requests have none is an error.

use std::fmt;

use serde_json::{Map, Value, json};

use super::slo::SloHeadline;

/// Every metric a fitness can weigh, in report order.
pub const METRICS: [&str; 12] = [
    "attainment",
    "goodput",
    "completion",
    "ttft_p99",
    "tpot_p99",
    "itl_p99",
    "e2e_p99",
    "jain_tokens",
    "jain_attainment",
    "prefix_hit_rate",
    "preemption_free",
    "anomaly_free",
];

/// References of the latency metrics without a target, ms: TTFT, TPOT, ITL, E2E.
pub const REFERENCE_MS: [f64; 4] = [1000.0, 100.0, 100.0, 10_000.0];

/// The weights used when an evaluation is asked for without `--fitness-weights`.
pub const DEFAULT_WEIGHTS: &str = "completion=1,ttft_p99=1,e2e_p99=1";

/// What is wrong with `--fitness-weights`; each message names the entry or the metric.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FitnessError {
    /// An entry without `=`.
    #[error("`{entry}`: expected metric=weight")]
    NotPair { entry: String },
    /// A metric none of [`METRICS`].
    #[error("unknown metric `{name}` (valid: {})", METRICS.join(", "))]
    UnknownMetric { name: String },
    /// A weight that is no number.
    #[error("`{entry}`: the weight is not a number")]
    NotNumber { entry: String },
    /// A weight negative or not finite.
    #[error("`{entry}`: weights must be finite and ≥ 0")]
    BadWeight { entry: String },
    /// A metric named twice.
    #[error("metric `{name}` is given twice")]
    Twice { name: String },
    /// Every weight 0.
    #[error("at least one weight must be positive")]
    AllZero,
}

/// Weights of named metrics, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub struct FitnessWeights(Vec<(&'static str, f64)>);

impl FitnessWeights {
    /// Parses `metric=w,...`; the error says which entry is wrong and lists the metrics.
    pub fn parse(text: &str) -> Result<FitnessWeights, FitnessError> {
        let mut weights: Vec<(&'static str, f64)> = Vec::new();
        for entry in text.split(',').map(str::trim) {
            let (name, weight) = entry.split_once('=').ok_or_else(|| FitnessError::NotPair {
                entry: entry.to_owned(),
            })?;
            let name = name.trim();
            let metric = METRICS.iter().find(|m| **m == name).ok_or_else(|| {
                FitnessError::UnknownMetric {
                    name: name.to_owned(),
                }
            })?;
            let w: f64 = weight.trim().parse().map_err(|_| FitnessError::NotNumber {
                entry: entry.to_owned(),
            })?;
            if !w.is_finite() || w < 0.0 {
                return Err(FitnessError::BadWeight {
                    entry: entry.to_owned(),
                });
            }
            if weights.iter().any(|(m, _)| m == metric) {
                return Err(FitnessError::Twice {
                    name: name.to_owned(),
                });
            }
            weights.push((metric, w));
        }
        if weights.iter().all(|&(_, w)| w == 0.0) {
            return Err(FitnessError::AllZero);
        }
        Ok(FitnessWeights(weights))
    }

    /// The weights used when none are given ([`DEFAULT_WEIGHTS`]).
    pub fn default_weights() -> FitnessWeights {
        FitnessWeights::parse(DEFAULT_WEIGHTS).expect("valid default weights")
    }

    /// The named weights, in the order given.
    pub fn weights(&self) -> &[(&'static str, f64)] {
        &self.0
    }
}

/// What a fitness is computed from.
#[derive(Debug, Clone, Copy)]
pub struct FitnessInputs {
    /// The SLO metrics of the run.
    pub slo: SloHeadline,
    /// Every request of the workload, served or not.
    pub requests: u64,
    /// Anomalies detected over the run (all counters).
    pub anomalies: u64,
}

/// One weighted metric of a fitness.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FitnessTerm {
    pub metric: &'static str,
    pub weight: f64,
    /// The normalised metric, in [0, 1].
    pub value: f64,
    /// `weight · value / Σ weights`: the terms add up to the fitness.
    pub contribution: f64,
}

/// A run's fitness and its terms.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitness {
    pub total: f64,
    pub terms: Vec<FitnessTerm>,
}

/// `count / of`, 0 when `of` is 0.
fn share(count: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        count as f64 / of as f64
    }
}

/// `1 / (1 + value / reference)`.
fn closeness(value: f64, reference: f64) -> f64 {
    1.0 / (1.0 + value / reference)
}

/// The value of `metric` in [0, 1]; `None` for a metric that needs SLO targets the run lacks.
pub fn normalised(metric: &str, x: &FitnessInputs) -> Option<f64> {
    let s = &x.slo;
    let [ttft_ref, tpot_ref, itl_ref, e2e_ref] = REFERENCE_MS;
    let t = s.targets;
    Some(match metric {
        "attainment" => s.attainment?,
        "goodput" => s.attainment.map(|_| share(s.attained, x.requests))?,
        "completion" => share(s.completed, x.requests),
        "ttft_p99" => closeness(s.ttft_p99_ms, t.ttft_ms.unwrap_or(ttft_ref)),
        "tpot_p99" => closeness(s.tpot_p99_ms, t.tpot_ms.unwrap_or(tpot_ref)),
        "itl_p99" => closeness(s.itl_p99_ms, t.tpot_ms.unwrap_or(itl_ref)),
        "e2e_p99" => closeness(s.e2e_p99_ms, t.e2e_ms.unwrap_or(e2e_ref)),
        "jain_tokens" => s.jain_tokens,
        "jain_attainment" => s.jain_attainment?,
        "prefix_hit_rate" => s.prefix_hit_rate.unwrap_or(0.0),
        "preemption_free" => 1.0 / (1.0 + s.preemption_rate),
        "anomaly_free" => 1.0 / (1.0 + share(x.anomalies, x.requests)),
        other => unreachable!("metric `{other}` is not in METRICS"),
    })
}

impl Fitness {
    /// The fitness of a run with `inputs` under `weights`; fails when a weighted metric needs
    /// SLO targets the run's requests lack.
    pub fn of(weights: &FitnessWeights, inputs: &FitnessInputs) -> anyhow::Result<Fitness> {
        let sum: f64 = weights.0.iter().map(|&(_, w)| w).sum();
        let mut terms = Vec::with_capacity(weights.0.len());
        for &(metric, weight) in &weights.0 {
            let value = normalised(metric, inputs).ok_or_else(|| {
                anyhow::anyhow!(
                    "--fitness-weights: metric `{metric}` needs SLO targets, and no request \
                     of the run has one (--slo-ttft/--slo-tpot/--slo-e2e, the policy \
                     bundle's slo_targets or --slo-targets, or the workload's)"
                )
            })?;
            let contribution = weight * value / sum;
            terms.push(FitnessTerm {
                metric,
                weight,
                value,
                contribution,
            });
        }
        // Σ w·v ≤ Σ w term by term, and rounding keeps the order: the total stays ≤ 1.
        let total = terms.iter().map(|t| t.weight * t.value).sum::<f64>() / sum;
        Ok(Fitness { total, terms })
    }

    /// As JSON: `total` and `terms`, each metric's `weight`, `value` and `contribution`.
    pub fn to_json(&self) -> Value {
        let terms: Map<String, Value> = self
            .terms
            .iter()
            .map(|t| {
                let term =
                    json!({"weight": t.weight, "value": t.value, "contribution": t.contribution});
                (t.metric.to_owned(), term)
            })
            .collect();
        json!({"total": self.total, "terms": terms})
    }
}

impl fmt::Display for Fitness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{:=^50}", " Fitness ")?;
        writeln!(
            f,
            "{:<16} {:>8} {:>8} {:>13}",
            "metric", "weight", "value", "contribution"
        )?;
        for t in &self.terms {
            writeln!(
                f,
                "{:<16} {:>8} {:>8.4} {:>13.4}",
                t.metric, t.weight, t.value, t.contribution
            )?;
        }
        writeln!(
            f,
            "Fitness:                                 {:<10.4}",
            self.total
        )
    }
}
