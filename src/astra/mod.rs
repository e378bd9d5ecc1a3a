//! Network co-simulation with ASTRA-Sim, as LLMServingSim 2.0 does it.
//!
//! - [`AstraArgs`]: the main job's flags; [`AstraArgs::resolve`] turns them, with the
//!   instance's numbers ([`InstanceNetwork`], from the cluster config or the hardware file),
//!   into [`AstraOptions`], or `None` for the analytical network backend.
//! - [`NetworkConfig`]: `network.yml`, generated or read from `--network-config`;
//!   [`system_json`] and [`memory_json`]: the other inputs, from the templates in
//!   `astra-sim-configs/`; [`AstraInputs`]: the run directory holding them.
//! - [`AstraBackend`]: the [`LatencyBackend`](crate::latency::LatencyBackend) that prices each
//!   step with ASTRA-Sim, with memoisation, over the fork's interactive protocol or one stock
//!   process per batch.
//! - [`protocol`]: the lines parsed from ASTRA-Sim's output.
//! - [`AstraError`]: faults (missing binary, crash, stall, runaway or unparseable output), each
//!   naming the step and quoting ASTRA-Sim's last lines; the process is always killed and
//!   reaped and the run directory removed.
//!
//! **Several instances.** A cluster of colocated instances (no DP groups) runs one
//! [`AstraBackend`] per instance: its own ASTRA-Sim
//! process, run directory and memo table, with inputs generated from that instance's numbers
//! ([`InstanceNetwork::for_cluster`], [`AstraArgs::resolve_instances`]). The network model
//! driven here is ASTRA-Sim's congestion-unaware analytical one and colocated instances
//! exchange no traffic, so one process per instance prices every step as one process holding
//! all of the cluster's NPUs would: a batch's time depends only on its own trace and on the
//! links and memories of its own instance. Expert parallelism inside an instance is part of
//! its trace (the MoE dispatch and combine collectives).
//!
//! **Prefill/decode instances.** A decode instance runs colocated-style traces in its own
//! process. A prefill instance of TP `t` runs in a process of `2t` NPUs: its TP NPUs and their
//! KV receivers, NPU `r + t` for rank `r`, LLMServingSim's phantom receivers standing for the
//! decode side, one hop away over the link LLMServingSim's cluster network puts between them
//! ([`prefill_network`]: dimensions `[t, 2]`; collectives scoped to dimension 0). Its traces
//! ([`crate::chakra::prefill`]) send each layer's KV after `qkv_proj` and the sampler output to
//! the receivers, whose files hold the matching RECVs; the end NPU is the last receiver, so a
//! batch ends once the KV has arrived, and the engine hands its requests to their decode
//! instances then, adding no transfer time of its own. Phantom receivers rather than the
//! decode instance's NPUs in a shared process: that is what LLMServingSim simulates, and on the
//! congestion-unaware network a RECV occupies neither compute nor the receiver's communication
//! slot, so the decode NPUs would receive at the same instants while running their own batches.
//!
//! **Pipeline parallelism.** A pipelined instance (`pp > 1`) runs in a process of its
//! `tp · pp` NPUs ([`pipeline_network`]), its steps' traces cut into stages
//! ([`crate::chakra::stages`]); the backend reports each stage's busy time and the engine's
//! pipeline keeps up to `pp` steps in flight (see [`AstraBackend`]'s documentation for the
//! timing contract). A MoE model's DP group of pipelined members runs in its group's process
//! ([`AstraGroup`], network `[tp, pp, members]`), which reports the group's stage times.
//!
//! **DP groups.** The members of a MoE model's DP group meet at every MoE collective, so a
//! group runs in one process holding all of its members' NPUs: [`AstraGroup`] prices a whole
//! wave (every member's padded batch as its own NPUs' `.et` files, network `[tp, members]`,
//! [`group_network`]; TP all-reduces on dimension 0 and EP collectives on the group's
//! `ep_dim`, [`group_dims`]), one start NPU (and end NPU) per member, and returns each
//! member's step time. The engine calls it through its
//! [`WavePricer`](crate::engine::WavePricer) seam instead of the members' own backends, which
//! then price compute only. A group of prefill instances also holds its members' KV receivers,
//! one dimension further (`[tp, members, 2]`). A dense model's DP group has no lock step: its
//! members run as colocated instances, a process each.

mod args;
pub mod backend;
mod error;
mod fork;
mod group;
mod inputs;
pub mod lines;
mod network;
mod options;
mod pd;
pub mod process;
pub mod protocol;
pub mod stock;

pub use args::{ASTRA_SIM_ENV, CosimOptions, DEFAULT_TIMEOUT_S, InstanceNetwork, NetworkBackend};
pub use backend::{AstraBackend, AstraInstance, AstraStats};
pub use error::{
    AstraError, Ended, Fault, IoFault, NoStageFinish, ParseError, ProtocolError, Refusal,
    ShapeError, Stage, StepError, WriteError,
};
pub use group::{AstraGroup, AstraGroupSpec, group_dims, group_network};
pub use inputs::{
    AstraInputs, CxlParams, DEFAULT_HOST_MEM_BW_GBPS, DEFAULT_HOST_MEM_LATENCY_NS, MEMORY_TEMPLATE,
    MemoryParams, NETWORK_TEMPLATE, REMOTE_MEMORY_TEMPLATE, STOCK_MIN_MEM_LATENCY_NS,
    SYSTEM_TEMPLATE, memory_json, system_json,
};
pub use network::{NetworkConfig, NetworkDim, Topology};
pub use options::{AstraMode, AstraOptions, OutputLimits};
pub use pd::{pipeline_network, prefill_network};

use process::AstraProcess;

/// The startup line naming the network backend (printed on stderr by the main job).
pub fn describe(options: Option<&AstraOptions>) -> String {
    match options {
        None => "network backend: analytical (collectives priced by the latency backend)".into(),
        Some(o) => format!(
            "network backend: astra (ASTRA-Sim {} mode, {}; memo {})",
            o.mode,
            o.binary.display(),
            if o.memo { "on" } else { "off" }
        ),
    }
}

/// The end-of-run line of the ASTRA-Sim backend (printed on stderr by the main job).
pub fn report_line(stats: &AstraStats) -> String {
    format!(
        "ASTRA-Sim: {} steps, {} ASTRA-Sim calls, {} memo hits ({:.1}% of steps), {:.3} s in \
         ASTRA-Sim",
        stats.steps,
        stats.calls,
        stats.memo_hits,
        100.0 * stats.memo_hits as f64 / stats.steps.max(1) as f64,
        stats.wall.as_secs_f64()
    )
}
