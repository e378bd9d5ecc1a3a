//! `--emit-et`: the execution traces of a run's first steps, for inspection or for feeding
//! ASTRA-Sim by hand.

use std::fs;
use std::path::PathBuf;

use anyhow::Context;

use super::stages::encode_stages;
use super::{BatchTrace, Dialect, npu_file};
use crate::config::{Dtype, ModelArch, Placement};
use crate::latency::{BatchDesc, LatencyBackend};

/// What `--emit-et` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmitEt {
    /// Root folder; step `k` goes to `dir/step<k>/llm.<npu>.et`.
    pub dir: PathBuf,
    /// How many steps, from the first, get files.
    pub limit: u64,
    /// Dialect of the files.
    pub dialect: Dialect,
}

/// Writes the trace of each of the first [`EmitEt::limit`] steps of a run, one file per TP
/// rank (per rank of every stage, cut into stages as [`super::stages`] does, on a pipelined
/// instance), built from the run's latency backend ([`BatchTrace`]).
#[derive(Debug)]
pub struct StepEmitter {
    settings: EmitEt,
    model: ModelArch,
    tp: u32,
    ep: u32,
    dtype: Dtype,
    placement: Option<Placement>,
    /// The blocks of each pipeline stage (empty without pipelining).
    stage_blocks: Vec<u32>,
    /// Steps seen so far (the index of the next step).
    steps: u64,
}

impl StepEmitter {
    /// An emitter for a run of `model` at tensor parallelism `tp` and expert parallelism
    /// `ep` in `dtype`, with the weights where `placement` keeps them (`None`: on the GPU),
    /// in pipeline stages of `stage_blocks` blocks (empty, or one stage: no pipelining).
    pub fn new(
        settings: EmitEt,
        model: &ModelArch,
        (tp, ep): (u32, u32),
        dtype: Dtype,
        placement: Option<&Placement>,
        stage_blocks: &[u32],
    ) -> StepEmitter {
        StepEmitter {
            settings,
            model: model.clone(),
            tp,
            ep,
            dtype,
            placement: placement.cloned(),
            stage_blocks: if stage_blocks.len() > 1 {
                stage_blocks.to_vec()
            } else {
                Vec::new()
            },
            steps: 0,
        }
    }

    /// Records one finished step; while under the limit, writes its files, pricing the batch
    /// again with `backend.breakdown`.
    pub fn step_finished(
        &mut self,
        batch: &BatchDesc<'_>,
        backend: &mut dyn LatencyBackend,
    ) -> anyhow::Result<()> {
        let step = self.steps;
        self.steps += 1;
        if step >= self.settings.limit {
            return Ok(());
        }
        let dir = self.settings.dir.join(format!("step{step}"));
        fs::create_dir_all(&dir).with_context(|| format!("--emit-et: {}", dir.display()))?;
        let breakdown = backend.breakdown(batch)?;
        let trace = BatchTrace {
            batch,
            model: &self.model,
            tp: self.tp,
            ep: self.ep,
            dtype: self.dtype,
            breakdown: &breakdown,
            involved_dim: None,
            placement: self.placement.as_ref(),
            ep_involved_dim: None,
        };
        let prefix = dir.join("llm");
        if self.stage_blocks.is_empty() {
            trace
                .write(&prefix, self.settings.dialect)
                .with_context(|| format!("--emit-et: step {step}"))?;
            return Ok(());
        }
        let files = encode_stages(&trace, &self.stage_blocks, 0, self.settings.dialect)
            .with_context(|| format!("--emit-et: step {step}"))?;
        for (npu, bytes) in (0..).zip(&files) {
            let path = npu_file(&prefix, npu);
            fs::write(&path, bytes).with_context(|| format!("--emit-et: {}", path.display()))?;
        }
        Ok(())
    }
}
