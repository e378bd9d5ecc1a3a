//! Command-line flags (LLMServingSim's names where they exist) and their plain conversion,
//! once, into [`RunOptions`]; the library resolves those into a [`SimConfig`]
//! ([`setup::resolve`]).

mod astra;
mod calibrate;
mod choices;
mod command_paths;
mod commands;
pub mod control;
mod dataset;
mod diagnostics;
mod host;
pub mod mixups;
mod release2;
mod replay;
mod routing;
mod sglang;
pub mod short_help;
mod sweep;
mod tiers;

pub use astra::AstraArgs;
pub use calibrate::{CalibrateArgs, calibrate};
pub use commands::{et, generate, list_scenarios, validate};
pub use control::ControlArgs;
pub use dataset::DatasetArgs;
pub use diagnostics::DiagnosticArgs;
pub use host::{HostArgs, HostModelSwitch};
pub use release2::Release2Args;
pub use replay::ReplayArgs;
pub use sglang::EngineArgs;
pub use sweep::{MainFlags, SweepArgs};
pub use tiers::{PimArgs, PrefixStorageArgs, StorageFlag};

use crate::astra::CosimOptions;
use crate::chakra::{Dialect, EmitEt};
use crate::choice::{Choice, UnknownName};
use crate::config::{Bound, ConfigError, Dtype, KvCacheDtype, PdFlow, Problem, VllmVersion};
use crate::latency::ExpertRouting;
use crate::metrics::{FitnessWeights, PlotFormat, SloTargets, VllmArrival};
use crate::router::{RoutingPolicy, RoutingSpecError, RoutingWeights};
use crate::setup;
use crate::setup::Threads;
use crate::setup::{
    BatchLimits, Deployment, EngineOptions, EvaluationConfig, Layout, PlotsOutput, RoutingOptions,
    RunOptions, SimConfig, TimeSeriesOutput, TpAllReduce, WorkloadSource, parse_log_interval,
};
use crate::setup::{LLMSERVINGSIM_MAX_NUM_BATCHED_TOKENS, LLMSERVINGSIM_MAX_NUM_SEQS};
use crate::workload::spec::{DEFAULT_MAX_REQUESTS, Synthetic};
use choices::{choices, defaulted};
use clap::builder::PossibleValuesParser;
use clap::{ArgAction, ArgGroup, Args, Parser, Subcommand};
use std::path::PathBuf;

/// Simulate an LLM inference serving deployment on a workload.
#[derive(Debug, Parser)]
#[command(
    name = "blis-cosim",
    version,
    about,
    long_about = None,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub run: RunArgs,
}

/// Subcommands besides the main job.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Compare a simulated run with a real vLLM run (Diff% table, plots).
    Validate(ValidateArgs),
    /// Fit a hardware file's roofline constants to real vLLM runs of one GPU, and check them
    /// on runs held out of the fit.
    Calibrate(CalibrateArgs),
    /// Chakra execution-trace (.et) files, the workload format of ASTRA-Sim.
    #[command(subcommand)]
    Et(EtCommand),
    /// Write the requests of a workload spec, a built-in scenario or a trace as workload
    /// JSONL.
    Generate(GenerateArgs),
    /// List the built-in workload scenarios.
    Scenarios,
    /// Run many points of a sweep spec in parallel (one worker thread per core), into one
    /// results table; mark the Pareto front and the configurations meeting an SLO.
    Sweep(SweepArgs),
}

/// Subcommands of `blis-cosim et`.
#[derive(Debug, Subcommand)]
pub enum EtCommand {
    /// Print an .et file readably: its metadata, then every node in file order with id, type,
    /// name, duration, sizes, collective type, involved dimensions and dependencies.
    Dump(EtDumpArgs),
}

/// Flags of `blis-cosim et dump`.
#[derive(Debug, Args)]
pub struct EtDumpArgs {
    /// The .et file.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// How to read node types and durations: llmservingsim (the ASTRA-Sim fork LLMServingSim
    /// drives; durations in ns) or upstream (ASTRA-Sim and Chakra; durations in µs).
    #[arg(long, value_name = "DIALECT", default_value = "llmservingsim")]
    pub astra_dialect: Dialect,
}

/// Flags of `blis-cosim generate`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("source").required(true).args(["workload_spec", "scenario", "dataset"])))]
pub struct GenerateArgs {
    /// WorkloadSpec v2 YAML file (BLIS format).
    #[arg(long, value_name = "PATH")]
    pub workload_spec: Option<PathBuf>,

