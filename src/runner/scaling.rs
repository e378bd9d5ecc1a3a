//! An autoscaled run's instances: each configured instance is a template of
//! `max_replicas` replica slots (slot `s` is a replica of template `s / max_replicas`); the
//! autoscaler is built over the slots with their GPUs, prices and weight-loading times.
//! Prefill and decode templates are pools of their own, scaled separately.

use crate::Nanos;
use crate::autoscale::{AutoscaleConfig, Autoscaler, ReplicaTemplate};
use crate::config::KvCapacity;
use crate::config::run::{InstanceConfig, SimConfig};

/// Most replica slots (templates × `max_replicas`) an autoscaled run may have: every slot is
/// an instance of the run.
pub const MAX_REPLICA_SLOTS: u64 = 100_000;
/// Shortest autoscaler interval, ns (1 ms).
pub const MIN_INTERVAL_NS: Nanos = 1_000_000;
/// Most autoscaler ticks over a run's arrivals: each one is recorded in the report.
pub const MAX_TICKS: u64 = 10_000_000;

/// `config` with every instance repeated `max_replicas` times (template by template), or an
/// error saying why the configuration cannot be autoscaled: DP groups, more than
/// [`MAX_REPLICA_SLOTS`] slots, an interval under [`MIN_INTERVAL_NS`] (refused before
/// anything is allocated).
pub(super) fn expand(config: &SimConfig, a: &AutoscaleConfig) -> anyhow::Result<SimConfig> {
    let templates = config.instances.len() as u64;
    let slots = templates.saturating_mul(u64::from(a.max_replicas));
    if slots > MAX_REPLICA_SLOTS {
        anyhow::bail!(
            "autoscaling: {templates} instance template(s) × {} max replicas are {slots} replica \
             slots, more than the limit of {MAX_REPLICA_SLOTS}; lower --autoscale-max (or the \
             policy bundle's autoscale.max_replicas)",
            a.max_replicas
        );
    }
    if a.interval_ns < MIN_INTERVAL_NS {
        anyhow::bail!(
            "autoscaling: an interval of {} ns is under the limit of {MIN_INTERVAL_NS} ns (1 ms); \
             raise --autoscale-interval (or the policy bundle's autoscale.interval)",
            a.interval_ns
        );
    }
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

/// Refuses an autoscaler that would tick more than [`MAX_TICKS`] times before the last of
/// the arrivals at `arrivals` ns (ticks every `interval_ns` from 0), before the run starts.
pub(super) fn check_ticks(
    a: &AutoscaleConfig,
    arrivals: impl Iterator<Item = Nanos>,
) -> anyhow::Result<()> {
    let last = arrivals.max().unwrap_or(0);
    let ticks = last / a.interval_ns.max(1);
    if ticks > MAX_TICKS {
        anyhow::bail!(
            "autoscaling: ticks every {} ns until the last arrival at {last} ns are {ticks} \
             ticks, more than the limit of {MAX_TICKS}; raise --autoscale-interval (or the \
             policy bundle's autoscale.interval) to at least {} ns",
            a.interval_ns,
            last / MAX_TICKS + 1
        );
    }
    Ok(())
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
