//! ASTRA-Sim co-simulation of DP groups: the network of each group's one ASTRA-Sim process.
//!
//! The members of a MoE model's DP group share one process ([`crate::astra::AstraGroup`]),
//! whose network LLMServingSim lays out as `[tp, members]` with the links of the cluster's
//! dimensions 0 and 1, or `[tp, pp, members]` with pipelined members. A dense model's DP group has no lock-step members (`dp_group` is
//! `None` on them): each member keeps its own process, like any colocated instance.

use super::InstanceConfig;
use crate::astra::{CosimOptions, group_network};
use crate::config::{ClusterLinks, ConfigError, InstanceRole, Link};

/// Refuses `--network-config` with a DP group under ASTRA-Sim: one file cannot be both the
/// network of the group's process and that of the other instances.
pub(super) fn refuse_network_config(
    astra: &CosimOptions,
    instances: &[InstanceConfig],
) -> Result<(), ConfigError> {
    if astra.network_config.is_some() && instances.iter().any(|i| i.dp_group.is_some()) {
        return Err(super::network_config_refused(
            "DP groups under ASTRA-Sim".into(),
            "each group's network is [tp, members], over the cluster config's links,",
        ));
    }
    Ok(())
}

/// Gives each member of a DP group, under ASTRA-Sim, its group's network: `[tp, members]`,
/// with the links its expert parallelism runs over (dimension 0 inside a member, dimension 1
/// across the members: the cluster config's `link_bw`/`link_latency` of those dimensions);
/// with pipelined members `[tp, pp, members]`, the stage dimension over the link the
/// members' pipeline sends over. A group of prefill instances has its KV receivers one
/// dimension further, over the link LLMServingSim's cluster network puts between a prefill
/// instance and its receivers.
pub(super) fn group_networks(instances: &mut [InstanceConfig], links: Option<&ClusterLinks>) {
    let sizes: Vec<u32> = instances
        .iter()
        .map(|inst| {
            inst.dp_group.map_or(0, |g| {
                instances.iter().filter(|i| i.dp_group == Some(g)).count() as u32
            })
        })
        .collect();
    // Each prefill member's receiver link. It is the same for every member of a group: the
    // members share tp_size, so in LLMServingSim's numbering each member's receivers sit as
    // far from it, across the same dimension.
    let receivers: Vec<Option<Link>> = instances
        .iter()
        .enumerate()
        .map(
            |(id, inst)| match (inst.dp_group, &inst.astra, inst.role, links) {
                (Some(_), Some(_), InstanceRole::Prefill, Some(links)) => {
                    Some(links.receiver_link(id, inst.tp))
                }
                _ => None,
            },
        )
        .collect();
    for ((inst, members), receiver) in instances.iter_mut().zip(sizes).zip(receivers) {
        let (Some(_), Some(options)) = (inst.dp_group, &mut inst.astra) else {
            continue;
        };
        // The instance's own network has the dimension-0 link.
        let own = options.network.dims[0];
        let (bw, latency) = match inst.collectives.ep.link {
            Some(net) => (
                [net.inner.1.bandwidth_gbps, net.outer.1.bandwidth_gbps],
                [net.inner.1.latency_ns, net.outer.1.latency_ns],
            ),
            None => (
                [own.bandwidth_gbps, own.bandwidth_gbps],
                [own.latency_ns, own.latency_ns],
            ),
        };
        options.network = match &inst.pipeline {
            Some(p) => group_network(
                inst.tp,
                inst.pp,
                members,
                (
                    &[bw[0], p.link.bandwidth_gbps, bw[1]],
                    &[latency[0], p.link.latency_ns, latency[1]],
                ),
                receiver,
            ),
            None => group_network(inst.tp, 1, members, (&bw, &latency), receiver),
        };
    }
}