    /// A built-in scenario (`blis-cosim scenarios` lists them).
    #[arg(long, value_name = "NAME",
          value_parser = PossibleValuesParser::new(dataset::scenario_names()))]
    pub scenario: Option<String>,

    /// A trace to convert (Mooncake or Azure; see --dataset-format); --num-requests keeps
    /// its first N requests.
    #[arg(long, value_name = "PATH", conflicts_with = "seed")]
    pub dataset: Option<PathBuf>,

    #[command(flatten)]
    pub dataset_args: DatasetArgs,

    /// Workload JSONL to write, replaced atomically. `--out` is an alias.
    #[arg(long = "output", visible_alias = "out", value_name = "PATH")]
    pub out: PathBuf,

    /// Number of requests to generate (replaces the spec's num_requests).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub num_requests: Option<u64>,

    /// Seed of the generator (replaces the spec's seed).
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub seed: Option<i64>,

    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..),
          help = defaulted("Most requests the spec may plan", DEFAULT_MAX_REQUESTS))]
    pub max_requests: Option<u64>,
}

/// Flags of `blis-cosim validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The real run's per-request timestamps (vLLM bench `requests.jsonl`).
    #[arg(long, value_name = "PATH")]
    pub vllm: PathBuf,

    /// The simulated run's per-request CSV.
    #[arg(long, value_name = "PATH")]
    pub sim: PathBuf,

    /// The simulated run's summary JSON (`--summary-json`): its engine settings are compared
    /// with those the real run recorded in the `meta.json` beside --vllm, and each difference
    /// is printed as a hint with the flag that aligns it.
    #[arg(long, value_name = "PATH")]
    pub sim_summary: Option<PathBuf>,

    /// Also write the table as JSON.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,

    /// Write the latency CDF and throughput timeline plots into this directory.
    #[arg(long, value_name = "DIR")]
    pub plots: Option<PathBuf>,

    /// Plot file format: svg or png.
    #[arg(long, value_name = "FORMAT", default_value = "svg", value_parser = ["svg", "png"])]
    pub plot_format: String,

    /// Where vLLM's TTFT and latency start when its arrival times are on another clock than
    /// its engine timestamps: `queued` (its queued_ts, LLMServingSim's rule, which leaves out
    /// the wait in vLLM's input queue) or `client` (arrival_time moved onto the engine clock by
    /// the run's smallest queued_ts - arrival_time: the TTFT a client sees, as simulated)
    #[arg(long, value_name = "FROM", default_value = "queued", value_parser = parse_vllm_arrival)]
    pub vllm_arrival: VllmArrival,

    /// The hardware file the simulation used: when `blis-cosim calibrate` wrote it, say
    /// whether this real run was one it was fitted to (its error is then the fit's residual,
    /// not evidence of accuracy) or one held out of the fit.
    #[arg(long, value_name = "PATH")]
    pub hardware: Option<PathBuf>,
}

/// Flags of the main job.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("workload").required(true).args(["dataset", "workload_spec", "scenario", "rate"])))]
pub struct RunArgs {
    /// Workload: LLMServingSim JSONL, one request per line, or a Mooncake or Azure trace
    /// (see --dataset-format).
    #[arg(help_heading = "Workload", long, value_name = "PATH")]
    pub dataset: Option<PathBuf>,

    #[command(flatten)]
    pub dataset_args: DatasetArgs,

    /// Workload generated in memory from a WorkloadSpec v2 YAML file (BLIS format), instead
    /// of --dataset.
    #[arg(help_heading = "Workload", long, value_name = "PATH")]
    pub workload_spec: Option<PathBuf>,

