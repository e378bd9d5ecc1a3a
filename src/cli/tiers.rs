//! Flags of the prefix cache's lower tier and of PIM attention offloading
//! ([`PrefixStorageOptions`] and [`PimOptions`] as flags).

use crate::config::PrefixStorage;
use crate::setup::{PimOptions, PrefixStorageOptions};
use clap::{Args, ValueEnum};
use std::path::PathBuf;

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

impl StorageFlag {
    /// The flag value of `storage`.
    fn of(storage: Option<PrefixStorage>) -> StorageFlag {
        match storage {
            None => StorageFlag::None,
            Some(PrefixStorage::Cpu) => StorageFlag::Cpu,
            Some(PrefixStorage::Cxl) => StorageFlag::Cxl,
        }
    }
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
        default_value_t = StorageFlag::of(PrefixStorageOptions::default().prefix_storage)
    )]
    pub prefix_storage: StorageFlag,

    /// Share the lower tier: one pool per node for CPU, one for the whole cluster for CXL
    /// (default: a pool per instance).
    #[arg(long)]
    pub enable_prefix_sharing: bool,
}

impl From<PrefixStorageArgs> for PrefixStorageOptions {
    fn from(a: PrefixStorageArgs) -> PrefixStorageOptions {
        PrefixStorageOptions {
            prefix_storage: match a.prefix_storage {
                StorageFlag::None => None,
                StorageFlag::Cpu => Some(PrefixStorage::Cpu),
                StorageFlag::Cxl => Some(PrefixStorage::Cxl),
            },
            enable_prefix_sharing: a.enable_prefix_sharing,
        }
    }
}

/// The PIM flags.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Prefix cache tiers and PIM")]
pub struct PimArgs {
    /// Run decode attention on the PIM channels of the node's host memory (needs a cluster
    /// config whose node's cpu_mem names a pim_config); per-instance key
    /// enable_attn_offloading.
    #[arg(long)]
    pub enable_attn_offloading: bool,

    /// Split each step into two sub-batches whose GPU work and PIM attention overlap (needs
    /// attention offloading; not with pp_size > 1); per-instance key
    /// enable_sub_batch_interleaving.
    #[arg(long)]
    pub enable_sub_batch_interleaving: bool,

    /// Folder of the PIM INI files (default: `<cluster config dir>/../pim`, LLMServingSim's
    /// layout).
    #[arg(long, value_name = "DIR")]
    pub pim_config_dir: Option<PathBuf>,
}

impl From<PimArgs> for PimOptions {
    fn from(a: PimArgs) -> PimOptions {
        PimOptions {
            enable_attn_offloading: a.enable_attn_offloading,
            enable_sub_batch_interleaving: a.enable_sub_batch_interleaving,
            pim_config_dir: a.pim_config_dir,
        }
    }
}
