//! The engine settings a run was made with, as a vLLM bench run's `meta.json` records them:
//! written into the simulated run's summary JSON (`engine`) and compared by `validate`, which
//! names each setting the two runs disagree on and the flag that would align them.
//! [`VllmMeta`] is the one reader of `meta.json` (`calibrate` reads its runs through it too).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::VllmVersion;

/// The settings of a run that change what it measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RunSettings {
    pub tensor_parallel_size: Option<u64>,
    pub data_parallel_size: Option<u64>,
    pub max_num_seqs: Option<u64>,
    pub max_num_batched_tokens: Option<u64>,
    pub dtype: Option<String>,
    pub kv_cache_dtype: Option<String>,
    pub async_scheduling: Option<bool>,
    pub enable_chunked_prefill: Option<bool>,
    pub enable_prefix_caching: Option<bool>,
    pub enforce_eager: Option<bool>,
    pub num_requests: Option<u64>,
}

/// One setting the runs disagree on.
#[derive(Debug, Clone, PartialEq)]
pub struct SettingHint {
    pub setting: &'static str,
    pub real: String,
    pub simulated: String,
    /// The flag (or edit) that gives the simulation the real run's value.
    pub fix: String,
}

impl std::fmt::Display for SettingHint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the real run recorded {} = {}, the simulation ran with {}: {}",
            self.setting, self.real, self.simulated, self.fix
        )
    }
}

/// Everything a vLLM bench `meta.json` records of its engine, read in one place: each setting
/// from `engine_kwargs`, else from the resolved config where the run kept one, and
/// asynchronous scheduling and the admission's KV reservation else from the version (vLLM's
/// defaults from v0.14 and v0.19).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VllmMeta {
    /// The settings `validate` compares.
    pub settings: RunSettings,
    /// The model served.
    pub model: Option<String>,
    pub enable_expert_parallel: Option<bool>,
    pub gpu_memory_utilization: Option<f64>,
    pub block_size: Option<u64>,
    /// `scheduler_reserve_full_isl`: whether a request was admitted only when its whole
    /// prompt fit in the free KV blocks.
    pub reserve_full_isl: Option<bool>,
    /// `engine_kwargs` as recorded, for a reader that refuses what it does not model.
    pub engine_kwargs: serde_json::Map<String, Value>,
}

impl VllmMeta {
    /// The engine a parsed `meta.json` records.
    pub fn read(meta: &Value) -> VllmMeta {
        let kwargs = &meta["engine_kwargs"];
        let resolved = &meta["resolved_config"];
        let scheduler = &resolved["scheduler_config"];
        let flag = |key: &str, resolved: &Value| kwargs[key].as_bool().or(resolved.as_bool());
        let settings = RunSettings {
            tensor_parallel_size: kwargs["tensor_parallel_size"].as_u64(),
            data_parallel_size: kwargs["data_parallel_size"].as_u64(),
            // A run that left them to vLLM records the values its GPU gave in the resolved
            // config (8192 / 1024 on an H100, 2048 / 256 on an A100 or a 24 GB GPU).
            max_num_seqs: kwargs["max_num_seqs"]
                .as_u64()
                .or(scheduler["max_num_seqs"].as_u64()),
            max_num_batched_tokens: kwargs["max_num_batched_tokens"]
                .as_u64()
                .or(scheduler["max_num_batched_tokens"].as_u64()),
            dtype: kwargs["dtype"].as_str().map(str::to_owned),
            kv_cache_dtype: kwargs["kv_cache_dtype"].as_str().map(str::to_owned),
            async_scheduling: flag("async_scheduling", &scheduler["async_scheduling"])
                .or_else(|| async_by_version(meta)),
            enable_chunked_prefill: flag(
                "enable_chunked_prefill",
                &scheduler["enable_chunked_prefill"],
            ),
            enable_prefix_caching: flag(
                "enable_prefix_caching",
                &resolved["cache_config"]["enable_prefix_caching"],
            ),
            enforce_eager: flag("enforce_eager", &resolved["model_config"]["enforce_eager"]),
            num_requests: meta["num_requests"].as_u64(),
        };
        let text = |v: &Value| v.as_str().map(str::to_owned);
        VllmMeta {
            settings,
            model: text(&kwargs["model"]).or_else(|| text(&meta["model"])),
            enable_expert_parallel: kwargs["enable_expert_parallel"].as_bool(),
            gpu_memory_utilization: kwargs["gpu_memory_utilization"].as_f64(),
            block_size: kwargs["block_size"].as_u64(),
            reserve_full_isl: flag(
                "scheduler_reserve_full_isl",
                &scheduler["scheduler_reserve_full_isl"],
            )
            .or_else(|| recorded_version(meta).map(VllmVersion::reserve_full_isl_by_default)),
            engine_kwargs: kwargs.as_object().cloned().unwrap_or_default(),
        }
    }
}

