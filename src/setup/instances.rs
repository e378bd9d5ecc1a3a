//! Resolving the served instances: from the flags alone (one instance), or from a cluster
//! config whose per-instance keys override the flags (instance value > flag > default, as in
//! LLMServingSim).

use std::collections::BTreeMap;

use super::{BatchLimits, InstancePim, InstancePlacement, TierPool};
use crate::astra::AstraOptions;
use crate::config::Pipeline;
use crate::config::{
    Bound, ConfigError, Dtype, Hardware, InstanceRole, ModelArch, PlacedInstance, Problem,
    VllmVersion,
};
use crate::latency::{Collectives, CudaGraphMode, GraphOptions, GraphPolicy};
use crate::scheduler::sglang::{SchedulePolicy, SglangConfig};
use crate::scheduler::{Engine, SchedulerConfig};

/// The models and hardware a cluster config names, each resolved once: instances that name
/// the same model or hardware get copies of one parse (parsing the bundled hardware TOML
/// again for each of 256 instances was most of a 256-instance run's set-up).
#[derive(Debug, Default)]
pub struct ResolvedSpecs {
    models: BTreeMap<String, ModelArch>,
    hardware: BTreeMap<String, Hardware>,
}

impl ResolvedSpecs {
    /// The model `spec` names ([`ModelArch::resolve`]), parsed at its first request.
    pub fn model(&mut self, spec: &str) -> Result<ModelArch, ConfigError> {
        resolved_once(&mut self.models, spec, ModelArch::resolve)
    }

    /// The hardware `spec` names ([`Hardware::resolve`]), parsed at its first request.
    pub fn hardware(&mut self, spec: &str) -> Result<Hardware, ConfigError> {
        resolved_once(&mut self.hardware, spec, Hardware::resolve)
    }
}

/// A copy of what `resolve` made of `spec`, resolved at its first request and kept in `seen`
/// (an error is not kept: it comes again, the same, at the next request).
fn resolved_once<T: Clone>(
    seen: &mut BTreeMap<String, T>,
    spec: &str,
    resolve: impl FnOnce(&str) -> Result<T, ConfigError>,
) -> Result<T, ConfigError> {
    if let Some(value) = seen.get(spec) {
        return Ok(value.clone());
    }
    let value = resolve(spec)?;
    seen.insert(spec.to_string(), value.clone());
    Ok(value)
}

/// One instance, resolved and validated.
#[derive(Debug, Clone)]
pub struct InstanceConfig {
    /// Node the instance sits on.
    pub node_id: u32,
    /// Colocated, or prefill / decode under disaggregation.
    pub role: InstanceRole,
    /// Served model.
    pub model: ModelArch,
    /// Hardware, with memory size and bandwidth from the cluster config when one is given.
    pub hardware: Hardware,
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Pipeline-parallel degree (1: no pipeline).
    pub pp: u32,
    /// The pipeline stages of a `pp > 1` instance.
    pub pipeline: Option<Pipeline>,
    /// Weight and activation dtype.
    pub dtype: Dtype,
    /// Whether the KV cache is stored in fp8 (else in `dtype`).
    pub kv_cache_fp8: bool,
    /// Fraction of device memory for weights + KV cache.
    pub memory_utilization: f64,
    /// Scheduler limits and switches (an SGLang instance's: the engine-neutral view of
    /// its settings).
    pub scheduler: SchedulerConfig,
    /// SGLang's settings when the instance runs SGLang; `None`: vLLM.
    pub sglang: Option<SglangConfig>,
    /// TP and EP collectives of its steps, and its expert parallelism.
    pub collectives: Collectives,
    /// The lock-step data-parallel group it belongs to (an index), if any.
    pub dp_group: Option<u32>,
    /// The lower tier of the prefix cache (`--prefix-storage`), if any.
    pub lower_tier: Option<TierPool>,
    /// Where its weights live (a cluster config's `placement`), if given.
    pub placement: Option<InstancePlacement>,
    /// Decode attention offloaded to its node's PIM channels, if enabled.
    pub pim: Option<InstancePim>,
    /// ASTRA-Sim co-simulation of this instance: the run's flags with the instance's own
    /// network and memory numbers (its TP degree, its node's `cpu_mem`, its `npu_mem`). Each
    /// instance gets its own ASTRA-Sim process, inputs and memo table. `None`: the analytical
    /// network backend (then `None` for every instance).
    pub astra: Option<AstraOptions>,
    /// How its steps execute when the host model is on (`--host-model`); `None`: the
    /// latency backend's GPU time alone.
    pub host_model: Option<GraphPolicy>,
    /// Its steps follow the host's CPU work, serially (a TPU's compiled program, when the host
    /// model is on: [`crate::latency::ProgramHost`]).
    pub program_host: bool,
    /// The compilation settings its cluster-config entry gives (over the flags').
    pub graph_overrides: GraphOverrides,
}

