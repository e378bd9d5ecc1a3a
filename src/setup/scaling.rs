//! Sizing the instances: each one's KV cache, and in an autoscaled run the replica slots
//! (each configured instance a template of `max_replicas` slots, slot `s` a replica of
//! template `s / max_replicas`; only the templates are held).

use super::{InstanceConfig, SetupError};
use crate::Nanos;
use crate::autoscale::AutoscaleConfig;
use crate::config::{Dtype, KvCapacity, KvSizing, ServedBytes, kv_capacity};

/// Most replica slots (templates × `max_replicas`) an autoscaled run may have: every slot is
/// an instance of the run.
pub const MAX_REPLICA_SLOTS: u64 = 100_000;
/// Shortest autoscaler interval, ns (1 ms).
pub const MIN_INTERVAL_NS: Nanos = 1_000_000;

/// The replica slots per configured instance of an autoscaled run (`max_replicas`; each
/// slot is built when it is first provisioned, from its template), refused beyond
/// [`MAX_REPLICA_SLOTS`] slots or under an interval of [`MIN_INTERVAL_NS`]; the members of a
/// data-parallel group cannot be autoscaled.
pub(super) fn check_slots(
    instances: &[InstanceConfig],
    a: &AutoscaleConfig,
) -> Result<usize, SetupError> {
    let templates = instances.len() as u64;
    let slots = templates.saturating_mul(u64::from(a.max_replicas));
    if slots > MAX_REPLICA_SLOTS {
        return Err(SetupError::TooManyReplicaSlots {
            templates,
            max_replicas: a.max_replicas,
            slots,
        });
    }
    if a.interval_ns < MIN_INTERVAL_NS {
        return Err(SetupError::AutoscaleIntervalTooShort {
            interval_ns: a.interval_ns,
        });
    }
    if let Some(instance) = instances.iter().position(|i| i.dp_group.is_some()) {
        return Err(SetupError::AutoscaledDpMember { instance });
    }
    Ok(a.max_replicas as usize)
}

/// Every configured instance's KV cache, each the template of `per` replica slots (of
/// several instances, an error names the first slot of the instance).
pub(super) fn kv_capacities(
    instances: &[InstanceConfig],
    per: usize,
) -> Result<Vec<KvCapacity>, SetupError> {
    let several = instances.len() * per > 1;
    instances
        .iter()
        .enumerate()
        .map(|(k, inst)| {
            let id = k * per;
            kv_capacity(&inst.model, &inst.kv_sizing()).map_err(|source| {
                if several {
                    SetupError::Instance { id, source }
                } else {
                    SetupError::Config(source)
                }
            })
        })
        .collect()
}

impl InstanceConfig {
    /// What sizes the instance's KV cache.
    pub fn kv_sizing(&self) -> KvSizing {
        KvSizing {
            memory_gib: self.hardware.memory_gib,
            utilization: self.memory_utilization,
            block_size: self.scheduler.block_size,
            tp: self.tp,
            pp: self.pp,
            dtype: self.dtype,
            kv_dtype: self.kv_dtype(),
        }
    }

    /// The dtype of its KV cache: fp8 with `--kv-cache-dtype fp8`, else its activations' (16 bits
    /// under FP8 weights, as vLLM keeps it).
    pub fn kv_dtype(&self) -> Dtype {
        if self.kv_cache_fp8 {
            Dtype::Fp8
        } else {
            self.dtype.activations()
        }
    }

    /// The bytes per element of its weights, activations and KV cache.
    pub fn served_bytes(&self) -> ServedBytes {
        self.dtype.served(self.kv_dtype())
    }
}
