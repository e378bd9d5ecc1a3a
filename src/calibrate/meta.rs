//! The engine settings a real run recorded (`meta.json` beside vLLM bench's `requests.jsonl`):
//! given to the simulation, and every setting the simulation cannot reproduce refused by name
//! (a fit would otherwise absorb its effect into the hardware constants).

use super::EngineFlags;
use crate::config::{Dtype, VllmVersion};
use crate::metrics::VllmMeta;
use crate::setup::{EngineOptions, SimConfig};
use anyhow::{Context, bail};
use serde_json::Value;
use std::path::Path;

/// `engine_kwargs` keys whose value the simulation takes or checks.
const UNDERSTOOD: [&str; 16] = [
    "model",
    "tensor_parallel_size",
    "data_parallel_size",
    "enable_expert_parallel",
    "max_num_seqs",
    "max_num_batched_tokens",
    "max_model_len",
    "dtype",
    "kv_cache_dtype",
    "seed",
    "enable_prefix_caching",
    "enable_chunked_prefill",
    "gpu_memory_utilization",
    "block_size",
    "async_scheduling",
    "scheduler_reserve_full_isl",
];

/// What a run's `meta.json` says of its engine.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recorded {
    /// Where it was read (messages name it).
    pub path: String,
    pub model: Option<String>,
    pub tp: Option<u64>,
    pub dp: Option<u64>,
    pub expert_parallel: Option<bool>,
    pub max_num_seqs: Option<u32>,
    pub max_num_batched_tokens: Option<u32>,
    pub dtype: Option<Dtype>,
    pub kv_cache_fp8: Option<bool>,
    pub enable_prefix_caching: Option<bool>,
    pub enable_chunked_prefill: Option<bool>,
    pub memory_utilization: Option<f64>,
    pub block_size: Option<u32>,
    pub async_scheduling: Option<bool>,
    pub reserve_full_isl: Option<bool>,
    pub num_requests: Option<usize>,
}

/// Reads the `meta.json` beside `requests` (`None` when there is none).
pub fn read_beside(requests: &Path) -> anyhow::Result<Option<Recorded>> {
    let path = requests.with_file_name("meta.json");
    if !path.is_file() {
        return Ok(None);
    }
    let text = crate::paths::read_text(&path).with_context(|| format!("{}", path.display()))?;
    let meta: Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
    parse(&meta, &path.display().to_string()).map(Some)
}

/// The settings of a parsed `meta.json` (read by [`VllmMeta`]); refuses a setting the
/// simulator does not model.
pub fn parse(meta: &Value, path: &str) -> anyhow::Result<Recorded> {
    let m = VllmMeta::read(meta);
    for (key, value) in &m.engine_kwargs {
        if !UNDERSTOOD.contains(&key.as_str()) && !is_unset(value) {
            bail!(
                "{path}: engine_kwargs.{key} = {value}: the simulator does not reproduce this \
                 setting, so the run cannot be calibrated on (a fit would put its effect into \
                 the hardware constants)"
            );
        }
    }
    let s = &m.settings;
    let count = |v: Option<u64>, key: &str| -> anyhow::Result<Option<u32>> {
        v.map(|n| u32::try_from(n).with_context(|| format!("{path}: {key} = {n}: too large")))
            .transpose()
    };
    let dtype = match s.dtype.as_deref() {
        None | Some("auto") => None,
        Some(name) => Some(
            name.parse::<Dtype>()
                .map_err(|e| anyhow::anyhow!("{path}: engine_kwargs.dtype: {e}"))?,
        ),
    };
    let kv_cache_fp8 = match s.kv_cache_dtype.as_deref() {
        None | Some("auto") => None,
        Some(name) if name.starts_with("fp8") => Some(true),
        Some(name) => bail!(
            "{path}: engine_kwargs.kv_cache_dtype = {name}: the simulator has auto and fp8 \
             KV caches only"
        ),
    };
    Ok(Recorded {
        path: path.to_owned(),
        model: m.model.clone(),
        tp: s.tensor_parallel_size,
        dp: s.data_parallel_size,
        expert_parallel: m.enable_expert_parallel,
        max_num_seqs: count(s.max_num_seqs, "max_num_seqs")?,
        max_num_batched_tokens: count(s.max_num_batched_tokens, "max_num_batched_tokens")?,
        dtype,
        kv_cache_fp8,
        enable_prefix_caching: s.enable_prefix_caching,
        enable_chunked_prefill: s.enable_chunked_prefill,
        memory_utilization: m.gpu_memory_utilization,
        block_size: count(m.block_size, "block_size")?,
        async_scheduling: s.async_scheduling,
        reserve_full_isl: s.reserve_full_isl,
        num_requests: s.num_requests.and_then(|n| usize::try_from(n).ok()),
    })
}

