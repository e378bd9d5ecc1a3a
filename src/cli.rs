//! Command-line flags (LLMServingSim's names where they exist) and their conversion, once,
//! into a [`SimConfig`] that holds no CLI types.

use crate::config::{ConfigError, Dtype, Hardware, ModelArch};
use crate::scheduler::SchedulerConfig;
use clap::{ArgAction, Parser};
use std::path::PathBuf;

/// Simulate an LLM inference serving deployment on a workload.
#[derive(Debug, Parser)]
#[command(name = "blis-cosim", version, about, long_about = None)]
pub struct Cli {
    /// Workload: LLMServingSim JSONL, one request per line.
    #[arg(long, value_name = "PATH")]
    pub dataset: PathBuf,

    /// Per-request CSV to write (LLMServingSim columns), replaced atomically.
    #[arg(long, value_name = "PATH")]
    pub output: Option<PathBuf>,

    /// Run summary as JSON (vLLM benchmark keys), replaced atomically.
    #[arg(long, value_name = "PATH")]
    pub summary_json: Option<PathBuf>,

    /// Load only the first N requests of the dataset (0 = all).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub num_reqs: usize,

    /// Model: a bundled name (e.g. Llama-3.1-8B, Qwen3-32B) or a HuggingFace config.json path.
    #[arg(
        long,
        value_name = "NAME|PATH",
        default_value = "meta-llama/Llama-3.1-8B"
    )]
    pub model: String,

    /// Hardware: a bundled name (H100-SXM, H200, A100-80G, B200, RTXPRO6000, RTX4090) or a
    /// TOML path.
    #[arg(long, value_name = "NAME|PATH", default_value = "H100-SXM")]
    pub hardware: String,

    /// Tensor-parallel degree (GPUs of the instance).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub tp: u32,

    /// Weight and activation dtype: float16, bfloat16, float32, fp8, int8 (default: the
    /// model's torch_dtype, else bfloat16).
    #[arg(long, value_name = "DTYPE", value_parser = parse_dtype)]
    pub dtype: Option<Dtype>,

    /// Most requests running at once (0 = unlimited).
    #[arg(long, value_name = "N", default_value_t = 128)]
    pub max_num_seqs: u32,

    /// Token budget of one scheduler step (0 = the model's maximum length).
    #[arg(long, value_name = "N", default_value_t = 2048)]
    pub max_num_batched_tokens: u32,

    /// Per-request cap on prompt tokens in one step (0 = off).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub long_prefill_token_threshold: u32,

    /// Split long prompts over several steps (default on).
    #[arg(long, overrides_with = "no_enable_chunked_prefill")]
    pub enable_chunked_prefill: bool,
    /// Disable chunked prefill: a prompt larger than the remaining budget waits.
    #[arg(long, action = ArgAction::SetTrue)]
    pub no_enable_chunked_prefill: bool,

    /// Admit a request only if its whole sequence fits in free KV blocks (default on).
    #[arg(long, overrides_with = "no_reserve_full_isl")]
    pub reserve_full_isl: bool,
    /// Admit as soon as this step's tokens fit.
    #[arg(long, action = ArgAction::SetTrue)]
    pub no_reserve_full_isl: bool,

    /// Reuse KV blocks of identical prompt prefixes (default on; needs input_tok_ids).
    #[arg(long, overrides_with = "no_enable_prefix_caching")]
    pub enable_prefix_caching: bool,
    /// Disable prefix caching.
    #[arg(long, action = ArgAction::SetTrue)]
    pub no_enable_prefix_caching: bool,

    /// Tokens per KV block.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub block_size: u32,

    /// Fraction of GPU memory for weights + KV cache, in (0, 1].
    #[arg(long, value_name = "F", default_value_t = 0.9, value_parser = parse_utilization)]
    pub npu_memory_utilization: f64,

    /// Seed of the run's random streams (recorded in the summary).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,

    /// Log level: WARNING, INFO or DEBUG (DEBUG prints every step with its per-layer
    /// latency breakdown).
    #[arg(long, value_name = "LEVEL", default_value = "WARNING", value_parser = parse_log_level)]
    pub log_level: log::LevelFilter,
}

/// Everything a run needs, resolved and validated.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub dataset: PathBuf,
    pub output: Option<PathBuf>,
    pub summary_json: Option<PathBuf>,
    /// Requests to load; `None` loads all.
    pub num_reqs: Option<usize>,
    pub model: ModelArch,
    pub hardware: Hardware,
    pub tp: u32,
    pub dtype: Dtype,
    pub memory_utilization: f64,
    pub scheduler: SchedulerConfig,
    pub seed: u64,
    pub log_level: log::LevelFilter,
}

