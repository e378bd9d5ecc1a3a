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
    /// The vLLM release: as the real run recorded it (`0.13.0rc2.dev79+g8f8fda261`), or the
    /// one modelled (`--vllm-version`, `0.19`); compared at `major.minor`.
    pub vllm_version: Option<String>,
    pub async_scheduling: Option<bool>,
    /// `scheduler_reserve_full_isl`: whether a request was admitted only when its whole
    /// prompt fit in the free KV blocks.
    pub reserve_full_isl: Option<bool>,
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
            vllm_version: meta["vllm_version"].as_str().map(str::to_owned),
            async_scheduling: flag("async_scheduling", &scheduler["async_scheduling"])
                .or_else(|| recorded_version(meta).map(VllmVersion::async_scheduling_by_default)),
            reserve_full_isl: flag(
                "scheduler_reserve_full_isl",
                &scheduler["scheduler_reserve_full_isl"],
            )
            .or_else(|| recorded_version(meta).map(VllmVersion::reserve_full_isl_by_default)),
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
            engine_kwargs: kwargs.as_object().cloned().unwrap_or_default(),
        }
    }
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
    /// and differ, with the flag that aligns each. A release that differs comes first, and
    /// the defaults it sets (asynchronous scheduling, the whole-prompt reservation) name it.
    pub fn hints(&self, real: &RunSettings) -> Vec<SettingHint> {
        let mut hints = Hints(Vec::new());
        let release = self.release_hint(real, &mut hints);
        self.layout_hints(real, &mut hints);
        self.scheduler_hints(real, release, &mut hints);
        hints.check(
            "num_requests",
            text(real.num_requests),
            text(self.num_requests),
            "--num-reqs {}",
        );
        hints.0
    }

    /// The `vllm_version` hint, when both runs name a release and they differ at
    /// `major.minor`. Returns the real run's release when `--vllm-version` can model it.
    fn release_hint(&self, real: &RunSettings, hints: &mut Hints) -> Option<VllmVersion> {
        let recorded = real.vllm_version.as_deref()?;
        let modelled = self.vllm_version.as_deref().and_then(VllmVersion::read)?;
        let release = VllmVersion::read(recorded)?;
        if release == modelled {
            return None;
        }
        let accepted = release.modelled();
        let fix = match &accepted {
            Ok(v) => format!(
                "--vllm-version {v} (its defaults: asynchronous scheduling {}, whole-prompt \
                 KV reservation {})",
                on_off(v.async_scheduling_by_default()),
                on_off(v.reserve_full_isl_by_default())
            ),
            Err(why) => format!("no flag models it: {why}"),
        };
        hints.0.push(SettingHint {
            setting: "vllm_version",
            real: recorded.to_owned(),
            simulated: modelled.to_string(),
            fix,
        });
        accepted.ok()
    }

    /// Parallelism, the scheduler's limits and the KV cache's type.
    fn layout_hints(&self, real: &RunSettings, hints: &mut Hints) {
        hints.check(
            "tensor_parallel_size",
            text(real.tensor_parallel_size),
            text(self.tensor_parallel_size),
            "--tp {} (or the cluster config's tp_size)",
        );
        hints.check(
            "data_parallel_size",
            text(real.data_parallel_size),
            text(self.data_parallel_size),
            "a cluster config with DP groups of {}",
        );
        hints.check(
            "max_num_seqs",
            text(real.max_num_seqs),
            text(self.max_num_seqs),
            "--max-num-seqs {}",
        );
        hints.check(
            "max_num_batched_tokens",
            text(real.max_num_batched_tokens),
            text(self.max_num_batched_tokens),
            "--max-num-batched-tokens {}",
        );
        hints.check(
            "kv_cache_dtype",
            real.kv_cache_dtype.clone(),
            self.kv_cache_dtype.clone(),
            "--kv-cache-dtype {}",
        );
    }

    /// The scheduler's switches; `release`: the real run's release when it differs from the
    /// one simulated (see [`RunSettings::release_hint`]).
    fn scheduler_hints(&self, real: &RunSettings, release: Option<VllmVersion>, hints: &mut Hints) {
        for switch in &RELEASE_SWITCHES {
            let value = (switch.get)(real);
            let fix = if value == Some(true) {
                switch.on
            } else {
                switch.off
            };
            hints.check(
                switch.setting,
                text(value),
                text((switch.get)(self)),
                &or_release(fix, release, switch.default, value),
            );
        }
        self.switch_hints(real, hints);
    }

    /// Chunked prefill, prefix caching and eager mode.
    fn switch_hints(&self, real: &RunSettings, hints: &mut Hints) {
        hints.check(
            "enable_chunked_prefill",
            text(real.enable_chunked_prefill),
            text(self.enable_chunked_prefill),
            if real.enable_chunked_prefill == Some(false) {
                "--no-enable-chunked-prefill"
            } else {
                "drop --no-enable-chunked-prefill"
            },
        );
        hints.check(
            "enable_prefix_caching",
            text(real.enable_prefix_caching),
            text(self.enable_prefix_caching),
            if real.enable_prefix_caching == Some(false) {
                "--no-enable-prefix-caching"
            } else {
                "drop --no-enable-prefix-caching"
            },
        );
        hints.check(
            "enforce_eager",
            text(real.enforce_eager),
            text(self.enforce_eager),
            if real.enforce_eager == Some(true) {
                "--enforce-eager"
            } else {
                "drop --enforce-eager"
            },
        );
    }
}