/// vLLM compilation settings of one instance's cluster-config entry; `None`: the flag's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GraphOverrides {
    pub enforce_eager: Option<bool>,
    pub mode: Option<CudaGraphMode>,
    pub capture_sizes: Option<Vec<u32>>,
    pub max_capture_size: Option<u32>,
}

impl GraphOverrides {
    /// `flags` with these overrides applied.
    pub fn apply(&self, flags: &GraphOptions) -> GraphOptions {
        GraphOptions {
            enforce_eager: self.enforce_eager.unwrap_or(flags.enforce_eager),
            mode: self.mode.unwrap_or(flags.mode),
            capture_sizes: self
                .capture_sizes
                .clone()
                .or_else(|| flags.capture_sizes.clone()),
            max_capture_size: self.max_capture_size.or(flags.max_capture_size),
        }
    }
}

/// The engine settings of a run: what every instance gets unless its cluster-config entry
/// says otherwise. [`Default`] gives the flags' defaults (vLLM 0.19's; the scheduler's two
/// limits left to each instance's GPU).
#[derive(Debug, Clone, PartialEq)]
pub struct EngineOptions {
    /// The engine every instance runs (`--engine`).
    pub engine: Engine,
    /// SGLang's settings, for the instances that run it.
    pub sglang: super::SglangOptions,
    pub dtype: Option<Dtype>,
    pub kv_cache_fp8: bool,
    pub memory_utilization: f64,
    /// Most running requests (`Some(0)`: unlimited); `None`: vLLM's default for each
    /// instance's GPU ([`BatchLimits::vllm_serve`]).
    pub max_num_seqs: Option<u32>,
    /// Token budget of a step (`Some(0)`: the model's length); `None`: vLLM's default for
    /// each instance's GPU.
    pub max_num_batched_tokens: Option<u32>,
    pub long_prefill_token_threshold: u32,
    pub block_size: u32,
    pub enable_chunked_prefill: bool,
    pub enable_prefix_caching: bool,
    pub reserve_full_isl: bool,
    pub async_scheduling: bool,
    /// The vLLM release modelled (`--vllm-version`), whose defaults the two settings above
    /// start from; the summary JSON's `engine` block records it.
    pub vllm_version: VllmVersion,
}

impl Default for EngineOptions {
    fn default() -> EngineOptions {
        EngineOptions {
            engine: Engine::Vllm,
            sglang: super::SglangOptions::default(),
            dtype: None,
            kv_cache_fp8: false,
            memory_utilization: 0.9,
            max_num_seqs: None,
            max_num_batched_tokens: None,
            long_prefill_token_threshold: 0,
            block_size: 16,
            enable_chunked_prefill: true,
            enable_prefix_caching: true,
            reserve_full_isl: VllmVersion::MODELLED.reserve_full_isl_by_default(),
            async_scheduling: VllmVersion::MODELLED.async_scheduling_by_default(),
            vllm_version: VllmVersion::MODELLED,
        }
    }
}

impl EngineOptions {
    /// An instance of `model` on `hardware` at tensor parallelism `tp` with these settings.
    pub fn instance(
        &self,
        node_id: u32,
        model: ModelArch,
        hardware: Hardware,
        tp: u32,
    ) -> InstanceConfig {
        let mut inst = self.vllm_instance(node_id, model, hardware, tp);
        self.apply_engine(&mut inst);
        inst
    }

