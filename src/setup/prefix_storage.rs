//! The prefix cache's lower tier (`--prefix-storage`, `--enable-prefix-sharing`, or KV
//! offloading with `--kv-cpu-blocks`) and the pool each instance gets.

use super::InstanceConfig;
use crate::config::{
    ClusterConfig, ConfigError, PlacedInstance, PrefixStorage, Problem, full_kv_bytes_per_token,
};
use crate::scheduler::{CpuTierSize, KvOffloadSpec, TierMemory};

/// The lower tier of the prefix cache as the run asks for it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PrefixStorageOptions {
    /// The tier's memory (`--prefix-storage`); `None`: no lower tier.
    pub prefix_storage: Option<PrefixStorage>,
    /// One pool per node (CPU) or for the cluster (CXL) instead of one per instance.
    pub enable_prefix_sharing: bool,
    /// KV offloading to a CPU tier of each instance (`--kv-cpu-blocks`); `None`: off.
    pub kv_offload: Option<KvOffloadSpec>,
}

/// Where an instance's lower tier lives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TierPool {
    /// The pool: instances with the same id share it.
    pub id: u32,
    /// Its memory.
    pub memory: TierMemory,
    /// KV offloading's threshold and link, when the pool is its CPU tier.
    pub offload: Option<KvOffloadSpec>,
}

/// A cluster config with its instances and its name for messages.
pub(super) struct Cluster<'a> {
    pub config: &'a ClusterConfig,
    pub placed: &'a [PlacedInstance<'a>],
    pub source: &'a str,
}

impl PrefixStorageOptions {
    /// The lower tier the flags ask for, checked against the instances (`instances`, placed
    /// as `cluster` says when a cluster config is given), each of which gets its pool.
    pub(super) fn assign(
        &self,
        cluster: Option<&Cluster<'_>>,
        instances: &mut [InstanceConfig],
    ) -> Result<Option<PrefixStorage>, ConfigError> {
        if let Some(spec) = self.kv_offload {
            return self.assign_offload(spec, instances);
        }
        let Some(storage) = self.requested()? else {
            return Ok(None);
        };
        let Some(cluster) = cluster else {
            let key = match storage {
                PrefixStorage::Cpu => "each node's cpu_mem",
                PrefixStorage::Cxl => "its cxl_mem",
            };
            return Err(ConfigError::flag(
                "--prefix-storage",
                Problem::needs(format!(
                    "--cluster-config for {}: the tier's size, bandwidth and latency are {key}",
                    storage.name()
                )),
            ));
        };
        check_prefix_caching(cluster, instances, storage)?;
        for (id, inst) in instances.iter_mut().enumerate() {
            let pool = tier_pool(
                cluster,
                inst,
                id as u32,
                storage,
                self.enable_prefix_sharing,
            )?;
            inst.lower_tier = Some(pool);
        }
        Ok(Some(storage))
    }