/// vLLM's default for asynchronous scheduling at the recorded version: on from v0.14.
fn async_by_version(meta: &Value) -> Option<bool> {
    recorded_version(meta).map(VllmVersion::async_scheduling_by_default)
}

/// The vLLM release a `meta.json` records, if readable.
fn recorded_version(meta: &Value) -> Option<VllmVersion> {
    VllmVersion::read(meta["vllm_version"].as_str()?)
}

impl RunSettings {
    /// The settings a vLLM bench `meta.json` records ([`VllmMeta::read`]).
    pub fn from_vllm_meta(meta: &Value) -> RunSettings {
        VllmMeta::read(meta).settings
    }

    /// The settings where `real` (a vLLM run) and `self` (the simulation) both say something
    /// and differ, with the flag that aligns each.
    pub fn hints(&self, real: &RunSettings) -> Vec<SettingHint> {
        let mut out = Vec::new();
        let mut check = |setting: &'static str, r: Option<String>, s: Option<String>, fix: &str| {
            if let (Some(r), Some(s)) = (r, s)
                && r != s
            {
                out.push(SettingHint {
                    setting,
                    fix: fix.replace("{}", &r),
                    real: r,
                    simulated: s,
                });
            }
        };
        let num = |v: Option<u64>| v.map(|v| v.to_string());
        let flag = |v: Option<bool>| v.map(|v| v.to_string());
        check(
            "tensor_parallel_size",
            num(real.tensor_parallel_size),
            num(self.tensor_parallel_size),
            "--tp {} (or the cluster config's tp_size)",
        );
        check(
            "data_parallel_size",
            num(real.data_parallel_size),
            num(self.data_parallel_size),
            "a cluster config with DP groups of {}",
        );
        check(
            "max_num_seqs",
            num(real.max_num_seqs),
            num(self.max_num_seqs),
            "--max-num-seqs {}",
        );
        check(
            "max_num_batched_tokens",
            num(real.max_num_batched_tokens),
            num(self.max_num_batched_tokens),
            "--max-num-batched-tokens {}",
        );
        check(
            "kv_cache_dtype",
            real.kv_cache_dtype.clone(),
            self.kv_cache_dtype.clone(),
            "--kv-cache-dtype {}",
        );
        check(
            "async_scheduling",
            flag(real.async_scheduling),
            flag(self.async_scheduling),
            if real.async_scheduling == Some(true) {
                "--async-scheduling (vLLM's default; drop --no-async-scheduling or --llmservingsim)"
            } else {
                "--no-async-scheduling"
            },
        );
        check(
            "enable_chunked_prefill",
            flag(real.enable_chunked_prefill),
            flag(self.enable_chunked_prefill),
            if real.enable_chunked_prefill == Some(false) {
                "--no-enable-chunked-prefill"
            } else {
                "drop --no-enable-chunked-prefill"
            },
        );
        check(
            "enable_prefix_caching",
            flag(real.enable_prefix_caching),
            flag(self.enable_prefix_caching),
            if real.enable_prefix_caching == Some(false) {
                "--no-enable-prefix-caching"
            } else {
                "drop --no-enable-prefix-caching"
            },
        );
        check(
            "enforce_eager",
            flag(real.enforce_eager),
            flag(self.enforce_eager),
            if real.enforce_eager == Some(true) {
                "--enforce-eager"
            } else {
                "drop --enforce-eager"
            },
        );
        check(
            "num_requests",
            num(real.num_requests),
            num(self.num_requests),
            "--num-reqs {}",
        );
        out
    }
}
