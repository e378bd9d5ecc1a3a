//! Flags of the prefix cache's lower tier (`--prefix-storage`, `--enable-prefix-sharing`) and
//! the pool each instance gets.

use super::InstanceConfig;
use crate::config::{ClusterConfig, ConfigError, PlacedInstance, PrefixStorage};
use crate::scheduler::TierMemory;
use clap::{Args, ValueEnum};

/// The values of `--prefix-storage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StorageFlag {
    /// No lower tier.
    #[value(name = "NONE")]
    None,
    /// Host memory (each node's `cpu_mem`).
    #[value(name = "CPU")]
    Cpu,
    /// CXL memory (the cluster's `cxl_mem`).
    #[value(name = "CXL")]
    Cxl,
}

/// Lower-tier flags (flattened into the main job's flags).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Prefix cache tiers and PIM")]
pub struct PrefixStorageArgs {
    /// Second tier of the prefix cache, below the GPUs' KV blocks: NONE, CPU (each node's
    /// cpu_mem of --cluster-config) or CXL (its cxl_mem). Cached prompt prefixes are copied
    /// down in coarse blocks of 256 tokens (oldest evicted first when full); a later request
    /// whose prefix is found there loads it back instead of computing it, which adds the
    /// memory's latency + bytes / bandwidth to the step that admits it. Needs prefix caching.
    #[arg(
        long,
        value_name = "TIER",
        value_enum,
        ignore_case = true,
        default_value = "NONE"
    )]
    pub prefix_storage: StorageFlag,

    /// Share the lower tier: one pool per node for CPU, one for the whole cluster for CXL
    /// (default: a pool per instance).
    #[arg(long)]
    pub enable_prefix_sharing: bool,
}

impl Default for PrefixStorageArgs {
    /// No lower tier, no sharing: the flags' defaults.
    fn default() -> Self {
        PrefixStorageArgs {
            prefix_storage: StorageFlag::None,
            enable_prefix_sharing: false,
        }
    }
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

impl PrefixStorageArgs {
    /// The lower tier the flags ask for, checked against the instances (`instances`, placed
    /// as `cluster` says when a cluster config is given), each of which gets its pool.
    pub(super) fn assign(
        &self,
        cluster: Option<&Cluster<'_>>,
        instances: &mut [InstanceConfig],
    ) -> Result<Option<PrefixStorage>, ConfigError> {
        let command_line = |field: &str, message: String| ConfigError::Invalid {
            source_name: "command line".into(),
            field: field.into(),
            message,
        };
        let storage = match self.prefix_storage {
            StorageFlag::None if self.enable_prefix_sharing => {
                return Err(command_line(
                    "--enable-prefix-sharing",
                    "shares the lower tier of the prefix cache: give --prefix-storage CPU or CXL"
                        .into(),
                ));
            }
            StorageFlag::None => return Ok(None),
            StorageFlag::Cpu => PrefixStorage::Cpu,
            StorageFlag::Cxl => PrefixStorage::Cxl,
        };
        let name = storage.name();
        let Some(cluster) = cluster else {
            let key = match storage {
                PrefixStorage::Cpu => "each node's cpu_mem",
                PrefixStorage::Cxl => "its cxl_mem",
            };
            return Err(command_line(
                "--prefix-storage",
                format!(
                    "{name} needs --cluster-config: the tier's size, bandwidth and latency are \
                     {key}"
                ),
            ));
        };
        for (inst, placed) in instances.iter().zip(cluster.placed) {
            if inst.scheduler.enable_prefix_caching {
                continue;
            }
            if placed.spec.overrides.enable_prefix_caching == Some(false) {
                return Err(ConfigError::Invalid {
                    source_name: cluster.source.to_owned(),
                    field: format!("{}.enable_prefix_caching", placed.path),
                    message: format!(
                        "is false, but --prefix-storage {name} needs prefix caching on every \
                         instance"
                    ),
                });
            }
            return Err(command_line(
                "--prefix-storage",
                format!("{name} needs prefix caching: drop --no-enable-prefix-caching"),
            ));
        }
        let shared = self.enable_prefix_sharing;
        for (id, inst) in instances.iter_mut().enumerate() {
            let (pool, memory) = match storage {
                PrefixStorage::Cpu => {
                    let m = &cluster.config.nodes[inst.node_id as usize].cpu_mem;
                    let pool = if shared { inst.node_id } else { id as u32 };
                    (
                        pool,
                        TierMemory::from_config(m.mem_size, m.mem_bw, m.mem_latency),
                    )
                }
                PrefixStorage::Cxl => {
                    let Some(m) = &cluster.config.cxl_mem else {
                        return Err(ConfigError::Invalid {
                            source_name: cluster.source.to_owned(),
                            field: "cxl_mem".into(),
                            message: "is missing: --prefix-storage CXL keeps the prefix cache's \
                                      lower tier there ({mem_size GB, mem_bw GB/s, mem_latency ns})"
                                .into(),
                        });
                    };
                    let pool = if shared { 0 } else { id as u32 };
                    (
                        pool,
                        TierMemory::from_config(m.mem_size, m.mem_bw, m.mem_latency),
                    )
                }
            };
            inst.lower_tier = Some(TierPool { id: pool, memory });
        }
        Ok(Some(storage))
    }
}
