//! Pipeline parallelism of the instances of a cluster config (`pp_size > 1`): the stage
//! split, the activation each stage sends and the link it takes, and the combinations not
//! supported yet, refused naming `pp_size`.

use super::InstanceConfig;
use super::parallel::cluster_link;
use crate::config::{ClusterConfig, ConfigError, InstanceRole, Link, PlacedInstance};
use crate::engine::{Pipeline, stage_blocks};

/// Sets the pipeline of every instance of `placed` (same order as `instances`, after
/// [`super::parallel::resolve`]) whose `pp_size` is above 1.
///
/// Stages send over the cluster's link of the dimension consecutive stages differ in, as in
/// LLMServingSim's `network.yml` (`[tp, pp, …]`): dimension 1 when `tp > 1`, else 0 (a scalar
/// `link_bw`/`link_latency` applies to every dimension).
pub(super) fn resolve(
    cluster: &ClusterConfig,
    placed: &[PlacedInstance<'_>],
    instances: &mut [InstanceConfig],
    source: &str,
) -> Result<(), ConfigError> {
    for (p, inst) in placed.iter().zip(instances.iter_mut()) {
        if inst.pp <= 1 {
            continue;
        }
        let refuse = |what: &str| ConfigError::Invalid {
            source_name: source.to_owned(),
            field: format!("{}.pp_size", p.path),
            message: format!(
                "is {} but pipeline parallelism is not supported with {what} yet",
                inst.pp
            ),
        };
        if inst.role != InstanceRole::Colocated {
            return Err(refuse("prefill/decode disaggregation (pd_type)"));
        }
        if inst.dp_group.is_some() {
            return Err(refuse("a dp_group of a MoE model (lock-step DP waves)"));
        }
        if inst.scheduler.async_scheduling {
            return Err(refuse("--async-scheduling"));
        }
        let link = cluster_link(cluster, usize::from(inst.tp > 1));
        if link.bandwidth_gbps <= 0.0 {
            return Err(ConfigError::Invalid {
                source_name: source.to_owned(),
                field: "link_bw".to_owned(),
                message: "must be positive: pipeline stages send activations over it".into(),
            });
        }
        let layers = u32::try_from(inst.model.num_layers).unwrap_or(u32::MAX);
        inst.pipeline = Some(Pipeline {
            stage_blocks: stage_blocks(layers, inst.pp),
            activation_bytes_per_token: inst.model.hidden_size * inst.dtype.bytes(),
            link: Link {
                bandwidth_gbps: link.bandwidth_gbps,
                latency_ns: link.latency_ns,
            },
        });
    }
    Ok(())
}