    /// Workload generated in memory from a built-in scenario (`blis-cosim scenarios` lists
    /// them), instead of --dataset.
    #[arg(help_heading = "Workload", long, value_name = "NAME",
          value_parser = PossibleValuesParser::new(dataset::scenario_names()))]
    pub scenario: Option<String>,

    #[arg(help_heading = "Workload", long, value_name = "REQ_PER_S", value_parser = parse_rate,
          help = format!("The quick workload (BLIS's and vLLM bench's), instead of --dataset: \
                          Poisson arrivals at this many requests per second, --num-prompts of \
                          them [default: {}], each of --prompt-tokens and --output-tokens",
                         Synthetic::DEFAULT_REQUESTS))]
    pub rate: Option<f64>,

    #[arg(help_heading = "Workload", long, value_name = "N", requires = "rate",
          value_parser = clap::value_parser!(u32).range(1..),
          help = defaulted("The quick workload: prompt tokens of every request",
                           Synthetic::DEFAULT_TOKENS))]
    pub prompt_tokens: Option<u32>,

    #[arg(help_heading = "Workload", long, value_name = "N", requires = "rate",
          value_parser = clap::value_parser!(u32).range(1..),
          help = defaulted("The quick workload: output tokens of every request",
                           Synthetic::DEFAULT_TOKENS))]
    pub output_tokens: Option<u32>,

    /// Quick cluster: N colocated instances of --model on --hardware at --tp, on one node
    /// linked by the hardware's link, instead of --cluster-config.
    #[arg(help_heading = "Deployment", long, value_name = "N", conflicts_with_all = ["cluster_config", "pd"],
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub num_instances: Option<u32>,

    /// Quick prefill/decode cluster: PREFILL prefill and DECODE decode instances of --model
    /// on --hardware at --tp, on one node (KV hand-offs over the hardware's link), instead of
    /// --cluster-config.
    #[arg(help_heading = "Deployment", long, value_name = "PREFILL:DECODE", conflicts_with = "cluster_config",
          value_parser = parse_pd)]
    pub pd: Option<Layout>,

    /// LLMServingSim cluster config JSON (colocated, prefill and decode instances on one or
    /// more nodes): each instance's model, hardware, memory, TP, role and engine overrides
    /// come from it.
    #[arg(help_heading = "Deployment", long, value_name = "PATH", conflicts_with_all = ["model", "hardware", "tp"])]
    pub cluster_config: Option<PathBuf>,

    /// How arriving requests are spread over the instances (names in any case). With
    /// prefill/decode instances the same policy also picks the decode instance of each
    /// prefilled request.
    #[arg(help_heading = "Cluster", long, value_name = "POLICY", default_value = "LOAD", value_parser = choices::<RoutingPolicy>())]
    pub request_routing_policy: RoutingPolicy,

    /// How the MoE gate spreads tokens over experts: BALANCED (closed-form, perfectly
    /// balanced), RR (expert-token pairs cycle over the experts) or RAND (seeded draws, once
    /// per step for every layer: LLMServingSim 2.0's FAST, an alias).
    #[arg(help_heading = "Cluster", long, value_name = "POLICY", default_value = "BALANCED", value_parser = parse_expert_routing)]
    pub expert_routing_policy: ExpertRouting,

    /// Weights of the weighted routing policy, e.g. queue=1,kv=0.5 (signals: queue, running,
    /// kv, prefix; those left out weigh 0) [default: all 1].
    #[arg(help_heading = "Cluster", long, value_name = "SIGNAL=W,...", value_parser = parse_routing_weights)]
    pub routing_weights: Option<RoutingWeights>,

    #[command(flatten)]
    pub routing: routing::RoutingArgs,

    #[command(flatten)]
    pub control: ControlArgs,

    #[command(flatten)]
    pub diagnostics: DiagnosticArgs,

    /// Profile root for the measured latency backend (`<root>/<hardware>/<org>/<model>/<variant>/`,
    /// LLMServingSim bundle layout). Without it the analytical roofline is used.
    #[arg(help_heading = "Deployment", long, value_name = "DIR")]
    pub profile_dir: Option<PathBuf>,

    /// LLMServingSim architecture YAML (layer sequence) for the profile backend; default: the
    /// bundled one for the model's `model_type`.
    #[arg(
        help_heading = "Deployment",
        long,
        value_name = "PATH",
        requires = "profile_dir"
    )]
    pub architecture: Option<PathBuf>,

    /// Per-request CSV to write (LLMServingSim columns), replaced atomically.
    #[arg(help_heading = "Outputs", long, value_name = "PATH")]
    pub output: Option<PathBuf>,

    /// Run summary as JSON (vLLM benchmark keys), replaced atomically.
    #[arg(help_heading = "Outputs", long, value_name = "PATH")]
    pub summary_json: Option<PathBuf>,

    /// Time series of the run as CSV, replaced atomically: per interval and instance, prompt
    /// and generated tokens per second, running and waiting requests, KV cache use, finished
    /// requests and steps (vLLM bench's timeseries.csv names).
    #[arg(help_heading = "Outputs", long, value_name = "PATH")]
    pub timeseries: Option<PathBuf>,

    /// Draw the run into this folder (created if missing): throughput, running and waiting
    /// requests and KV cache use over time (at --timeseries-interval), and TTFT, TPOT and
    /// end-to-end latency CDFs.
    #[arg(help_heading = "Outputs", long, value_name = "DIR")]
    pub plots: Option<PathBuf>,

    /// Picture format of --plots: svg or png.
    #[arg(
        help_heading = "Outputs",
        long,
        value_name = "FORMAT",
        value_parser = choices::<PlotFormat>(),
        default_value = PlotFormat::default().name(),
        requires = "plots"
    )]
    pub plot_format: PlotFormat,

    /// SLO target on time to first token, ms: the summary reports attainment and goodput.
    #[arg(help_heading = "Outputs", long, value_name = "MS", value_parser = parse_slo_ms)]
    pub slo_ttft: Option<f64>,

    /// SLO target on time per output token, ms.
    #[arg(help_heading = "Outputs", long, value_name = "MS", value_parser = parse_slo_ms)]
    pub slo_tpot: Option<f64>,

    /// SLO target on end-to-end latency, ms.
    #[arg(help_heading = "Outputs", long, value_name = "MS", value_parser = parse_slo_ms)]
    pub slo_e2e: Option<f64>,

    /// Fitness of the run, printed and in the summary JSON: a weighted mean of named
    /// metrics normalised to [0, 1] (higher is better), e.g. `attainment=2,completion=1`.
    /// Metrics: attainment, goodput, completion, ttft_p99, tpot_p99, itl_p99, e2e_p99,
    /// jain_tokens, jain_attainment, prefix_hit_rate, preemption_free, anomaly_free.
    #[arg(help_heading = "Outputs", long, value_name = "METRIC=W,...",
          value_parser = FitnessWeights::parse)]
    pub fitness_weights: Option<FitnessWeights>,

    /// Evaluation result as JSON (schema in docs/src/evaluation.md), replaced atomically:
    /// fitness (--fitness-weights, else completion=1,ttft_p99=1,e2e_p99=1), raw metrics,
    /// anomaly and outcome counts, trace summary, and the run's identity.
    #[arg(help_heading = "Outputs", long, value_name = "PATH")]
    pub evaluation_json: Option<PathBuf>,

    /// The run's control-plane and routing settings (from --policy-config, the flags and the
    /// defaults) written as a policy bundle, every policy with all its parameters: fed back
    /// as --policy-config, it gives the same run.
    #[arg(help_heading = "Outputs", long, value_name = "PATH")]
    pub export_policy: Option<PathBuf>,

    /// Simulated seconds per row of --timeseries.
    #[arg(help_heading = "Outputs", long, value_name = "SECS", default_value_t = 1.0, requires = "timeseries",
          value_parser = parse_timeseries_interval)]
    pub timeseries_interval: f64,

    /// Use only the first N requests of the workload (0 = all; with --workload-spec or
    /// --scenario it replaces the spec's num_requests; with --rate, the requests generated).
    /// `--num-reqs` (LLMServingSim's name; `--num-req` in its 2.0) and `--num-prompts` (vLLM
    /// bench's) are aliases.
    #[arg(
        help_heading = "Workload",
        long = "num-requests",
        visible_aliases = ["num-reqs", "num-req", "num-prompts"],
        value_name = "N",
        default_value_t = 0
    )]
    pub num_reqs: usize,

    #[arg(help_heading = "Workload", long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..),
          help = defaulted("With --workload-spec: most requests the spec may plan",
                           DEFAULT_MAX_REQUESTS))]
    pub max_requests: Option<u64>,

    #[arg(help_heading = "Deployment", long, value_name = "NAME|PATH",
          help = defaulted("Model: a bundled name (e.g. Llama-3.1-8B, Qwen3-32B) or a \
                            HuggingFace config.json path", setup::DEFAULT_MODEL))]
    pub model: Option<String>,

    #[arg(help_heading = "Deployment", long, value_name = "NAME|PATH",
          help = defaulted(&format!("Hardware: a bundled name ({}) or a TOML path",
                                    crate::config::Hardware::bundled_names().join(", ")),
                           setup::DEFAULT_HARDWARE))]
    pub hardware: Option<String>,

    #[arg(help_heading = "Deployment", long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024),
          help = defaulted("Tensor-parallel degree (GPUs of the instance)", setup::DEFAULT_TP))]
    pub tp: Option<u32>,

    /// Weight and activation dtype: float16, bfloat16, float32, fp8, int8 (default: the
    /// model's quantization_config, else its torch_dtype, else bfloat16). fp8 is vLLM's
    /// `--quantization fp8`: FP8 linear and expert weights, activations in bfloat16.
    #[arg(help_heading = "Deployment", long, value_name = "DTYPE", value_parser = parse_dtype)]
    pub dtype: Option<Dtype>,

    /// KV-cache dtype: auto (the activations' dtype: bfloat16 under --dtype fp8) or fp8.
    #[arg(
        help_heading = "Deployment",
        long,
        value_name = "DTYPE",
        value_parser = choices::<KvCacheDtype>(),
        default_value = kv_cache_dtype(EngineOptions::default().kv_cache_fp8).name()
    )]
    pub kv_cache_dtype: KvCacheDtype,

    #[arg(help_heading = "Scheduler", long, value_name = "N", visible_alias = "max-batch",
          help = batch_limit_help("Most requests running at once (0 = unlimited; \
                                   `--max-batch` is LLMServingSim 2.0's name)",
                                  |l| l.max_num_seqs, LLMSERVINGSIM_MAX_NUM_SEQS))]
    pub max_num_seqs: Option<u32>,

    #[arg(help_heading = "Scheduler", long, value_name = "N",
          help = batch_limit_help(
              "Token budget of one scheduler step (0 = the model's maximum length)",
              |l| l.max_num_batched_tokens, LLMSERVINGSIM_MAX_NUM_BATCHED_TOKENS))]
    pub max_num_batched_tokens: Option<u32>,

    /// Per-request cap on prompt tokens in one step (0 = off).
    #[arg(
        help_heading = "Scheduler",
        long,
        value_name = "N",
        default_value_t = EngineOptions::default().long_prefill_token_threshold
    )]
    pub long_prefill_token_threshold: u32,

    #[arg(help_heading = "Scheduler", long, overrides_with = "no_enable_chunked_prefill",
          help = switch_help("Split long prompts over several steps",
                             EngineOptions::default().enable_chunked_prefill))]
    pub enable_chunked_prefill: bool,
    /// Disable chunked prefill: a prompt larger than the remaining budget waits.
    #[arg(help_heading = "Scheduler", long, action = ArgAction::SetTrue)]
    pub no_enable_chunked_prefill: bool,

    #[arg(help_heading = "Scheduler", long, overrides_with = "no_reserve_full_isl",
          help = switch_help("Admit a request only if its whole sequence fits in free KV blocks \
                              (vLLM's default from v0.19, so the default follows \
                              --vllm-version)",
                             EngineOptions::default().reserve_full_isl))]
    pub reserve_full_isl: bool,
    /// Admit as soon as this step's tokens fit.
    #[arg(help_heading = "Scheduler", long, action = ArgAction::SetTrue)]
    pub no_reserve_full_isl: bool,

    /// The vLLM release modelled (e.g. 0.13, or as vLLM prints it: 0.13.0rc2): the defaults
    /// that changed between releases follow it (asynchronous scheduling, on from 0.14; the
    /// whole prompt's KV blocks free before admission, from 0.19); pricing and scheduling are
    /// 0.19's. From 0.8 (the V1 engine) to 0.19.
    #[arg(help_heading = "Scheduler", long, value_name = "VERSION",
          default_value_t = VllmVersion::MODELLED)]
    pub vllm_version: VllmVersion,

    #[arg(help_heading = "Scheduler", long, overrides_with = "no_async_scheduling",
          help = switch_help("vLLM's asynchronous scheduling (its default from v0.14, so the \
                              default follows --vllm-version; its resolved config records it): \
                              each step is formed while the previous one runs, so a request \
                              arriving mid-step joins the step after the next",
                             EngineOptions::default().async_scheduling))]
    pub async_scheduling: bool,
    /// Form each step when the previous one ends (LLMServingSim's behaviour).
    #[arg(help_heading = "Scheduler", long, action = ArgAction::SetTrue)]
    pub no_async_scheduling: bool,

    /// Price and schedule steps as LLMServingSim does: the latency backend's GPU time alone
    /// (--host-model off), each step formed when the previous one ends
    /// (--no-async-scheduling), its P/D accounting (--pd-flow llmservingsim), a cluster
    /// config's TP all-reduces as NCCL's ring alone on its declared link (not vLLM's
    /// dispatch on the part), and its scheduler limits where none is given (128 sequences,
    /// 2048 tokens, on every GPU).
    /// Reproduces LLMServingSim's outputs; refused with the async, host-model, P/D-flow and
    /// vLLM-version flags.
    #[arg(
        help_heading = "Scheduler",
        long,
        conflicts_with_all = ["async_scheduling", "no_async_scheduling", "host_model", "pd_flow",
                              "vllm_version"]
    )]
    pub llmservingsim: bool,

    /// How a prefilled request reaches its decode instance and when its first token is out.
    #[arg(
        help_heading = "Cluster",
        long,
        value_name = "FLOW",
        value_parser = choices::<PdFlow>(),
        default_value = PdFlow::default().name()
    )]
    pub pd_flow: PdFlow,

    #[arg(help_heading = "Scheduler", long, overrides_with = "no_enable_prefix_caching",
          help = switch_help("Reuse KV blocks of identical prompt prefixes (needs input_tok_ids)",
                             EngineOptions::default().enable_prefix_caching))]
    pub enable_prefix_caching: bool,
    /// Disable prefix caching.
    #[arg(help_heading = "Scheduler", long, action = ArgAction::SetTrue)]
    pub no_enable_prefix_caching: bool,

    #[command(flatten)]
    pub prefix: PrefixStorageArgs,

    #[command(flatten)]
    pub pim: PimArgs,

    /// Tokens per KV block.
    #[arg(help_heading = "Deployment", long, value_name = "N",
          default_value_t = EngineOptions::default().block_size,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub block_size: u32,

    /// Fraction of GPU memory for weights + KV cache, in (0, 1].
    #[arg(help_heading = "Deployment", long, value_name = "F",
          default_value_t = EngineOptions::default().memory_utilization,
          value_parser = parse_utilization)]
    pub npu_memory_utilization: f64,

    /// Seed of the run's random streams (recorded in the summary).
    #[arg(
        help_heading = "Deployment",
        long,
        value_name = "N",
        default_value_t = RunOptions::DEFAULT_SEED
    )]
    pub seed: u64,

    /// Write the Chakra execution traces of the run's first steps: step k (from 0) goes to
    /// `DIR/step<k>/llm.<npu>.et`, one file per TP rank, built from the active latency backend.
    #[arg(
        help_heading = "Co-simulation and execution traces",
        long,
        value_name = "DIR"
    )]
    pub emit_et: Option<PathBuf>,

    /// How many steps, from the first, --emit-et writes.
    #[arg(
        help_heading = "Co-simulation and execution traces",
        long,
        value_name = "N",
        default_value_t = 16,
        requires = "emit_et"
    )]
    pub emit_et_limit: u64,

    /// Dialect of the --emit-et files: llmservingsim (the ASTRA-Sim fork LLMServingSim drives;
    /// durations in ns) or upstream (ASTRA-Sim and Chakra; durations in µs).
    #[arg(
        help_heading = "Co-simulation and execution traces",
        long,
        value_name = "DIALECT",
        default_value = "llmservingsim",
        requires = "emit_et"
    )]
    pub astra_dialect: Dialect,

    /// Log level: WARNING, INFO or DEBUG (DEBUG prints every step with its per-layer
    /// latency breakdown).
    #[arg(help_heading = "Outputs", long, value_name = "LEVEL", default_value = "WARNING", value_parser = parse_log_level)]
    pub log_level: log::LevelFilter,

    /// Simulated seconds per interval of the power series (cluster configs with `power`
    /// blocks).
    #[arg(help_heading = "Outputs", long, value_name = "SECS",
          default_value_t = RunOptions::DEFAULT_LOG_INTERVAL_S, value_parser = parse_log_interval)]
    pub log_interval: f64,

    /// Threads of a run: 1 keeps everything on the simulation's thread; 2 draws a generated
    /// workload's open-loop arrivals and folds the inter-token gaps on a second one (outputs
    /// byte-identical either way). Default: 2 on a machine with two cores or more, for runs of
    /// 10,000 requests or more.
    #[arg(help_heading = "Outputs", long, value_name = "N",
          value_parser = clap::value_parser!(u8).range(1..=2))]
    pub threads: Option<u8>,

    #[command(flatten)]
    pub astra: AstraArgs,

    #[command(flatten)]
    pub replay: ReplayArgs,

    #[command(flatten)]
    pub host: HostArgs,

    #[command(flatten)]
    pub engine: EngineArgs,

    #[command(flatten)]
    pub release2: Release2Args,
}

