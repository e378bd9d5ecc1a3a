//! Sizing the instances: each one's KV cache, and in an autoscaled run the replica slots
//! (each configured instance a template of `max_replicas` slots, slot `s` a replica of
//! template `s / max_replicas`).

use super::{InstanceConfig, SetupError};
use crate::autoscale::AutoscaleConfig;
use crate::config::{Dtype, KvCapacity, KvSizing, kv_capacity};

/// `instances` with every one repeated `max_replicas` times (template by template); the
/// members of a data-parallel group cannot be autoscaled.
pub(super) fn expand(
    instances: Vec<InstanceConfig>,
    a: &AutoscaleConfig,
) -> Result<Vec<InstanceConfig>, SetupError> {
    if let Some(instance) = instances.iter().position(|i| i.dp_group.is_some()) {
        return Err(SetupError::AutoscaledDpMember { instance });
    }
    Ok(instances
        .iter()
        .flat_map(|inst| std::iter::repeat_n(inst, a.max_replicas as usize))
        .cloned()
        .collect())
}

/// Every instance's KV cache (of several instances, an error names the instance).
pub(super) fn kv_capacities(instances: &[InstanceConfig]) -> Result<Vec<KvCapacity>, SetupError> {
    let several = instances.len() > 1;
    instances
        .iter()
        .enumerate()
        .map(|(id, inst)| {
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

    /// The dtype of its KV cache.
    pub fn kv_dtype(&self) -> Dtype {
        if self.kv_cache_fp8 {
            Dtype::Fp8
        } else {
            self.dtype
        }
    }
}