impl Cli {
    /// Resolves model and hardware names and applies defaults.
    pub fn into_config(self) -> Result<SimConfig, ConfigError> {
        let model = ModelArch::resolve(&self.model)?;
        let hardware = Hardware::resolve(&self.hardware)?;
        let dtype = self.dtype.or(model.torch_dtype).unwrap_or(Dtype::Bfloat16);
        let max_len = u32::try_from(model.max_position_embeddings).unwrap_or(u32::MAX);
        let max_num_batched_tokens = match self.max_num_batched_tokens {
            0 => max_len,
            n => n.min(max_len),
        };
        let scheduler = SchedulerConfig {
            max_num_seqs: (self.max_num_seqs > 0).then_some(self.max_num_seqs),
            max_num_batched_tokens,
            long_prefill_token_threshold: self.long_prefill_token_threshold,
            enable_chunked_prefill: !self.no_enable_chunked_prefill,
            reserve_full_isl: !self.no_reserve_full_isl,
            enable_prefix_caching: !self.no_enable_prefix_caching,
            block_size: self.block_size,
        };
        Ok(SimConfig {
            dataset: self.dataset,
            output: self.output,
            summary_json: self.summary_json,
            num_reqs: (self.num_reqs > 0).then_some(self.num_reqs),
            model,
            hardware,
            tp: self.tp,
            dtype,
            memory_utilization: self.npu_memory_utilization,
            scheduler,
            seed: self.seed,
            log_level: self.log_level,
        })
    }
}

fn parse_dtype(s: &str) -> Result<Dtype, String> {
    s.parse()
}

fn parse_utilization(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!("must be in (0, 1], got {s}"))
    }
}

fn parse_log_level(s: &str) -> Result<log::LevelFilter, String> {
    match s.to_ascii_uppercase().as_str() {
        "WARNING" | "WARN" => Ok(log::LevelFilter::Warn),
        "INFO" => Ok(log::LevelFilter::Info),
        "DEBUG" => Ok(log::LevelFilter::Debug),
        _ => Err(format!(
            "unknown log level `{s}` (expected WARNING, INFO or DEBUG)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        let mut full = vec!["blis-cosim", "--dataset", "w.jsonl"];
        full.extend_from_slice(args);
        Cli::try_parse_from(full)
    }

    #[test]
    fn defaults_follow_llmservingsim() {
        let cli = parse(&[]).unwrap();
        assert_eq!(cli.max_num_seqs, 128);
        assert_eq!(cli.max_num_batched_tokens, 2048);
        assert_eq!(cli.block_size, 16);
        assert_eq!(cli.npu_memory_utilization, 0.9);
        assert!(!cli.no_enable_chunked_prefill && !cli.no_reserve_full_isl);
        assert!(!cli.no_enable_prefix_caching);
        assert_eq!(cli.log_level, log::LevelFilter::Warn);
    }

    #[test]
    fn the_last_of_a_flag_pair_wins() {
        let cli = parse(&["--no-enable-chunked-prefill", "--enable-chunked-prefill"]).unwrap();
        assert!(!cli.no_enable_chunked_prefill);
        let cli = parse(&["--enable-prefix-caching", "--no-enable-prefix-caching"]).unwrap();
        assert!(cli.no_enable_prefix_caching);
        let cli = parse(&["--no-reserve-full-isl"]).unwrap();
        assert!(cli.no_reserve_full_isl);
    }

    #[test]
    fn bad_values_are_rejected() {
        assert!(parse(&["--npu-memory-utilization", "1.5"]).is_err());
        assert!(parse(&["--npu-memory-utilization", "0"]).is_err());
        assert!(parse(&["--npu-memory-utilization", "abc"]).is_err());
        assert!(parse(&["--block-size", "0"]).is_err());
        assert!(parse(&["--tp", "0"]).is_err());
        assert!(parse(&["--max-num-seqs", "-1"]).is_err());
        assert!(parse(&["--dtype", "bf17"]).is_err());
        assert!(parse(&["--log-level", "LOUD"]).is_err());
        assert!(
            Cli::try_parse_from(["blis-cosim"]).is_err(),
            "--dataset is required"
        );
    }

    #[test]
    fn log_levels_accept_llmservingsim_names_in_any_case() {
        assert_eq!(
            parse(&["--log-level", "debug"]).unwrap().log_level,
            log::LevelFilter::Debug
        );
        assert_eq!(
            parse(&["--log-level", "INFO"]).unwrap().log_level,
            log::LevelFilter::Info
        );
    }
}