/// An SLO target: ms in (0, 10⁹].
fn parse_slo_ms(s: &str) -> Result<f64, Problem> {
    Bound::positive_up_to(1e9, "ms").parse(s)
}

/// `--rate`: a positive number of requests per second, at most a million.
fn parse_rate(s: &str) -> Result<f64, Problem> {
    Bound::positive_up_to(1e6, "requests per second").parse(s)
}

/// `--pd PREFILL:DECODE`: at least one of each, 10,000 in all at most.
fn parse_pd(s: &str) -> Result<Layout, Problem> {
    let bad = || {
        let expected = "PREFILL:DECODE, two counts of at least 1, 10,000 in all at most (e.g. 2:2)";
        Problem::wrong_kind(expected, Some(format!("`{s}`")))
    };
    let (p, d) = s.split_once(':').ok_or_else(bad)?;
    let (prefill, decode): (u32, u32) = (
        p.trim().parse().map_err(|_| bad())?,
        d.trim().parse().map_err(|_| bad())?,
    );
    if prefill == 0 || decode == 0 || prefill.saturating_add(decode) > 10_000 {
        return Err(bad());
    }
    Ok(Layout::Disaggregated { prefill, decode })
}

/// `--timeseries-interval`: seconds in [1 µs, 1 day].
fn parse_timeseries_interval(s: &str) -> Result<f64, Problem> {
    Bound::closed(1e-6, 86_400.0, "s").parse(s)
}