    /// Makes `inst` an SGLang instance when these settings say so: its SGLang settings
    /// resolved for its GPU and parallelism, its memory fraction SGLang's, its scheduler
    /// view theirs.
    fn apply_engine(&self, inst: &mut InstanceConfig) {
        if self.engine != Engine::Sglang {
            return;
        }
        let (config, fraction) = self
            .sglang
            .resolve(inst.hardware.memory_gib, inst.tp, inst.pp);
        let max_len = u32::try_from(inst.model.max_position_embeddings).unwrap_or(u32::MAX);
        inst.memory_utilization = fraction;
        inst.scheduler = config.view(max_len);
        inst.sglang = Some(config);
    }

    fn vllm_instance(
        &self,
        node_id: u32,
        model: ModelArch,
        hardware: Hardware,
        tp: u32,
    ) -> InstanceConfig {
        let dtype = served_dtype(self.dtype, &model);
        let max_len = u32::try_from(model.max_position_embeddings).unwrap_or(u32::MAX);
        let (max_num_batched_tokens, max_num_seqs) = BatchLimits::vllm_serve(&hardware).resolve(
            self.max_num_batched_tokens,
            self.max_num_seqs,
            self.enable_chunked_prefill,
            max_len,
        );
        let scheduler = SchedulerConfig {
            max_num_seqs,
            max_num_batched_tokens,
            long_prefill_token_threshold: self.long_prefill_token_threshold,
            enable_chunked_prefill: self.enable_chunked_prefill,
            reserve_full_isl: self.reserve_full_isl,
            enable_prefix_caching: self.enable_prefix_caching,
            block_size: self.block_size,
            async_scheduling: self.async_scheduling,
        };
        InstanceConfig {
            node_id,
            role: InstanceRole::Colocated,
            model,
            hardware,
            tp,
            pp: 1,
            pipeline: None,
            dtype,
            kv_cache_fp8: self.kv_cache_fp8,
            memory_utilization: self.memory_utilization,
            scheduler,
            sglang: None,
            collectives: Collectives::NONE,
            dp_group: None,
            lower_tier: None,
            placement: None,
            pim: None,
            astra: None,
            host_model: None,
            program_host: false,
            graph_overrides: GraphOverrides::default(),
        }
    }

    /// The instance of a cluster config: model, hardware, memory and TP from its entry, and
    /// its runtime overrides applied over these settings.
    pub fn cluster_instance(
        &self,
        placed: &PlacedInstance<'_>,
        source: &str,
        specs: &mut ResolvedSpecs,
    ) -> Result<InstanceConfig, ConfigError> {
        let inst = placed.spec;
        let invalid = |key: &str, problem| {
            ConfigError::invalid(source, format!("{}.{key}", placed.path), problem)
        };
        let model = specs.model(&inst.model_name)?;
        let pp = inst.pp();
        if u64::from(pp) > model.num_layers {
            return Err(invalid(
                "pp_size",
                Problem::disagrees(
                    pp,
                    format!(
                        "{} has only {} hidden layers to split into stages",
                        model.name, model.num_layers
                    ),
                ),
            ));
        }
        let mut hardware = specs.hardware(&inst.hardware)?;
        hardware.memory_gib = inst.npu_mem.mem_size;
        hardware.memory_bw_gbps = inst.npu_mem.mem_bw;
        let o = &inst.overrides;
        let mut flags = self.clone();
        if let Some(d) = &o.dtype {
            flags.dtype = Some(d.parse().map_err(|m| invalid("dtype", m))?);
        }
        if let Some(k) = &o.kv_cache_dtype {
            flags.kv_cache_fp8 = match k.as_str() {
                "auto" => false,
                "fp8" => true,
                other => {
                    return Err(invalid(
                        "kv_cache_dtype",
                        Problem::not_one_of(format!("`{other}`"), &["auto", "fp8"]),
                    ));
                }
            };
        }
        if o.block_size == Some(0) {
            return Err(invalid(
                "block_size",
                Problem::out_of_range(0, Bound::AtLeast(1)),
            ));
        }
        flags.memory_utilization = inst.npu_mem.mem_util.unwrap_or(flags.memory_utilization);
        flags
            .apply_sglang_keys(o)
            .map_err(|(key, m)| invalid(key, m))?;
        flags.max_num_seqs = o.max_num_seqs.or(flags.max_num_seqs);
        flags.max_num_batched_tokens = o.max_num_batched_tokens.or(flags.max_num_batched_tokens);
        flags.long_prefill_token_threshold = o
            .long_prefill_token_threshold
            .unwrap_or(flags.long_prefill_token_threshold);
        flags.block_size = o.block_size.unwrap_or(flags.block_size);
        flags.enable_chunked_prefill = o
            .enable_chunked_prefill
            .unwrap_or(flags.enable_chunked_prefill);
        flags.enable_prefix_caching = o
            .enable_prefix_caching
            .unwrap_or(flags.enable_prefix_caching);
        flags.reserve_full_isl = o.reserve_full_isl.unwrap_or(flags.reserve_full_isl);
        let graph_overrides = GraphOverrides {
            enforce_eager: o.enforce_eager,
            mode: o
                .cudagraph_mode
                .as_deref()
                .map(str::parse)
                .transpose()
                .map_err(|m| invalid("cudagraph_mode", Problem::UnknownName(m)))?,
            capture_sizes: o.cudagraph_capture_sizes.clone(),
            max_capture_size: o.max_cudagraph_capture_size,
        };
        let mut resolved = InstanceConfig {
            role: placed.role,
            pp,
            graph_overrides,
            ..flags.vllm_instance(placed.node_id, model, hardware, inst.tp())
        };
        flags.apply_engine(&mut resolved);
        if let (Some(config), Some(fraction)) = (&mut resolved.sglang, inst.npu_mem.mem_util)
            && o.mem_fraction_static.is_none()
        {
            // An SGLang instance's `mem_util` is its memory fraction, as for vLLM.
            config.mem_fraction_static = fraction;
            resolved.memory_utilization = fraction;
        }
        Ok(resolved)
    }

