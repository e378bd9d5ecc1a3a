//! Each instance's `placement` (cluster config), checked against its model and the cluster's
//! `cxl_mem`, with the memories its weights stream from.

use super::InstanceConfig;
use crate::config::{
    ClusterConfig, ConfigError, PlacedInstance, Placement, PlacementContext, Problem,
};
use crate::latency::WeightMemory;

/// An instance's placement and the memories it names.
#[derive(Debug, Clone, PartialEq)]
pub struct InstancePlacement {
    /// The resolved rules.
    pub placement: Placement,
    /// The instance's node's host memory (`cpu_mem`).
    pub cpu: WeightMemory,
    /// The cluster's CXL memory and its device count, if any.
    pub cxl: Option<(WeightMemory, u32)>,
}

impl InstancePlacement {
    /// Whether some weights stream from host or CXL memory every step.
    pub fn streams_weights(&self) -> bool {
        self.placement.weights_off_gpu()
    }
}

/// Parses the `placement` of every instance that has one into its
/// [`InstanceConfig::placement`]. `instances` are `placed`'s, in the same order.
pub(super) fn assign(
    config: &ClusterConfig,
    placed: &[PlacedInstance<'_>],
    instances: &mut [InstanceConfig],
    source: &str,
) -> Result<(), ConfigError> {
    let cxl = config.cxl_mem.as_ref().map(|m| {
        (
            WeightMemory {
                bandwidth_gbps: m.mem_bw,
                latency_ns: m.mem_latency,
            },
            m.num_devices.unwrap_or(1),
        )
    });
    for (p, inst) in placed.iter().zip(instances.iter_mut()) {
        let Some(value) = &p.spec.placement else {
            continue;
        };
        let at = format!("{}.placement", p.path);
        let placement = Placement::parse(
            value,
            &PlacementContext {
                source,
                at: &at,
                num_blocks: inst.model.num_layers,
                cxl_devices: cxl.map(|(_, n)| n),
            },
        )?;
        if inst.pp > 1 && placement.weights_off_gpu() {
            let problem = Problem::unsupported(
                format!(
                    "weights outside the GPU of an instance with pp_size {}",
                    inst.pp
                ),
                Some("weights off the GPU need pp_size 1"),
            );
            return Err(ConfigError::invalid(source, at, problem));
        }
        let cpu_mem = &config.nodes[p.node_id as usize].cpu_mem;
        inst.placement = Some(InstancePlacement {
            placement,
            cpu: WeightMemory {
                bandwidth_gbps: cpu_mem.mem_bw,
                latency_ns: cpu_mem.mem_latency,
            },
            cxl,
        });
    }
    Ok(())
}