impl RunArgs {
    /// The run these flags describe, resolved and validated ([`setup::resolve`]).
    pub fn into_config(self) -> Result<SimConfig, setup::SetupError> {
        setup::resolve(self.into_options()?)
    }

    /// The plain options these flags give, after the checks that concern flags alone (which
    /// combinations make sense).
    pub fn into_options(self) -> Result<RunOptions, ConfigError> {
        self.release2.check()?;
        let workload = self.workload_source()?;
        let engine = self.engine_options()?;
        let routing = RoutingOptions {
            policy: self.request_routing_policy,
            weights: self.routing_weights,
            scorers: self.routing.routing_scorers,
            snapshot_refresh_ns: self.routing.snapshot_refresh_interval.unwrap_or(0),
            cache_signal_delay_ns: self.routing.cache_signal_delay.unwrap_or(0),
            signal_refresh: self.routing.signal_refresh,
        };
        let deployment = match self.cluster_config {
            Some(path) => Deployment::ClusterConfig(path),
            None => Deployment::Standalone {
                model: self.model,
                hardware: self.hardware,
                tp: self.tp,
                layout: match (self.pd, self.num_instances) {
                    (Some(pd), _) => pd,
                    (None, Some(n)) => Layout::Colocated(n),
                    (None, None) => Layout::Single,
                },
            },
        };
        let mut host = self.host;
        if self.llmservingsim {
            host.host_model = HostModelSwitch::Off;
        }
        Ok(RunOptions {
            workload,
            deployment,
            engine,
            routing,
            control: self.control.into(),
            diagnostics: self.diagnostics.into(),
            expert_routing: self.expert_routing_policy,
            pd_flow: if self.llmservingsim {
                PdFlow::LlmServingSim
            } else {
                self.pd_flow
            },
            tp_all_reduce: if self.llmservingsim {
                TpAllReduce::DeclaredRing
            } else {
                TpAllReduce::Vllm
            },
            profile_dir: self.profile_dir,
            architecture: self.architecture,
            output: self.output,
            summary_json: self.summary_json,
            timeseries: self.timeseries.map(|path| TimeSeriesOutput {
                path,
                interval_ns: (self.timeseries_interval * 1e9).round() as u64,
            }),
            plots: self.plots.map(|dir| PlotsOutput {
                dir,
                format: self.plot_format,
            }),
            slo_targets: SloTargets {
                ttft_ms: self.slo_ttft,
                tpot_ms: self.slo_tpot,
                e2e_ms: self.slo_e2e,
            },
            evaluation: EvaluationConfig {
                weights: self.fitness_weights,
                json: self.evaluation_json,
                export_policy: self.export_policy,
            },
            sessions_output: self.replay.sessions_output.clone(),
            replay: self.replay.mode(),
            num_reqs: (self.num_reqs > 0).then_some(self.num_reqs),
            max_requests: self.max_requests,
            seed: self.seed,
            log_level: self.log_level,
            log_interval: self.log_interval,
            threads: Threads::from_flag(self.threads),
            emit_et: self.emit_et.map(|dir| EmitEt {
                dir,
                limit: self.emit_et_limit,
                dialect: self.astra_dialect,
            }),
            prefix: self.prefix.into(),
            pim: self.pim.into(),
            astra: CosimOptions {
                astra_sim: self.astra.astra_sim.clone().or_else(astra::binary_from_env),
                ..self.astra.into()
            },
            host: host.into(),
        })
    }

