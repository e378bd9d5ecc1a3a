//! The host model's settings: whether steps include vLLM's host side, and vLLM's compilation
//! settings that decide how each step is executed.

use super::InstanceConfig;
use crate::config::ConfigError;
use crate::latency::{CudaGraphMode, GraphOptions, GraphPolicy};

/// Where an instance's engine settings come from.
const EITHER: &str = "command line or cluster config";

/// The host model's settings: whether steps include vLLM's host side, and vLLM's
/// compilation settings (see the flags' help).
#[derive(Debug, Clone, PartialEq)]
pub struct HostOptions {
    /// Step times include the host side (`--host-model on`).
    pub host_model: bool,
    /// vLLM's `--enforce-eager`.
    pub enforce_eager: bool,
    /// vLLM's `compilation_config.cudagraph_mode`.
    pub cudagraph_mode: CudaGraphMode,
    /// vLLM's `cudagraph_capture_sizes`; `None`: vLLM's default list.
    pub cudagraph_capture_sizes: Option<Vec<u32>>,
    /// vLLM's `max_cudagraph_capture_size`; `None`: `min(2 × max-num-seqs, 512)`.
    pub max_cudagraph_capture_size: Option<u32>,
}

impl Default for HostOptions {
    /// The host model on, vLLM 0.19's default compilation settings.
    fn default() -> Self {
        HostOptions {
            host_model: true,
            enforce_eager: false,
            cudagraph_mode: CudaGraphMode::FullAndPiecewise,
            cudagraph_capture_sizes: None,
            max_cudagraph_capture_size: None,
        }
    }
}

impl HostOptions {
    /// Gives every instance that runs without ASTRA-Sim, on a GPU, its execution policy when
    /// the host model is on (resolved against its own scheduler limits); one on a TPU, the
    /// host's CPU work before each step ([`InstanceConfig::program_host`]).
    pub fn assign(&self, instances: &mut [InstanceConfig]) -> Result<(), ConfigError> {
        if !self.host_model {
            return Ok(());
        }
        let options = GraphOptions {
            enforce_eager: self.enforce_eager,
            mode: self.cudagraph_mode,
            capture_sizes: self.cudagraph_capture_sizes.clone(),
            max_capture_size: self.max_cudagraph_capture_size,
        };
        // A TPU's step is one compiled XLA program: no CUDA graphs or kernel launches, the
        // host's CPU work before it.
        for inst in instances.iter_mut() {
            inst.program_host = inst.astra.is_none() && inst.hardware.is_tpu();
        }
        let modelled = |i: &&mut InstanceConfig| i.astra.is_none() && !i.hardware.is_tpu();
        for inst in instances.iter_mut().filter(modelled) {
            if let Some(config) = &inst.sglang {
                let policy = super::sglang::graph_policy(config)
                    .map_err(|p| ConfigError::invalid(EITHER, "cuda_graph_max_bs", p))?;
                inst.host_model = Some(policy);
                continue;
            }
            let s = &inst.scheduler;
            let policy = GraphPolicy::resolve(
                &inst.graph_overrides.apply(&options),
                s.max_num_seqs.unwrap_or(0),
                s.max_num_batched_tokens,
            )
            .map_err(|p| ConfigError::invalid(EITHER, "cudagraph_capture_sizes", p))?;
            inst.host_model = Some(policy);
        }
        Ok(())
    }
}
