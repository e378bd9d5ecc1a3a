//! SGLang's settings (`--engine sglang`): its own flags under its own names, with the
//! defaults SGLang 0.5.23 resolves for the GPU an instance runs on (`arg_groups/
//! memory_hook.py`'s `handle_gpu_memory_settings`, `mem_cache/kv_cache_configurator.py`'s
//! `resolve_max_num_reqs`, `arg_groups/cuda_graph_hook.py`'s decode capture sizes).

use super::InstanceConfig;
use crate::config::{Bound, ConfigError, KvCapacity, Problem};
use crate::latency::{CudaGraphMode, GraphOptions, GraphPolicy};
use crate::scheduler::sglang::{MAX_PREFILL_TOKENS, SchedulePolicy, SglangConfig};

/// SGLang's flags as given; `None`: SGLang's default for the instance's GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct SglangOptions {
    /// `--max-running-requests`; `None`: from the KV pool (`resolve_max_num_reqs`).
    pub max_running_requests: Option<u32>,
    /// `--chunked-prefill-size` (-1: off); `None`: by GPU memory.
    pub chunked_prefill_size: Option<i64>,
    /// `--max-prefill-tokens`.
    pub max_prefill_tokens: u32,
    pub schedule_policy: SchedulePolicy,
    pub schedule_conservativeness: f64,
    pub enable_mixed_chunk: bool,
    pub disable_radix_cache: bool,
    /// `--page-size` (tokens per KV page; SGLang resolves 1 for its default attention
    /// backends).
    pub page_size: u32,
    /// `--cuda-graph-max-bs`; `None`: by GPU memory and TP.
    pub cuda_graph_max_bs: Option<u32>,
    pub disable_overlap_schedule: bool,
    /// `--mem-fraction-static`; `None`: what the activation and graph reserve leaves.
    pub mem_fraction_static: Option<f64>,
}

impl Default for SglangOptions {
    fn default() -> SglangOptions {
        SglangOptions {
            max_running_requests: None,
            chunked_prefill_size: None,
            max_prefill_tokens: MAX_PREFILL_TOKENS,
            schedule_policy: SchedulePolicy::Fcfs,
            schedule_conservativeness: 1.0,
            enable_mixed_chunk: false,
            disable_radix_cache: false,
            page_size: 1,
            cuda_graph_max_bs: None,
            disable_overlap_schedule: false,
            mem_fraction_static: None,
        }
    }
}

/// `handle_gpu_memory_settings`'s tiers: (GPU memory below, MiB; chunked prefill size;
/// decode graph max batch at TP < 4; at TP ≥ 4).
const GPU_TIERS: [(f64, u32, u32, u32); 5] = [
    (20.0 * 1024.0, 2048, 8, 8),
    (35.0 * 1024.0, 4096, 48, 160),
    (60.0 * 1024.0, 4096, 32, 160),
    (90.0 * 1024.0, 8192, 256, 512),
    (160.0 * 1024.0, 8192, 256, 512),
];

impl SglangOptions {
    /// Checks the values a user gives (field names as the flags and cluster-config keys).
    pub fn check(&self) -> Result<(), (&'static str, Problem)> {
        let at_least_one = [
            ("page_size", Some(self.page_size)),
            ("max_running_requests", self.max_running_requests),
            ("max_prefill_tokens", Some(self.max_prefill_tokens)),
            ("cuda_graph_max_bs", self.cuda_graph_max_bs),
        ];
        for (key, value) in at_least_one {
            if value == Some(0) {
                return Err((key, Problem::out_of_range(0, Bound::AtLeast(1))));
            }
        }
        if let Some(c) = self.chunked_prefill_size
            && c != -1
            && (c <= 0 || c > i64::from(u32::MAX) || c % i64::from(self.page_size) != 0)
        {
            let expected = "-1 (off) or a positive multiple of the page size";
            return Err((
                "chunked_prefill_size",
                Problem::wrong_kind(expected, Some(c.to_string())),
            ));
        }
        let fractions = [
            (
                "schedule_conservativeness",
                Some(self.schedule_conservativeness),
                Bound::fraction_up_to(100.0),
            ),
            (
                "mem_fraction_static",
                self.mem_fraction_static,
                Bound::fraction_up_to(1.0),
            ),
        ];
        for (key, value, bound) in fractions {
            if let Some(v) = value {
                bound.check(v).map_err(|p| (key, p))?;
            }
        }
        Ok(())
    }

