//! The lower tiers of the instances' prefix caches: which instances share a pool, and the KV
//! space each instance writes in.

use super::{InstanceSetup, SimError};
use crate::scheduler::{Core, LowerPool, SchedulerBug, SharedLowerPool, TierMemory};

/// An instance's place in the lower tier of the prefix cache (`--prefix-storage`).
#[derive(Debug, Clone, PartialEq)]
pub struct LowerTierSetup {
    /// The pool: instances naming the same pool share it (one per node for a shared CPU tier,
    /// one for the cluster for a shared CXL tier, one per instance otherwise).
    pub pool: u32,
    /// The memory the pool lives in; the same for every instance of a pool.
    pub memory: TierMemory,
    /// KV bytes of one token over the whole instance (every layer, head and TP rank).
    pub kv_bytes_per_token: u64,
}

/// Creates the pools the setups name, in instance id order, and attaches each instance's
/// scheduler to its pool. Instances of the same model, KV bytes per token and block size write
/// in the same KV space, so that they hit each other's blocks in a shared pool; others never do.
pub(super) fn attach(setups: &[InstanceSetup], schedulers: &mut [Core]) -> Result<(), SimError> {
    let mut pools: Vec<(u32, SharedLowerPool)> = Vec::new();
    let mut spaces: Vec<(&str, u64, u32)> = Vec::new();
    for (id, (setup, scheduler)) in setups.iter().zip(schedulers).enumerate() {
        let Some(tier) = &setup.lower_tier else {
            continue;
        };
        let pool = match pools.iter().find(|(p, _)| *p == tier.pool) {
            Some((_, pool)) => {
                if *pool.borrow().memory() != tier.memory {
                    return Err(SchedulerBug::new(format!(
                        "instance {id} gives lower-tier pool {} another memory",
                        tier.pool
                    ))
                    .into());
                }
                pool.clone()
            }
            None => {
                let pool = LowerPool::shared(tier.memory);
                pools.push((tier.pool, pool.clone()));
                pool
            }
        };
        let key = (
            setup.model_name.as_str(),
            tier.kv_bytes_per_token,
            setup.scheduler.block_size,
        );
        let space = match spaces.iter().position(|s| *s == key) {
            Some(i) => i,
            None => {
                spaces.push(key);
                spaces.len() - 1
            }
        };
        // Setup refuses a lower tier on an SGLang instance.
        let Some(scheduler) = scheduler.vllm_mut() else {
            return Err(SchedulerBug::new(format!("instance {id}: a lower tier on SGLang")).into());
        };
        scheduler.attach_lower_tier(pool, space as u32, tier.kv_bytes_per_token);
    }
    Ok(())
}
