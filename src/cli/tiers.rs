//! Flags of the prefix cache's lower tier and of PIM attention offloading
//! ([`PrefixStorageOptions`] and [`PimOptions`] as flags).

use crate::config::PrefixStorage;
use crate::scheduler::{CpuTierSize, KvOffloadSpec};
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

    /// KV offloading (BLIS's flag): a CPU tier of this many KV blocks per instance (0: off).
    /// While GPU KV utilisation is above --kv-offload-threshold, newly filled prefix blocks
    /// are copied to it over one PCIe link; a later prefix hit there reloads them, and the
    /// step that admits the request waits for the reload (queued behind earlier transfers).
    /// Needs prefix caching; not with --prefix-storage.
    #[arg(long, value_name = "BLOCKS", default_value_t = 0)]
    pub kv_cpu_blocks: u64,

    /// KV offloading sized as vLLM's native CPU offload does it: the CPU tier's GiB per
    /// instance (over its TP ranks), in whole KV blocks; instead of --kv-cpu-blocks.
    #[arg(long, value_name = "GIB", conflicts_with = "kv_cpu_blocks", value_parser = parse_gib)]
    pub kv_offloading_size: Option<f64>,

    /// GPU KV utilisation (0 to 1, used / all blocks) above which blocks are offloaded.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.9, value_parser = parse_threshold)]
    pub kv_offload_threshold: f64,

    /// GPU-CPU link bandwidth for KV offloads and reloads, GB/s (default: PCIe 5.0 x16 in one
    /// direction, 32 GT/s x 16 lanes x 128/130 / 8 bits = 63.0 GB/s; BLIS counts blocks per
    /// tick instead).
    #[arg(long, value_name = "GB/S", default_value_t = PCIE5_X16_GBPS, value_parser = parse_bandwidth)]
    pub kv_transfer_bandwidth: f64,

    /// Fixed cost of each KV offload or reload transfer, µs (BLIS's ticks).
    #[arg(long, value_name = "US", default_value_t = 0.0, value_parser = parse_latency_us)]
    pub kv_transfer_base_latency: f64,
}

/// PCIe 5.0 x16, one direction, GB/s: 32 GT/s per lane × 16 lanes × 128b/130b encoding / 8
/// bits = 63.015 (PCI-SIG, PCI Express Base Specification 5.0), to one decimal.
const PCIE5_X16_GBPS: f64 = 63.0;

/// A tier flag's value that is not a number it takes (clap prints the message).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum TierValueError {
    /// Not a finite number.
    #[error("'{text}' is not a finite number")]
    NotFinite { text: String },
    /// A number (in `unit`, with its leading space) outside `range`.
    #[error("{value}{unit} is not {range}")]
    Outside {
        value: f64,
        unit: &'static str,
        range: &'static str,
    },
}

fn parse_f64(s: &str) -> Result<f64, TierValueError> {
    s.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
        .ok_or_else(|| TierValueError::NotFinite { text: s.to_owned() })
}

/// `s` as a number for which `inside` holds, else outside `range` (in `unit`).
fn parse_within(
    s: &str,
    inside: impl Fn(f64) -> bool,
    unit: &'static str,
    range: &'static str,
) -> Result<f64, TierValueError> {
    let value = parse_f64(s)?;
    match inside(value) {
        true => Ok(value),
        false => Err(TierValueError::Outside { value, unit, range }),
    }
}

fn parse_threshold(s: &str) -> Result<f64, TierValueError> {
    parse_within(s, |x| (0.0..=1.0).contains(&x), "", "between 0 and 1")
}

fn parse_bandwidth(s: &str) -> Result<f64, TierValueError> {
    parse_within(s, |x| x > 0.0 && x <= 1e6, " GB/s", "in (0, 1e6]")
}

fn parse_gib(s: &str) -> Result<f64, TierValueError> {
    parse_within(s, |x| x > 0.0 && x <= 1e9, " GiB", "in (0, 1e9]")
}

fn parse_latency_us(s: &str) -> Result<f64, TierValueError> {
    parse_within(s, |x| (0.0..=1e9).contains(&x), " µs", "in [0, 1e9]")
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
            kv_offload: match (a.kv_offloading_size, a.kv_cpu_blocks) {
                (Some(gib), _) => Some(CpuTierSize::Gib(gib)),
                (None, 0) => None,
                (None, n) => Some(CpuTierSize::Blocks(n)),
            }
            .map(|cpu_size| KvOffloadSpec {
                cpu_size,
                threshold: a.kv_offload_threshold,
                bandwidth_gbps: a.kv_transfer_bandwidth,
                latency_ns: (a.kv_transfer_base_latency * 1e3).round() as u64,
            }),
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
