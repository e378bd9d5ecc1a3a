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
//!
//! Under asynchronous scheduling (vLLM 0.19 with tpu-inference 0.32: `UniProcExecutor`
//! supports it, and the runner copies the tokens back with `jax.copy_to_host_async`) the host
//! prepares a step while the previous program runs: a step formed as the previous one ends
//! pays only the CPU work the previous program did not cover, `max(0, cpu − program)`; a step
//! after an idle gap pays it all.

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
    async_scheduling: bool,
    /// The program time of the step priced last, ns: what the next step's CPU work can hide
    /// behind under asynchronous scheduling.
    last_program: Option<Nanos>,
    /// The CPU work the step priced last paid, ns (its breakdown's host entry).
    last_exposed: Nanos,
}

impl ProgramHost {
    /// `inner`'s steps, each after the CPU work of `host`, prepared while the previous step
    /// runs if `async_scheduling`.
    pub fn new(inner: Box<dyn LatencyBackend>, host: HostSpec, async_scheduling: bool) -> Self {
        ProgramHost {
            inner,
            host,
            async_scheduling,
            last_program: None,
            last_exposed: 0,
        }
    }

    /// The CPU work a step of `batch` waits for: all of it, unless the host prepared the step
    /// during the previous program (asynchronous scheduling, formed back to back).
    fn exposed_ns(&self, batch: &BatchDesc<'_>) -> Nanos {
        let cpu = self.cpu_ns(batch);
        match self.last_program {
            Some(program) if self.async_scheduling && batch.back_to_back => {
                cpu.saturating_sub(program)
            }
            _ => cpu,
        }
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
        self.last_exposed = self.exposed_ns(batch);
        self.last_program = Some(program);
        Ok(program.saturating_add(self.last_exposed))
    }

    /// The compute backend's layers, then the CPU work the step priced last paid (reports
    /// re-read a step after pricing it).
    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        self.inner.layer_times(batch, out)?;
        out.push(LayerTiming {
            name: PROGRAM_HOST_ENTRY,
            repeats: 1,
            time_ns: self.last_exposed,
            is_comm: true,
        });
        Ok(())
    }

    /// The compute backend's parts, the CPU work counted before the first block (all of it:
    /// a pipelined instance has steps in flight whatever the scheduling).
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
