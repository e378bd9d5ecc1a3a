//! The analytical roofline backend.

use super::{BatchDesc, LatencyBackend, LatencyError, LayerTiming};
use crate::Nanos;
use crate::config::{Dtype, Hardware, ModelArch};

/// Prices each layer as `max(FLOPs / (peak × eff), bytes / (bw × eff)) + launch overhead`,
/// with ring all-reduces after `o_proj` and `down_proj` when `tp > 1`.
#[derive(Debug, Clone)]
pub struct Roofline {}

impl Roofline {
    /// A roofline for `model` on `hardware` with tensor parallelism `tp` and weights in `dtype`.
    pub fn new(model: &ModelArch, hardware: &Hardware, tp: u32, dtype: Dtype) -> Roofline {
        todo!("{model:?}{hardware:?}{tp}{dtype}")
    }
}

impl LatencyBackend for Roofline {
    fn name(&self) -> &'static str {
        "roofline"
    }

    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        todo!("{batch:?}")
    }

    fn breakdown(&mut self, batch: &BatchDesc<'_>) -> Result<Vec<LayerTiming>, LatencyError> {
        todo!("{batch:?}")
    }
}