/// Whether a recorded value leaves its setting at vLLM's default (null, false, empty).
fn is_unset(value: &Value) -> bool {
    match value {
        Value::Null | Value::Bool(false) => true,
        Value::Object(map) => map.is_empty(),
        Value::Array(list) => list.is_empty(),
        _ => false,
    }
}

/// The engine a run's simulation starts from: each setting from the flags or from
/// `meta.json`, refusing the two when they disagree; a setting neither gives keeps the
/// default of its flag, except asynchronous scheduling, which follows the release modelled
/// ([`VllmVersion::MODELLED`]; a recorded version decides it through [`VllmMeta`]). The
/// admission's KV reservation is the recorded one, else the recorded version's default, else
/// the flag's.
pub fn engine(flags: &EngineFlags, recorded: Option<&Recorded>) -> anyhow::Result<EngineOptions> {
    let mut engine = EngineOptions::default();
    let meta = recorded.cloned().unwrap_or_default();
    let path = meta.path.as_str();
    engine.max_num_seqs =
        pick(path, "max_num_seqs", flags.max_num_seqs, meta.max_num_seqs)?.or(engine.max_num_seqs);
    engine.max_num_batched_tokens = pick(
        path,
        "max_num_batched_tokens",
        flags.max_num_batched_tokens,
        meta.max_num_batched_tokens,
    )?
    .or(engine.max_num_batched_tokens);
    engine.dtype = pick(path, "dtype", flags.dtype, meta.dtype)?;
    engine.kv_cache_fp8 = pick(
        path,
        "kv_cache_dtype",
        flags.kv_cache_fp8,
        meta.kv_cache_fp8,
    )?
    .unwrap_or(false);
    engine.async_scheduling = pick(
        path,
        "async_scheduling",
        flags.async_scheduling,
        meta.async_scheduling,
    )?
    .unwrap_or(VllmVersion::MODELLED.async_scheduling_by_default());
    engine.reserve_full_isl = meta.reserve_full_isl.unwrap_or(engine.reserve_full_isl);
    engine.enable_prefix_caching = meta.enable_prefix_caching.unwrap_or(true);
    engine.enable_chunked_prefill = meta.enable_chunked_prefill.unwrap_or(true);
    if let Some(u) = meta.memory_utilization {
        engine.memory_utilization = u;
    }
    if let Some(b) = meta.block_size {
        engine.block_size = b;
    }
    Ok(engine)
}

/// The flag's value or the recorded one; an error naming the setting when both are given and
/// differ.
fn pick<T: PartialEq + std::fmt::Debug>(
    path: &str,
    setting: &str,
    flag: Option<T>,
    recorded: Option<T>,
) -> anyhow::Result<Option<T>> {
    match (flag, recorded) {
        (Some(f), Some(r)) if f != r => bail!(
            "{path} records {setting} = {r:?} and the flags say {f:?}: the run cannot be \
             reproduced with both; drop the flag or fix the file"
        ),
        (f, r) => Ok(f.or(r)),
    }
}

/// Checks the resolved run against what the real run recorded: the model, tensor, data and
/// expert parallelism, each refused by name when the simulation would run something else.
pub fn check(config: &SimConfig, recorded: &Recorded) -> anyhow::Result<()> {
    let path = &recorded.path;
    let Some(first) = config.instances.first() else {
        bail!("the run has no instance");
    };
    if let Some(model) = &recorded.model
        && let Some(inst) = config
            .instances
            .iter()
            .find(|i| !same_model(&i.model.name, model))
    {
        bail!(
            "{path} records model = {model}, the simulation runs {}: give the run's model \
             (--model or the cluster config's model_name)",
            inst.model.name
        );
    }
    let differ = |setting: &str, real: u64, sim: u64| -> anyhow::Result<()> {
        if real != sim {
            bail!(
                "{path} records {setting} = {real}, the simulation has {sim}: give the run's \
                 layout (--tp, or a cluster config with its tp_size, ep_size and dp_group)"
            );
        }
        Ok(())
    };
    if let Some(tp) = recorded.tp {
        differ("tensor_parallel_size", tp, u64::from(first.tp))?;
    }
    let dp = match first.dp_group {
        Some(g) => config
            .instances
            .iter()
            .filter(|i| i.dp_group == Some(g))
            .count() as u64,
        None => 1,
    };
    if let Some(real) = recorded.dp {
        differ("data_parallel_size", real, dp)?;
    }
    let ep = first.collectives.ep.total > 1;
    if let Some(real) = recorded.expert_parallel
        && first.model.moe.is_some()
        && real != ep
    {
        differ("enable_expert_parallel", u64::from(real), u64::from(ep))?;
    }
    Ok(())
}

/// Whether two model names are the same model: equal, ignoring case and the organisation
/// (`meta-llama/Llama-3.1-8B` is `Llama-3.1-8B`).
pub fn same_model(a: &str, b: &str) -> bool {
    let base = |s: &str| s.rsplit('/').next().unwrap_or(s).to_ascii_lowercase();
    base(a) == base(b)
}