    /// The settings of an instance with `memory_gib` of GPU memory at `tp` × `pp`, before
    /// its KV pool is sized (`max_running_requests` then 0 unless given; see
    /// [`size_running_requests`]), and the memory fraction for weights and KV.
    pub fn resolve(&self, memory_gib: f64, tp: u32, pp: u32) -> (SglangConfig, f64) {
        let mib = memory_gib * 1024.0;
        let tier = GPU_TIERS.iter().find(|t| mib < t.0);
        let (chunk_default, bs_default) = match tier {
            Some(&(_, chunk, small, large)) => (chunk, if tp < 4 { small } else { large }),
            None => (16384, 512),
        };
        let chunked_prefill_size = match self.chunked_prefill_size {
            None => Some(chunk_default),
            Some(-1) => None,
            Some(c) => Some(c as u32),
        };
        let mut max_bs = self.cuda_graph_max_bs.unwrap_or(bs_default);
        if self.cuda_graph_max_bs.is_none()
            && let Some(running) = self.max_running_requests
        {
            max_bs = max_bs.min(running);
        }
        let fraction = self.mem_fraction_static.unwrap_or_else(|| {
            let activation = chunked_prefill_size
                .unwrap_or(self.max_prefill_tokens)
                .max(2048);
            let mut reserved = 512.0 + f64::from(activation) * 1.5;
            reserved += f64::from(tp * pp) / 8.0 * 1024.0;
            reserved += f64::from(max_bs) * 2.0;
            if mib > 60.0 * 1024.0 {
                reserved = reserved.max(10.0 * 1024.0);
            }
            ((mib - reserved) / mib * 1000.0).round() / 1000.0
        });
        let config = SglangConfig {
            max_running_requests: self.max_running_requests.unwrap_or(0),
            chunked_prefill_size,
            max_prefill_tokens: self.max_prefill_tokens,
            schedule_policy: self.schedule_policy,
            schedule_conservativeness: self.schedule_conservativeness,
            enable_mixed_chunk: self.enable_mixed_chunk,
            disable_radix_cache: self.disable_radix_cache,
            page_size: self.page_size,
            cuda_graph_max_bs: max_bs,
            disable_overlap_schedule: self.disable_overlap_schedule,
            mem_fraction_static: fraction,
        };
        (config, fraction)
    }
}

/// Refuses what the SGLang engine does not model: a lower tier of the prefix cache (SGLang's
/// HiCache), pipeline parallelism, attention offloaded to PIM.
pub fn check_supported(instances: &[InstanceConfig]) -> Result<(), ConfigError> {
    for (id, inst) in instances.iter().enumerate() {
        if inst.sglang.is_none() {
            continue;
        }
        let refused = if inst.lower_tier.is_some() {
            Some((
                "prefix_storage",
                "a lower tier of the prefix cache (--prefix-storage)",
            ))
        } else if inst.pp > 1 {
            Some(("pp_size", "pipeline parallelism (pp_size > 1)"))
        } else if inst.pim.is_some() {
            Some(("pim", "attention offloaded to PIM"))
        } else {
            None
        };
        if let Some((field, what)) = refused {
            let problem = Problem::unsupported(
                format!("{what} under the SGLang engine"),
                Some("use --engine vllm"),
            );
            let field = format!("instance {id}: {field}");
            return Err(ConfigError::invalid(
                "command line or cluster config",
                field,
                problem,
            ));
        }
    }
    Ok(())
}

/// SGLang's `resolve_max_num_reqs` without a given `--max-running-requests`: the pool's
/// tokens over the context length × 512, within [2048, 4096], at most half the pool's tokens.
pub fn default_running_requests(pool_tokens: u64, context_len: u64) -> u32 {
    let estimated = (pool_tokens as f64 / context_len.max(1) as f64 * 512.0) as u64;
    let estimated = estimated.clamp(2048, 4096);
    let half = (pool_tokens / 2).max(1);
    u32::try_from(estimated.min(half)).unwrap_or(u32::MAX)
}

/// Gives every SGLang instance without a `--max-running-requests` SGLang's default for its
/// KV pool (`kv`, by instance), and its scheduler view the same limit.
pub fn size_running_requests(instances: &mut [InstanceConfig], kv: &[KvCapacity]) {
    for (inst, capacity) in instances.iter_mut().zip(kv) {
        let Some(config) = &mut inst.sglang else {
            continue;
        };
        if config.max_running_requests == 0 {
            let tokens = capacity.num_blocks * u64::from(capacity.block_size);
            config.max_running_requests =
                default_running_requests(tokens, inst.model.max_position_embeddings);
        }
        inst.scheduler.max_num_seqs = Some(config.max_running_requests);
    }
}

/// SGLang's decode CUDA-graph batch sizes up to `max_bs` (`generate_decode_cuda_graph_
/// batch_sizes`: 1, 2, 4, 8, 12, every 8 from 16 to 256, every 16 to 496, every 32 from 512,
/// and `max_bs` itself).
pub fn decode_graph_sizes(max_bs: u32) -> Vec<u32> {
    let mut sizes: Vec<u32> = [1, 2, 4, 8, 12]
        .into_iter()
        .chain((16..=256).step_by(8))
        .chain((272..512).step_by(16))
        .chain((512..=max_bs.max(512)).step_by(32))
        .filter(|&s| s <= max_bs)
        .collect();
    if !sizes.contains(&max_bs) {
        sizes.push(max_bs);
    }
    sizes
}

/// The host model's execution rules of an SGLang instance: decode batches of at most
/// `--cuda-graph-max-bs` requests replay a full graph (padded to the next captured size);
/// prefill and mixed batches, and larger decodes, launch their kernels from the host.
pub fn graph_policy(config: &SglangConfig) -> Result<GraphPolicy, Problem> {
    let options = GraphOptions {
        enforce_eager: false,
        mode: CudaGraphMode::FullDecodeOnly,
        capture_sizes: Some(decode_graph_sizes(config.cuda_graph_max_bs)),
        max_capture_size: None,
    };
    // Its one refusal: a capture size of 0, which only `--cuda-graph-max-bs 0` gives.
    GraphPolicy::resolve(&options, config.cuda_graph_max_bs, 0)
        .map_err(|_| Problem::out_of_range(config.cuda_graph_max_bs, Bound::AtLeast(1)))
}
