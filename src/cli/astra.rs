//! The network co-simulation flags of the main job ([`CosimOptions`] as flags).

use super::choices::choices;
use crate::astra::{ASTRA_SIM_ENV, AstraMode, CosimOptions, DEFAULT_TIMEOUT_S, NetworkBackend};
use crate::config::{Bound, Problem};
use clap::Args;
use std::path::PathBuf;

/// Flags of the ASTRA-Sim network co-simulation.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Network co-simulation (ASTRA-Sim)")]
pub struct AstraArgs {
    /// ASTRA-Sim binary: the LLMServingSim fork's `AnalyticalAstra` (or, with --astra-mode
    /// stock, `AstraSim_Analytical_Congestion_Unaware`). Default: $BLIS_COSIM_ASTRA_SIM.
    #[arg(long, value_name = "PATH")]
    pub astra_sim: Option<PathBuf>,

    /// Network backend: astra (co-simulate with ASTRA-Sim) or analytical [default: astra when
    /// an ASTRA-Sim binary is given, else analytical].
    #[arg(long, value_name = "BACKEND", value_parser = choices::<NetworkBackend>())]
    pub network_backend: Option<NetworkBackend>,

    /// How ASTRA-Sim is driven: fork (the LLMServingSim fork's interactive protocol, one
    /// process for the run) or stock (stock ASTRA-Sim 2.0, one process per distinct batch)
    /// [default: fork].
    #[arg(long, value_name = "MODE", value_parser = choices::<AstraMode>())]
    pub astra_mode: Option<AstraMode>,

    #[arg(long, value_name = "SECS", value_parser = parse_timeout, help = format!(
        "Seconds to wait for ASTRA-Sim to finish one batch before killing it [default: {}]",
        DEFAULT_TIMEOUT_S
    ))]
    pub astra_timeout: Option<f64>,

    /// Send every batch to ASTRA-Sim, even one whose trace was already priced.
    #[arg(long)]
    pub no_memo: bool,

    /// Keep the generated ASTRA-Sim inputs (configs, traces) and print their directory.
    #[arg(long)]
    pub keep_astra_inputs: bool,

    /// Send ASTRA-Sim one COMP node per layer (the traces --emit-et writes) instead of lean
    /// traces, whose consecutive compute layers are one node; the times are the same.
    #[arg(long)]
    pub astra_detailed_traces: bool,

    /// Your own ASTRA-Sim network.yml (topology, npus_count, bandwidth, latency; one entry per
    /// dimension) instead of the one generated from the cluster config or hardware.
    #[arg(long, value_name = "PATH")]
    pub network_config: Option<PathBuf>,
}

impl From<AstraArgs> for CosimOptions {
    fn from(a: AstraArgs) -> CosimOptions {
        CosimOptions {
            astra_sim: a.astra_sim,
            network_backend: a.network_backend,
            astra_mode: a.astra_mode,
            astra_timeout: a.astra_timeout,
            no_memo: a.no_memo,
            keep_astra_inputs: a.keep_astra_inputs,
            astra_detailed_traces: a.astra_detailed_traces,
            network_config: a.network_config,
        }
    }
}

/// The ASTRA-Sim binary `$BLIS_COSIM_ASTRA_SIM` names, if set and not empty.
pub fn binary_from_env() -> Option<PathBuf> {
    std::env::var_os(ASTRA_SIM_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn parse_timeout(s: &str) -> Result<f64, Problem> {
    Bound::positive_up_to(1e6, "s").parse(s)
}