    /// Applies a cluster-config entry's `engine` and SGLang keys over these settings.
    fn apply_sglang_keys(
        &mut self,
        o: &crate::config::RuntimeOverrides,
    ) -> Result<(), (&'static str, Problem)> {
        use crate::choice::Choice;
        if let Some(e) = &o.engine {
            self.engine = Engine::parse(e).map_err(|e| ("engine", e.into()))?;
        }
        let s = &mut self.sglang;
        if let Some(p) = &o.schedule_policy {
            s.schedule_policy =
                SchedulePolicy::parse(p).map_err(|e| ("schedule_policy", e.into()))?;
        }
        s.max_running_requests = o.max_running_requests.or(s.max_running_requests);
        s.chunked_prefill_size = o.chunked_prefill_size.or(s.chunked_prefill_size);
        s.max_prefill_tokens = o.max_prefill_tokens.unwrap_or(s.max_prefill_tokens);
        s.schedule_conservativeness = o
            .schedule_conservativeness
            .unwrap_or(s.schedule_conservativeness);
        s.enable_mixed_chunk = o.enable_mixed_chunk.unwrap_or(s.enable_mixed_chunk);
        s.disable_radix_cache = o.disable_radix_cache.unwrap_or(s.disable_radix_cache);
        s.page_size = o.page_size.unwrap_or(s.page_size);
        s.cuda_graph_max_bs = o.cuda_graph_max_bs.or(s.cuda_graph_max_bs);
        s.disable_overlap_schedule = o
            .disable_overlap_schedule
            .unwrap_or(s.disable_overlap_schedule);
        s.mem_fraction_static = o.mem_fraction_static.or(s.mem_fraction_static);
        s.check()
    }
}

/// The dtype an instance of `model` serves in given `--dtype` (`flag`): a checkpoint
/// quantized to FP8 (`quantization_config`) is served in FP8 whatever 16-bit activation dtype
/// the flag names, as vLLM does (`--dtype` sets the activations; the checkpoint's
/// quantization the weights); else the flag, the model's `torch_dtype`, or bfloat16.
fn served_dtype(flag: Option<Dtype>, model: &ModelArch) -> Dtype {
    match (model.quantization, flag) {
        (Some(q), None | Some(Dtype::Bfloat16 | Dtype::Float16)) => q,
        (_, Some(d)) => d,
        (None, None) => model.torch_dtype.unwrap_or(Dtype::Bfloat16),
    }
}
