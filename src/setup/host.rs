//! The host-model flags: whether steps include vLLM's host side, and vLLM's compilation
//! settings that decide how each step is executed.

use super::InstanceConfig;
use crate::config::ConfigError;
use crate::latency::{CudaGraphMode, GraphOptions, GraphPolicy};
use clap::{Args, ValueEnum};

/// Whether the host model is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HostModelSwitch {
    /// Step times include the host side: CUDA-graph modes, kernel launches, CPU step work.
    On,
    /// Step times are the latency backend's GPU time alone (LLMServingSim's step times).
    Off,
}

/// The host-model flags of the main command.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Host model (vLLM's execution of a step)")]
pub struct HostArgs {
    /// The host side of each step (CUDA-graph mode, kernel launches, CPU step work; see the
    /// guide's host-model section): on, or off for the latency backend's GPU time alone
    /// (LLMServingSim's step times). Not applied under ASTRA-Sim.
    #[arg(long, value_name = "on|off", default_value = "on")]
    pub host_model: HostModelSwitch,

    /// vLLM's --enforce-eager: no compilation and no CUDA graphs; every op is launched
    /// eagerly (host model).
    #[arg(long)]
    pub enforce_eager: bool,

    /// vLLM's compilation_config.cudagraph_mode: NONE, PIECEWISE, FULL, FULL_DECODE_ONLY or
    /// FULL_AND_PIECEWISE (host model).
    #[arg(long, value_name = "MODE", default_value = "FULL_AND_PIECEWISE")]
    pub cudagraph_mode: CudaGraphMode,

    /// vLLM's cudagraph_capture_sizes, comma-separated token counts [default: 1, 2, 4, then
    /// multiples of 8 below 256 and of 16 up to --max-cudagraph-capture-size].
    #[arg(long, value_name = "N,N,...", value_delimiter = ',')]
    pub cudagraph_capture_sizes: Option<Vec<u32>>,

    /// vLLM's max_cudagraph_capture_size [default: min(2 × max-num-seqs, 512)].
    #[arg(long, value_name = "N")]
    pub max_cudagraph_capture_size: Option<u32>,
}

impl Default for HostArgs {
    /// The host model on, vLLM 0.19's default compilation settings: the flags' defaults.
    fn default() -> Self {
        HostArgs {
            host_model: HostModelSwitch::On,
            enforce_eager: false,
            cudagraph_mode: CudaGraphMode::FullAndPiecewise,
            cudagraph_capture_sizes: None,
            max_cudagraph_capture_size: None,
        }
    }
}

impl HostArgs {
    /// Gives every instance that runs without ASTRA-Sim its execution policy when the host
    /// model is on (resolved against its own scheduler limits).
    pub fn assign(&self, instances: &mut [InstanceConfig]) -> Result<(), ConfigError> {
        if self.host_model == HostModelSwitch::Off {
            return Ok(());
        }
        let options = GraphOptions {
            enforce_eager: self.enforce_eager,
            mode: self.cudagraph_mode,
            capture_sizes: self.cudagraph_capture_sizes.clone(),
            max_capture_size: self.max_cudagraph_capture_size,
        };
        for inst in instances.iter_mut().filter(|i| i.astra.is_none()) {
            let s = &inst.scheduler;
            let policy = GraphPolicy::resolve(
                &inst.graph_overrides.apply(&options),
                s.max_num_seqs.unwrap_or(0),
                s.max_num_batched_tokens,
            )
            .map_err(|message| ConfigError::Invalid {
                source_name: "command line or cluster config".into(),
                field: "cudagraph_capture_sizes".into(),
                message,
            })?;
            inst.host_model = Some(policy);
        }
        Ok(())
    }
}
