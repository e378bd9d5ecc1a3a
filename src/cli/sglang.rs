//! The engine choice and SGLang's flags ([`SglangOptions`] as flags, under SGLang's names).

use super::choices::choices;
use crate::choice::Choice;
use crate::config::Problem;
use crate::scheduler::Engine;
use crate::scheduler::sglang::SchedulePolicy;
use crate::setup::SglangOptions;
use clap::Args;

/// `--engine` and SGLang's settings.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Engine (SGLang's settings apply to --engine sglang)")]
pub struct EngineArgs {
    /// The engine every instance runs (a cluster config's `engine` key overrides it per
    /// instance).
    #[arg(long, value_name = "ENGINE", value_parser = choices::<Engine>(),
          default_value = Engine::Vllm.name())]
    pub engine: Engine,

    /// SGLang's --max-running-requests [default: from the KV pool, as SGLang: pool tokens /
    /// context length × 512 within 2048..4096, at most half the pool's tokens].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_running_requests: Option<u32>,

    /// SGLang's --chunked-prefill-size, tokens (-1: off) [default: by GPU memory: 2048 under
    /// 20 GiB, 4096 under 60 GiB, 8192 under 160 GiB, else 16384].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub chunked_prefill_size: Option<i64>,

    /// SGLang's --max-prefill-tokens: most prompt tokens in one prefill batch.
    #[arg(long, value_name = "N", default_value_t = SglangOptions::default().max_prefill_tokens,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_prefill_tokens: u32,

    /// SGLang's --schedule-policy: the waiting queue's order.
    #[arg(long, value_name = "POLICY", value_parser = choices::<SchedulePolicy>(),
          default_value = SglangOptions::default().schedule_policy.name())]
    pub schedule_policy: SchedulePolicy,

    /// SGLang's --schedule-conservativeness: scales the new-token ratio that reserves KV for
    /// the running requests' decodes (larger: fewer admissions, fewer retractions).
    #[arg(long, value_name = "X",
          default_value_t = SglangOptions::default().schedule_conservativeness)]
    pub schedule_conservativeness: f64,

    /// SGLang's --enable-mixed-chunk: running decodes join prefill passes.
    #[arg(long)]
    pub enable_mixed_chunk: bool,

    /// SGLang's --disable-radix-cache: no prefix caching.
    #[arg(long)]
    pub disable_radix_cache: bool,

    /// SGLang's --page-size: tokens per KV page (the radix cache's granularity).
    #[arg(long, value_name = "N", default_value_t = SglangOptions::default().page_size,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub page_size: u32,

    /// SGLang's --cuda-graph-max-bs: decode batches up to this size replay a CUDA graph (host
    /// model) [default: by GPU memory and TP: 256 on an 80 GiB GPU at TP < 4].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub cuda_graph_max_bs: Option<u32>,

    /// SGLang's --disable-overlap-schedule: the CPU work of the next batch no longer runs
    /// under the current GPU pass.
    #[arg(long)]
    pub disable_overlap_schedule: bool,

    /// SGLang's --mem-fraction-static: device memory for weights and the KV pool [default:
    /// what SGLang's activation and CUDA-graph reserve leaves, 0.836 on an 80 GiB GPU at TP 1].
    #[arg(long, value_name = "F")]
    pub mem_fraction_static: Option<f64>,
}

impl EngineArgs {
    /// SGLang's settings as given, checked (the error names the flag).
    pub fn sglang(&self) -> Result<SglangOptions, (String, Problem)> {
        let options = SglangOptions {
            max_running_requests: self.max_running_requests,
            chunked_prefill_size: self.chunked_prefill_size,
            max_prefill_tokens: self.max_prefill_tokens,
            schedule_policy: self.schedule_policy,
            schedule_conservativeness: self.schedule_conservativeness,
            enable_mixed_chunk: self.enable_mixed_chunk,
            disable_radix_cache: self.disable_radix_cache,
            page_size: self.page_size,
            cuda_graph_max_bs: self.cuda_graph_max_bs,
            disable_overlap_schedule: self.disable_overlap_schedule,
            mem_fraction_static: self.mem_fraction_static,
        };
        options
            .check()
            .map_err(|(key, message)| (format!("--{}", key.replace('_', "-")), message))?;
        Ok(options)
    }
}
