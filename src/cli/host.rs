//! The host-model flags ([`HostOptions`] as flags).

use crate::latency::CudaGraphMode;
use crate::setup::HostOptions;
use clap::{Args, ValueEnum};

/// Whether the host model is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HostModelSwitch {
    /// Step times include the host side: CUDA-graph modes, kernel launches, CPU step work.
    On,
    /// Step times are the latency backend's GPU time alone (LLMServingSim's step times).
    Off,
}

impl HostModelSwitch {
    /// The switch of `on`.
    fn of(on: bool) -> HostModelSwitch {
        if on {
            HostModelSwitch::On
        } else {
            HostModelSwitch::Off
        }
    }
}

/// The host-model flags of the main command.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Host model (vLLM's execution of a step)")]
pub struct HostArgs {
    /// The host side of each step (CUDA-graph mode, kernel launches, CPU step work; on a TPU,
    /// the CPU step work before its program; see the guide's host-model section): on, or off
    /// for the latency backend's GPU time alone (LLMServingSim's step times). Not applied
    /// under ASTRA-Sim.
    #[arg(long, value_name = "on|off", value_enum,
          default_value_t = HostModelSwitch::of(HostOptions::default().host_model))]
    pub host_model: HostModelSwitch,

    /// vLLM's --enforce-eager: no compilation and no CUDA graphs; every op is launched
    /// eagerly (host model).
    #[arg(long)]
    pub enforce_eager: bool,

    /// vLLM's compilation_config.cudagraph_mode: NONE, PIECEWISE, FULL, FULL_DECODE_ONLY or
    /// FULL_AND_PIECEWISE (host model).
    #[arg(long, value_name = "MODE", default_value_t = HostOptions::default().cudagraph_mode)]
    pub cudagraph_mode: CudaGraphMode,

    /// vLLM's cudagraph_capture_sizes, comma-separated token counts [default: 1, 2, 4, then
    /// multiples of 8 below 256 and of 16 up to --max-cudagraph-capture-size].
    #[arg(long, value_name = "N,N,...", value_delimiter = ',')]
    pub cudagraph_capture_sizes: Option<Vec<u32>>,

    /// vLLM's max_cudagraph_capture_size [default: min(2 × max-num-seqs, 512)].
    #[arg(long, value_name = "N")]
    pub max_cudagraph_capture_size: Option<u32>,
}

impl From<HostArgs> for HostOptions {
    fn from(a: HostArgs) -> HostOptions {
        HostOptions {
            host_model: a.host_model == HostModelSwitch::On,
            enforce_eager: a.enforce_eager,
            cudagraph_mode: a.cudagraph_mode,
            cudagraph_capture_sizes: a.cudagraph_capture_sizes,
            max_cudagraph_capture_size: a.max_cudagraph_capture_size,
        }
    }
}