/// A switch whose default follows the vLLM release: how to read it, that default, and the
/// flag that gives the simulation the real run's value when it was on, and when off.
struct ReleaseSwitch {
    setting: &'static str,
    get: fn(&RunSettings) -> Option<bool>,
    default: fn(VllmVersion) -> bool,
    on: &'static str,
    off: &'static str,
}

/// Asynchronous scheduling (on from 0.14) and the whole-prompt reservation (on from 0.19).
const RELEASE_SWITCHES: [ReleaseSwitch; 2] = [
    ReleaseSwitch {
        setting: "async_scheduling",
        get: |s| s.async_scheduling,
        default: VllmVersion::async_scheduling_by_default,
        on: "--async-scheduling (vLLM's default; drop --no-async-scheduling or --llmservingsim)",
        off: "--no-async-scheduling",
    },
    ReleaseSwitch {
        setting: "reserve_full_isl",
        get: |s| s.reserve_full_isl,
        default: VllmVersion::reserve_full_isl_by_default,
        on: "--reserve-full-isl",
        off: "--no-reserve-full-isl",
    },
];

/// The hints of one comparison, in order.
struct Hints(Vec<SettingHint>);

impl Hints {
    /// Records `setting` when both runs give it and the values differ, with `fix` (its `{}`
    /// the real value).
    fn check(&mut self, setting: &'static str, r: Option<String>, s: Option<String>, fix: &str) {
        if let (Some(r), Some(s)) = (r, s)
            && r != s
        {
            self.0.push(SettingHint {
                setting,
                fix: fix.replace("{}", &r),
                real: r,
                simulated: s,
            });
        }
    }
}

/// A setting's value as the hints print it.
fn text<T: ToString>(value: Option<T>) -> Option<String> {
    value.map(|v| v.to_string())
}

/// A switch as the hints print it.
fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

/// `fix`, adding that `--vllm-version` of the real run's `release` sets the setting too
/// where that release's `default` is the real run's value.
fn or_release(
    fix: &str,
    release: Option<VllmVersion>,
    default: fn(VllmVersion) -> bool,
    real: Option<bool>,
) -> String {
    match release {
        Some(v) if real == Some(default(v)) => {
            format!("{fix}; --vllm-version {v}, above, sets it too")
        }
        _ => fix.to_owned(),
    }
}
