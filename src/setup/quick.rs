//! The quick cluster of BLIS's command line (`--num-instances N`, `--pd P:D`): instances of
//! one model on one hardware, all on one node linked by the hardware's own link, written as
//! the LLMServingSim cluster config they are, so that they are deployed exactly as that file
//! would be (roles, KV links of prefill/decode hand-offs, placement).

use crate::config::{ConfigError, Hardware};
use serde_json::json;

/// How many instances a deployment without a cluster config has, in which roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// One colocated instance (the default).
    #[default]
    Single,
    /// `n` colocated instances (`--num-instances`).
    Colocated(u32),
    /// Prefill and decode instances (`--pd PREFILL:DECODE`).
    Disaggregated { prefill: u32, decode: u32 },
}

impl Layout {
    /// The flag that asked for this layout.
    pub fn flag(self) -> &'static str {
        match self {
            Layout::Disaggregated { .. } => "--pd",
            _ => "--num-instances",
        }
    }
}

/// The cluster config of `layout`: instances of `model` on `hardware` at TP `tp`, on one
/// node whose link is the hardware's (bandwidth and latency), host memory as LLMServingSim's
/// examples give it (512 GB at 256 GB/s).
pub fn cluster_text(
    model: &str,
    hardware: &str,
    tp: u32,
    layout: Layout,
) -> Result<String, ConfigError> {
    let hw = Hardware::resolve(hardware)?;
    let roles: Vec<Option<&str>> = match layout {
        Layout::Single => vec![None],
        Layout::Colocated(n) => vec![None; n as usize],
        Layout::Disaggregated { prefill, decode } => {
            let mut roles = vec![Some("prefill"); prefill as usize];
            roles.extend(vec![Some("decode"); decode as usize]);
            roles
        }
    };
    let instances: Vec<serde_json::Value> = (roles.iter())
        .map(|role| {
            json!({
                "model_name": model, "hardware": hardware, "num_npus": tp, "tp_size": tp,
                "pd_type": role,
                "npu_mem": {"mem_size": hw.memory_gib, "mem_bw": hw.memory_bw_gbps, "mem_latency": 0},
            })
        })
        .collect();
    let node = json!({
        "num_instances": instances.len(),
        "cpu_mem": {"mem_size": 512, "mem_bw": 256, "mem_latency": 0},
        "instances": instances,
    });
    let config = json!({
        "num_nodes": 1, "link_bw": hw.link_bw_gbps, "link_latency": hw.link_latency_ns,
        "nodes": [node],
    });
    Ok(config.to_string())
}
