//! The power model's inputs: every node's `power` block of the cluster config (LLMServingSim
//! models power only when every node has one) and the interval of the power series
//! (`--log-interval`).

use super::InstanceConfig;
use crate::Nanos;
use crate::config::{
    Bound, ClusterConfig, ConfigError, NpuPower, PlacedInstance, PowerSpec, Problem,
};

/// The power model's inputs, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerConfig {
    /// Each node's `power` block, by node id.
    pub nodes: Vec<PowerSpec>,
    /// Each node's host memory (`cpu_mem.mem_size`), GB: its DRAM DIMM count.
    pub cpu_mem_gb: Vec<f64>,
    /// Each instance's NPU power (its hardware's entry on its node), by instance id.
    pub npus: Vec<NpuPower>,
    /// Interval of the power series, ns.
    pub interval_ns: Nanos,
}

/// The power model of `cluster`, whose instances are `placed` and resolved as `instances`
/// (`source` names it in messages), or `None` when some node has no `power` block (with a
/// warning when others have one).
///
/// On a node whose instances offload decode attention to PIM, the DRAM DIMMs are the PIM
/// channels at the PIM memory's idle power (LLMServingSim overrides `dram.dimm_size` and
/// `dram.idle_power` from the PIM INI); elsewhere both keys are required.
pub(super) fn resolve(
    cluster: &ClusterConfig,
    placed: &[PlacedInstance<'_>],
    instances: &[InstanceConfig],
    log_interval_s: f64,
    source: &str,
) -> Result<Option<PowerConfig>, ConfigError> {
    if cluster.power_partial() {
        log::warn!(
            "{source}: some nodes have a `power` block and others do not; power modelling is \
             off (it needs a block on every node)"
        );
    }
    let Some(nodes) = cluster.power() else {
        return Ok(None);
    };
    let mut specs: Vec<PowerSpec> = nodes.iter().map(|&p| p.clone()).collect();
    for (n, spec) in specs.iter_mut().enumerate() {
        let pim = placed
            .iter()
            .zip(instances)
            .filter(|(p, _)| p.node_id as usize == n)
            .find_map(|(_, inst)| inst.pim.as_ref());
        if let Some(pim) = pim {
            spec.dram.dimm_size = Some(pim.device.channel_gib);
            spec.dram.idle_power = Some(pim.device.idle_power_w);
            continue;
        }
        for (key, value) in [
            ("dimm_size", spec.dram.dimm_size),
            ("idle_power", spec.dram.idle_power),
        ] {
            if value.is_none() {
                let problem = Problem::missing_for(
                    "it may be left out only when the node's instances offload attention to \
                     PIM, which takes it from the PIM INI",
                );
                let field = format!("nodes[{n}].power.dram.{key}");
                return Err(ConfigError::invalid(source, field, problem));
            }
        }
    }
    Ok(Some(PowerConfig {
        nodes: specs,
        cpu_mem_gb: cluster.nodes.iter().map(|n| n.cpu_mem.mem_size).collect(),
        // The config check found an entry for every instance's hardware.
        npus: placed
            .iter()
            .map(|p| nodes[p.node_id as usize].npu[&p.spec.hardware])
            .collect(),
        interval_ns: (log_interval_s * 1e9).round() as Nanos,
    }))
}

/// Parses `--log-interval`: positive seconds, at least 1 ns.
pub fn parse_log_interval(s: &str) -> Result<f64, Problem> {
    Bound::NotBelow {
        low: 1e-9,
        unit: "s",
    }
    .parse(s)
}