    /// The engine settings these flags give (`--llmservingsim` fills the scheduler limits
    /// left unset with LLMServingSim's, and turns asynchronous scheduling off).
    fn engine_options(&self) -> Result<EngineOptions, ConfigError> {
        let defaults = EngineOptions::default();
        let sglang = self
            .engine
            .sglang()
            .map_err(|(flag, problem)| ConfigError::flag(&flag, problem))?;
        Ok(EngineOptions {
            engine: self.engine.engine,
            sglang,
            dtype: self.dtype.or(self.release2.fp),
            kv_cache_fp8: self.kv_cache_dtype == KvCacheDtype::Fp8,
            memory_utilization: self.npu_memory_utilization,
            max_num_seqs: self
                .max_num_seqs
                .or(self.llmservingsim.then_some(LLMSERVINGSIM_MAX_NUM_SEQS)),
            max_num_batched_tokens: self.max_num_batched_tokens.or(self
                .llmservingsim
                .then_some(LLMSERVINGSIM_MAX_NUM_BATCHED_TOKENS)),
            long_prefill_token_threshold: self.long_prefill_token_threshold,
            block_size: self.block_size,
            enable_chunked_prefill: switch(
                self.enable_chunked_prefill,
                self.no_enable_chunked_prefill,
                defaults.enable_chunked_prefill,
            ),
            enable_prefix_caching: switch(
                self.enable_prefix_caching,
                self.no_enable_prefix_caching,
                defaults.enable_prefix_caching,
            ),
            reserve_full_isl: switch(
                self.reserve_full_isl,
                self.no_reserve_full_isl,
                self.vllm_version.reserve_full_isl_by_default(),
            ),
            async_scheduling: !self.llmservingsim
                && switch(
                    self.async_scheduling,
                    self.no_async_scheduling,
                    self.vllm_version.async_scheduling_by_default(),
                ),
            vllm_version: self.vllm_version,
        })
    }

