//! Unit tests of `blis_cosim::engine::cluster`.
mod effects;
mod streamed_ahead;
mod tests;

use blis_cosim::Nanos;
use blis_cosim::engine::Observer;
use blis_cosim::latency::{BatchDesc, LatencyBackend, LatencyError, LayerTiming};
use blis_cosim::metrics::RequestRecord;

/// A test backend whose step costs `fixed` ns plus `per_token` a token and `per_seq` a
/// sequence, reported as one layer.
#[derive(Debug, Clone, Copy)]
struct Affine {
    fixed: Nanos,
    per_token: Nanos,
    per_seq: Nanos,
}

impl LatencyBackend for Affine {
    fn name(&self) -> &'static str {
        "affine"
    }

    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        let seqs = batch.items.len() as Nanos;
        Ok(self.fixed + self.per_token * batch.total_tokens() + self.per_seq * seqs)
    }

    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        crate::cluster_fixture::whole_step(self.step_time(batch)?, out);
        Ok(())
    }
}

/// Every finished request's record with its inter-token gaps listed (the CSV's `itl`
/// column), and no step.
#[derive(Default)]
struct Listed(Vec<String>);

impl Observer for Listed {
    fn request_finished(&mut self, r: &RequestRecord<'_>) -> anyhow::Result<()> {
        self.0.push(format!("{r:?}"));
        Ok(())
    }

    fn wants_itl_values(&self) -> bool {
        true
    }

    fn wants_steps(&self) -> bool {
        false
    }
}
