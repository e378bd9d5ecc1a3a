//! The host side of a step that runs as one compiled program whose result the host waits for:
//! vLLM's TPU path.
//!
//! vLLM's TPU model runner (`vllm/v1/worker/tpu_model_runner.py`, vLLM 0.9) prepares the
//! step's inputs on the host, runs the compiled program and then copies the sampled tokens
//! back (`selected_token_ids.cpu()`; tpu-inference 0.12, the runner vLLM 0.13 loads on a TPU:
//! `jax.device_get(next_tokens)`), which blocks until the device is done: the engine's CPU
//! work of a step (scheduling, input preparation, output processing) and the program do not
//! overlap. There are no kernel launches or CUDA graphs to price ([`super::HostModel`]'s issue
//! pipeline): a step costs its CPU work, `step_cpu_ns + seq_cpu_ns × requests` of the part's
//! `[host]` numbers, then the compute backend's time.

use super::LatencyBackend;
use crate::Nanos;
use crate::config::HostSpec;
use crate::latency::{BatchDesc, LatencyError, LayerTiming, StepParts};

/// Name of the CPU work's entry in a step's breakdown.
pub const PROGRAM_HOST_ENTRY: &str = "host_cpu (before the program)";

/// A compute backend whose steps follow the host's CPU work (see the module docs).
pub struct ProgramHost {
    inner: Box<dyn LatencyBackend>,
    host: HostSpec,
}

impl ProgramHost {
    /// `inner`'s steps, each after the CPU work of `host`.
    pub fn new(inner: Box<dyn LatencyBackend>, host: HostSpec) -> ProgramHost {
        ProgramHost { inner, host }
    }

    /// The host's CPU work before a step of `batch`'s requests, ns (rounded).
    fn cpu_ns(&self, batch: &BatchDesc<'_>) -> Nanos {
        let requests = batch.items.len() as f64;
        (self.host.step_cpu_ns + self.host.seq_cpu_ns * requests).round() as Nanos
    }
}

impl LatencyBackend for ProgramHost {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        let program = self.inner.step_time(batch)?;
        Ok(program.saturating_add(self.cpu_ns(batch)))
    }

    /// The compute backend's layers, then the host's CPU work.
    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        self.inner.layer_times(batch, out)?;
        out.push(LayerTiming {
            name: PROGRAM_HOST_ENTRY,
            repeats: 1,
            time_ns: self.cpu_ns(batch),
            is_comm: true,
        });
        Ok(())
    }

    /// The compute backend's parts, the CPU work counted before the first block.
    fn step_parts(&mut self, batch: &BatchDesc<'_>) -> Result<StepParts, LatencyError> {
        let parts = self.inner.step_parts(batch)?;
        Ok(StepParts {
            prologue_ns: parts.prologue_ns.saturating_add(self.cpu_ns(batch)),
            ..parts
        })
    }

    fn inner(&self) -> Option<&dyn LatencyBackend> {
        Some(&*self.inner)
    }

    fn inner_mut(&mut self) -> Option<&mut dyn LatencyBackend> {
        Some(&mut *self.inner)
    }
}