    /// The one workload source the flags name; dataset-reading flags only with a dataset.
    fn workload_source(&self) -> Result<WorkloadSource, ConfigError> {
        let without_dataset = || match self.dataset_args.given_without_dataset() {
            Some(flag) => Err(ConfigError::flag(flag, Problem::only_with("--dataset"))),
            None => Ok(()),
        };
        let trace = self
            .scenario
            .as_deref()
            .and_then(crate::workload::trace_scenario);
        if self.dataset_args.trace_dir.is_some() && trace.is_none() {
            return Err(ConfigError::flag(
                "--trace-dir",
                Problem::only_with("a trace scenario"),
            ));
        }
        if let Some(rate) = self.rate {
            without_dataset()?;
            return Ok(WorkloadSource::Synthetic(Synthetic {
                rate,
                prompt_tokens: self.prompt_tokens.unwrap_or(Synthetic::DEFAULT_TOKENS),
                output_tokens: self.output_tokens.unwrap_or(Synthetic::DEFAULT_TOKENS),
            }));
        }
        match (&self.dataset, &self.workload_spec, &self.scenario) {
            (Some(path), None, None) => Ok(WorkloadSource::Dataset(
                path.clone(),
                self.dataset_args.options(),
            )),
            (None, Some(path), None) => {
                without_dataset()?;
                Ok(WorkloadSource::Spec(path.clone()))
            }
            (None, None, Some(name)) => {
                without_dataset()?;
                match crate::workload::trace_scenario(name) {
                    Some(t) => {
                        let dir = self.dataset_args.trace_dir.as_deref();
                        let path = (t.locate(dir))
                            .map_err(|e| ConfigError::flag("--scenario", e.into()))?;
                        Ok(WorkloadSource::Dataset(path, t.options()))
                    }
                    None => Ok(WorkloadSource::Scenario(name.clone())),
                }
            }
            _ => Err(ConfigError::flag(
                "--dataset",
                Problem::needs("exactly one of --dataset, --workload-spec and --scenario"),
            )),
        }
    }
}

