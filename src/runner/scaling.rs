//! An autoscaled run's autoscaler: each configured instance is a template of `max_replicas`
//! replica slots (slot `s` is a replica of template `s / max_replicas`, laid out by
//! `setup`); the autoscaler is built over the slots with their GPUs, prices and
//! weight-loading times.
//! Prefill and decode templates are pools of their own, scaled separately.

use crate::Nanos;
use crate::autoscale::{AutoscaleConfig, Autoscaler, ReplicaTemplate};
use crate::setup::{InstanceConfig, SimConfig};

/// Most autoscaler ticks over a run's arrivals: each one is recorded in the report.
pub const MAX_TICKS: u64 = 10_000_000;

/// Refuses an autoscaler that would tick more than [`MAX_TICKS`] times before the last
/// arrival known before the run, at `last` ns (ticks every `interval_ns` from 0), before the
/// run starts.
pub(super) fn check_ticks(a: &AutoscaleConfig, last: Nanos) -> anyhow::Result<()> {
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

/// The autoscaler of `config`, whose instances are its templates' replica slots; `None`
/// when the run does not scale.
pub(super) fn autoscaler(config: &SimConfig) -> Option<Autoscaler> {
    let a = config.control.autoscale.as_ref()?;
    let per = config.replicas_per_template;
    let templates: Vec<ReplicaTemplate> = (0..config.num_instances())
        .map(|id| {
            let (inst, capacity) = (config.instance(id), config.kv(id));
            ReplicaTemplate {
                pool: (id / per) as u32,
                gpus: inst.tp * inst.pp,
                price_per_gpu_hour: a.price(&inst.hardware.name),
                // Every GPU reads its share of the weights at the same time; GB/s is bytes/ns.
                load_ns: load_ns(capacity.weight_bytes, a.load_bandwidth(&inst.hardware.name)),
            }
        })
        .collect();
    let names = (config.instances.iter().enumerate())
        .map(|(k, inst)| template_name(k, inst))
        .collect();
    Some(Autoscaler::new(a.clone(), &templates, names, config.seed))
}

/// Time to read `weight_bytes` (one GPU's share) at `gbps` GB/s, whole ns.
fn load_ns(weight_bytes: u64, gbps: f64) -> u64 {
    (weight_bytes as f64 / gbps).round() as u64
}
