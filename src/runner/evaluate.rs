//! The policy-research results of a run: SLO metrics and outcomes into the summary, the
//! fitness (`--fitness-weights`) and the evaluation result (`--evaluation-json`).

use std::time::Instant;

use crate::control::{OutcomeCollector, OutcomeReport};
use crate::evaluation::{EvaluationInputs, RunSignals};
use crate::metrics::{FitnessWeights, SloCollector, SloReport, Summary};
use crate::setup::SimConfig;

/// What the run collected for the research results.
pub(super) struct Collected {
    pub slo: Option<SloCollector>,
    pub outcomes: Option<OutcomeCollector>,
    /// Whether the outcomes go into the summary (a control plane, or timeouts).
    pub show_outcomes: bool,
    /// The anomaly counters and the decision trace's summary.
    pub signals: RunSignals,
    /// When the run started (wall clock).
    pub started: Instant,
}

/// Adds the SLO metrics (when worth reporting), the outcomes (a run with a control plane or
/// timeouts) and the fitness (`--fitness-weights`) to `summary`; returns the evaluation
/// document when `--evaluation-json` asks for one. Writes nothing.
pub(super) fn finish(
    config: &SimConfig,
    collected: Collected,
    summary: &mut Summary,
) -> anyhow::Result<Option<serde_json::Value>> {
    let slo = collected.slo.map(|c| {
        let shown = c.worth_reporting();
        (
            c.finish(summary.duration_s(), &summary.info().instances),
            shown,
        )
    });
    let outcomes = collected.outcomes.map(OutcomeCollector::finish);
    if let Some((report, true)) = &slo {
        summary.set_slo(report.clone());
    }
    if let Some(report) = &outcomes
        && collected.show_outcomes
    {
        summary.set_outcomes(report.clone());
    }
    let evaluation = &config.evaluation;
    let (Some((slo, _)), Some(outcomes)) = (slo, outcomes) else {
        return Ok(None);
    };
    if !evaluation.requested() {
        return Ok(None);
    }
    let document = evaluate(
        config,
        summary,
        &slo,
        &outcomes,
        &collected.signals,
        collected.started,
    )?;
    Ok(document)
}

/// The fitness into `summary` (with `--fitness-weights`) and the evaluation document (with
/// `--evaluation-json`).
fn evaluate(
    config: &SimConfig,
    summary: &mut Summary,
    slo: &SloReport,
    outcomes: &OutcomeReport,
    signals: &RunSignals,
    started: Instant,
) -> anyhow::Result<Option<serde_json::Value>> {
    let evaluation = &config.evaluation;
    let weights = evaluation
        .weights
        .clone()
        .unwrap_or_else(FitnessWeights::default_weights);
    let inputs = EvaluationInputs {
        config,
        summary,
        slo,
        outcomes,
        signals,
    };
    let fitness = inputs.fitness(&weights)?;
    let document = match &evaluation.json {
        Some(_) => Some(inputs.document(&fitness, started.elapsed().as_secs_f64())?),
        None => None,
    };
    if evaluation.weights.is_some() {
        summary.set_fitness(fitness);
    }
    Ok(document)
}