    /// Gives every instance a private CPU tier of `spec.cpu_blocks` of its KV blocks for KV
    /// offloading (reported as the CPU tier of the prefix cache).
    fn assign_offload(
        &self,
        spec: KvOffloadSpec,
        instances: &mut [InstanceConfig],
    ) -> Result<Option<PrefixStorage>, ConfigError> {
        let (flag, value) = match spec.cpu_size {
            CpuTierSize::Blocks(n) => ("--kv-cpu-blocks", n.to_string()),
            CpuTierSize::Gib(g) => ("--kv-offloading-size", g.to_string()),
        };
        if self.prefix_storage.is_some() || self.enable_prefix_sharing {
            return Err(ConfigError::flag(
                flag,
                Problem::disagrees(
                    value,
                    "an instance has one lower tier: drop --prefix-storage and --enable-prefix-sharing",
                ),
            ));
        }
        if instances.iter().any(|i| !i.scheduler.enable_prefix_caching) {
            return Err(ConfigError::flag(
                flag,
                Problem::needs("prefix caching: drop --no-enable-prefix-caching"),
            ));
        }
        for (id, inst) in instances.iter_mut().enumerate() {
            let block_bytes = full_kv_bytes_per_token(&inst.model, inst.kv_dtype())
                * u64::from(inst.scheduler.block_size);
            let capacity_bytes = spec
                .cpu_size
                .blocks(block_bytes)
                .filter(|&n| n > 0)
                .and_then(|n| n.checked_mul(block_bytes))
                .ok_or_else(|| {
                    ConfigError::flag(
                        flag,
                        Problem::disagrees(
                            value.clone(),
                            format!("a CPU tier of at least one {block_bytes}-byte KV block and under 2^64 bytes"),
                        ),
                    )
                })?;
            let memory = TierMemory {
                capacity_bytes,
                bandwidth_gbps: spec.bandwidth_gbps,
                latency_ns: spec.latency_ns as f64,
            };
            inst.lower_tier = Some(TierPool {
                id: id as u32,
                memory,
                offload: Some(spec),
            });
        }
        Ok(Some(PrefixStorage::Cpu))
    }

    /// The lower tier the flags name, if any.
    fn requested(&self) -> Result<Option<PrefixStorage>, ConfigError> {
        match self.prefix_storage {
            None if self.enable_prefix_sharing => Err(ConfigError::flag(
                "--enable-prefix-sharing",
                Problem::needs(
                    "--prefix-storage CPU or CXL: it shares the lower tier of the prefix cache",
                ),
            )),
            storage => Ok(storage),
        }
    }
}

/// A lower tier needs prefix caching on every instance: names the first instance without it
/// (its cluster-config key, else the flag).
fn check_prefix_caching(
    cluster: &Cluster<'_>,
    instances: &[InstanceConfig],
    storage: PrefixStorage,
) -> Result<(), ConfigError> {
    let name = storage.name();
    let Some((_, placed)) = instances
        .iter()
        .zip(cluster.placed)
        .find(|(inst, _)| !inst.scheduler.enable_prefix_caching)
    else {
        return Ok(());
    };
    if placed.spec.overrides.enable_prefix_caching == Some(false) {
        let problem = Problem::disagrees(
            "false",
            format!("--prefix-storage {name} needs prefix caching on every instance"),
        );
        let field = format!("{}.enable_prefix_caching", placed.path);
        return Err(ConfigError::invalid(cluster.source, field, problem));
    }
    Err(ConfigError::flag(
        "--prefix-storage",
        Problem::needs(format!(
            "prefix caching for {name}: drop --no-enable-prefix-caching"
        )),
    ))
}

/// Instance `id`'s pool of the lower tier: its node's CPU memory (shared by the node with
/// `shared`) or the cluster's CXL memory (shared by all with `shared`).
fn tier_pool(
    cluster: &Cluster<'_>,
    inst: &InstanceConfig,
    id: u32,
    storage: PrefixStorage,
    shared: bool,
) -> Result<TierPool, ConfigError> {
    let (pool, memory) = match storage {
        PrefixStorage::Cpu => {
            let m = &cluster.config.nodes[inst.node_id as usize].cpu_mem;
            let memory = TierMemory::from_config(m.mem_size, m.mem_bw, m.mem_latency);
            (if shared { inst.node_id } else { id }, memory)
        }
        PrefixStorage::Cxl => {
            let Some(m) = &cluster.config.cxl_mem else {
                let problem = Problem::missing_for(
                    "--prefix-storage CXL keeps the prefix cache's lower tier there \
                     ({mem_size GB, mem_bw GB/s, mem_latency ns})",
                );
                return Err(ConfigError::invalid(cluster.source, "cxl_mem", problem));
            };
            let memory = TierMemory::from_config(m.mem_size, m.mem_bw, m.mem_latency);
            (if shared { 0 } else { id }, memory)
        }
    };
    Ok(TierPool {
        id: pool,
        memory,
        offload: None,
    })
}
