//! The prefix cache's lower tier (`--prefix-storage`, `--enable-prefix-sharing`) and the pool
//! each instance gets.

use super::InstanceConfig;
use crate::config::{ClusterConfig, ConfigError, PlacedInstance, PrefixStorage, Problem};
use crate::scheduler::TierMemory;

/// The lower tier of the prefix cache as the run asks for it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PrefixStorageOptions {
    /// The tier's memory (`--prefix-storage`); `None`: no lower tier.
    pub prefix_storage: Option<PrefixStorage>,
    /// One pool per node (CPU) or for the cluster (CXL) instead of one per instance.
    pub enable_prefix_sharing: bool,
}

/// Where an instance's lower tier lives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TierPool {
    /// The pool: instances with the same id share it.
    pub id: u32,
    /// Its memory.
    pub memory: TierMemory,
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
    Ok(TierPool { id: pool, memory })
}
