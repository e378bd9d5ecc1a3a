//! Pipeline parallelism of the instances of a cluster config (`pp_size > 1`): the stage
//! split, the activation each stage sends and the link it takes, and the combinations not
//! supported yet, refused naming `pp_size`. The members of a MoE model's DP group must share
//! `pp_size` (their waves are pipelined together).

use super::InstanceConfig;
use super::parallel::cluster_link;
use crate::config::{
    Bound, ClusterConfig, ConfigError, InstanceRole, Link, PlacedInstance, Problem,
};
use crate::config::{Pipeline, stage_blocks};

/// Sets the pipeline of every instance of `placed` (same order as `instances`, after
/// [`super::parallel::resolve`]) whose `pp_size` is above 1 (a pipelined prefill instance is
/// refused under ASTRA-Sim, `astra_selected`).
///
/// Stages send over the cluster's link of the dimension consecutive stages differ in, as in
/// LLMServingSim's `network.yml` (`[tp, pp, …]`): dimension 1 when `tp > 1`, else 0 (a scalar
/// `link_bw`/`link_latency` applies to every dimension).
pub(super) fn resolve(
    cluster: &ClusterConfig,
    placed: &[PlacedInstance<'_>],
    instances: &mut [InstanceConfig],
    astra_selected: bool,
    source: &str,
) -> Result<(), ConfigError> {
    // The members of a (MoE) DP group step in lock step: one pipeline depth for all.
    for (p, inst) in placed.iter().zip(instances.iter()) {
        let other = instances
            .iter()
            .zip(placed)
            .find(|(o, _)| o.dp_group.is_some() && o.dp_group == inst.dp_group && o.pp != inst.pp);
        if let Some((o, op)) = other {
            let problem = Problem::disagrees(
                inst.pp,
                format!(
                    "{} of the same dp_group has {}: members of a dp_group must share pp_size",
                    op.path, o.pp
                ),
            );
            return Err(ConfigError::invalid(
                source,
                format!("{}.{}", p.path, p.spec.pp_key()),
                problem,
            ));
        }
    }
    for (p, inst) in placed.iter().zip(instances.iter_mut()) {
        if inst.pp <= 1 {
            continue;
        }
        if inst.role == InstanceRole::Prefill && astra_selected {
            let problem = Problem::unsupported(
                format!(
                    "pp_size {} (pipeline parallelism) for a prefill instance under ASTRA-Sim \
                     co-simulation (pd_type \"prefill\"; its process would need its stages and \
                     its KV receivers)",
                    inst.pp
                ),
                None,
            );
            return Err(ConfigError::invalid(
                source,
                format!("{}.{}", p.path, p.spec.pp_key()),
                problem,
            ));
        }
        let link = cluster_link(cluster, usize::from(inst.tp > 1), 0.0);
        if link.bandwidth_gbps <= 0.0 {
            // Pipeline stages send activations over it.
            let problem = Problem::out_of_range(link.bandwidth_gbps, Bound::Positive);
            return Err(ConfigError::invalid(source, "link_bw", problem));
        }
        let layers = u32::try_from(inst.model.num_layers).unwrap_or(u32::MAX);
        inst.pipeline = Some(Pipeline {
            stage_blocks: stage_blocks(layers, inst.pp),
            activation_bytes_per_token: inst.model.hidden_size * inst.served_bytes().activations,
            link: Link {
                bandwidth_gbps: link.bandwidth_gbps,
                latency_ns: link.latency_ns,
            },
        });
    }
    Ok(())
}
