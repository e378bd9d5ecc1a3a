//! An autoscaled run's instances: each configured instance is a template of
//! `max_replicas` replica slots (slot `s` is a replica of template `s / max_replicas`); the
//! autoscaler is built over the slots with their GPUs, prices and weight-loading times.
//! Prefill and decode templates are pools of their own, scaled separately.

use crate::autoscale::{AutoscaleConfig, Autoscaler, ReplicaTemplate};
use crate::config::KvCapacity;
use crate::setup::{InstanceConfig, SimConfig};

/// `config` with every instance repeated `max_replicas` times (template by template), or an
/// error saying why the configuration cannot be autoscaled.
pub(super) fn expand(config: &SimConfig, a: &AutoscaleConfig) -> anyhow::Result<SimConfig> {
    for (k, inst) in config.instances.iter().enumerate() {
        if inst.dp_group.is_some() {
            anyhow::bail!(
                "autoscaling: instance {k} is a member of a data-parallel group; a DP group \
                 steps in lock step as one unit, so its members cannot come and go one by one"
            );
        }
    }
    let mut expanded = config.clone();
    expanded.instances = config
        .instances
        .iter()
        .flat_map(|inst| std::iter::repeat_n(inst, a.max_replicas as usize))
        .cloned()
        .collect();
    Ok(expanded)
}

/// The name of template `k`: its model, hardware and TP.
fn template_name(k: usize, inst: &InstanceConfig) -> String {
    let model = inst
        .model
        .name
        .rsplit('/')
        .next()
        .unwrap_or(&inst.model.name);
    format!("{k}: {model} on {} tp{}", inst.hardware.name, inst.tp)
}

/// The autoscaler of the expanded `config` (instances as [`expand`] made them), whose
/// instances have KV capacities `capacities`.
pub(super) fn autoscaler(
    config: &SimConfig,
    a: &AutoscaleConfig,
    capacities: &[KvCapacity],
) -> Autoscaler {
    let per = a.max_replicas as usize;
    let templates: Vec<ReplicaTemplate> = config
        .instances
        .iter()
        .zip(capacities)
        .enumerate()
        .map(|(id, (inst, capacity))| ReplicaTemplate {
            pool: (id / per) as u32,
            gpus: inst.tp * inst.pp,
            price_per_gpu_hour: a.price(&inst.hardware.name),
            // Every GPU reads its share of the weights at the same time; GB/s is bytes/ns.
            load_ns: load_ns(capacity.weight_bytes, a.load_bandwidth(&inst.hardware.name)),
        })
        .collect();
    let names = config
        .instances
        .iter()
        .step_by(per)
        .enumerate()
        .map(|(k, inst)| template_name(k, inst))
        .collect();
    Autoscaler::new(a.clone(), &templates, names, config.seed)
}

/// Time to read `weight_bytes` (one GPU's share) at `gbps` GB/s, whole ns.
fn load_ns(weight_bytes: u64, gbps: f64) -> u64 {
    (weight_bytes as f64 / gbps).round() as u64
}
