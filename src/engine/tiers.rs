//! The lower tiers of the instances' prefix caches: which instances share a pool, and the KV
//! space each instance writes in.

use super::{Setups, SimError};
use crate::scheduler::{Core, KvOffloadSpec, LowerPool, SchedulerBug, SharedLowerPool, TierMemory};

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
    /// KV offloading (`--kv-cpu-blocks`): the pool is the instance's CPU tier, written above
    /// a GPU KV utilisation threshold over one PCIe link; `None`: the `--prefix-storage` tier.
    pub offload: Option<KvOffloadSpec>,
}

/// Where an instance sits in the lower tier: its pool, and the KV space it writes in.
#[derive(Debug, Clone)]
pub(super) struct Seat {
    pool: SharedLowerPool,
    space: u32,
    kv_bytes_per_token: u64,
    offload: Option<KvOffloadSpec>,
}

impl Seat {
    /// Attaches `scheduler` (vLLM's: setup refuses a lower tier on SGLang) to the seat.
    pub(super) fn attach(&self, scheduler: &mut Core) {
        let Some(vllm) = scheduler.vllm_mut() else {
            return;
        };
        let pool = self.pool.clone();
        match self.offload {
            Some(spec) => vllm.attach_kv_offload(pool, self.kv_bytes_per_token, spec),
            None => vllm.attach_lower_tier(pool, self.space, self.kv_bytes_per_token),
        }
    }
}

/// Creates the pools the setups name, in instance id order, and gives each setup (each
/// template of an autoscaled run's replica slots, which share its pool) its seat. Instances
/// of the same model, KV bytes per token and block size write in the same KV space, so that
/// they hit each other's blocks in a shared pool; others never do.
pub(super) fn seats(setups: Setups<'_>) -> Result<Vec<Option<Seat>>, SimError> {
    let mut pools: Vec<(u32, SharedLowerPool)> = Vec::new();
    let mut spaces: Vec<(&str, u64, u32)> = Vec::new();
    let mut seats = Vec::with_capacity(setups.templates().len());
    for (k, setup) in setups.templates().iter().enumerate() {
        // Errors name the template's first instance.
        let id = k * setups.per();
        let Some(tier) = &setup.lower_tier else {
            seats.push(None);
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
        if setup.sglang.is_some() {
            return Err(SchedulerBug::new(format!("instance {id}: a lower tier on SGLang")).into());
        }
        seats.push(Some(Seat {
            pool,
            space: space as u32,
            kv_bytes_per_token: tier.kv_bytes_per_token,
            offload: tier.offload,
        }));
    }
    Ok(seats)
}