/// An on/off setting given as a `--x` / `--no-x` pair (the last one given wins, clap resets
/// the other): `default` when neither is given.
fn switch(on: bool, off: bool, default: bool) -> bool {
    if on {
        true
    } else if off {
        false
    } else {
        default
    }
}

/// The help of an on/off flag: `text` and its default.
fn switch_help(text: &str, default: bool) -> String {
    format!("{text} [default: {}]", if default { "on" } else { "off" })
}

/// The help of a scheduler limit whose default is vLLM 0.19's for the instance's GPU
/// ([`BatchLimits::vllm_serve`]), LLMServingSim's under `--llmservingsim`.
fn batch_limit_help(text: &str, limit: fn(BatchLimits) -> u32, llmservingsim: u32) -> String {
    format!(
        "{text}. A cluster config's per-instance value wins over the flag [default: vLLM \
         0.19's for the GPU: {} on GPUs of at least 70 GiB other than A100, else {}; {} with \
         --llmservingsim]",
        limit(BatchLimits::VLLM_LARGE_GPU),
        limit(BatchLimits::VLLM_OTHER_GPU),
        llmservingsim
    )
}

/// The `--kv-cache-dtype` value of a KV cache in fp8 or not.
pub fn kv_cache_dtype(fp8: bool) -> KvCacheDtype {
    if fp8 {
        KvCacheDtype::Fp8
    } else {
        KvCacheDtype::Auto
    }
}

fn parse_dtype(s: &str) -> Result<Dtype, Problem> {
    s.parse()
}

/// `--expert-routing-policy`: ours, or LLMServingSim 2.0's `FAST`, its `RAND` drawn once per
/// step for every layer, which is what `RAND` does here.
fn parse_expert_routing(s: &str) -> Result<ExpertRouting, UnknownName> {
    match s.eq_ignore_ascii_case("FAST") {
        true => ExpertRouting::parse("RAND", 0),
        false => ExpertRouting::parse(s, 0),
    }
}

fn parse_routing_weights(s: &str) -> Result<RoutingWeights, RoutingSpecError> {
    s.parse()
}

fn parse_utilization(s: &str) -> Result<f64, Problem> {
    Bound::fraction_up_to(1.0).parse(s)
}

fn parse_vllm_arrival(s: &str) -> Result<VllmArrival, Problem> {
    match s {
        "queued" => Ok(VllmArrival::Queued),
        "client" => Ok(VllmArrival::Client),
        _ => Err(Problem::not_one_of(format!("`{s}`"), &["queued", "client"])),
    }
}

fn parse_log_level(s: &str) -> Result<log::LevelFilter, Problem> {
    match s.to_ascii_uppercase().as_str() {
        "WARNING" | "WARN" => Ok(log::LevelFilter::Warn),
        "INFO" => Ok(log::LevelFilter::Info),
        "DEBUG" => Ok(log::LevelFilter::Debug),
        _ => Err(Problem::not_one_of(
            format!("`{s}`"),
            &["WARNING", "INFO", "DEBUG"],
        )),
    }
}
