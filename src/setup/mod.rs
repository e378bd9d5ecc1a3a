//! A run, resolved: [`RunOptions`] (plain, typed values: what the flags, a sweep point or a
//! policy bundle say) become a [`SimConfig`] (everything a run needs, validated) through
//! [`resolve`], with no command-line types involved. Resolution applies the domain rules:
//! model and hardware, the cluster config's instances with their per-instance overrides
//! (instance value > flag > default, as in LLMServingSim), parallelism and expert layout,
//! pipelines, weight placement, PIM, the prefix cache's lower tier, power, ASTRA-Sim
//! networks and the host model.

mod astra_dp;
pub mod batch_limits;
mod control;
mod host;
mod instances;
mod parallel;
mod paths;
mod pim;
mod pipeline;
mod placement;
mod power;
mod prefix_storage;
pub mod quick;
mod scaling;
pub mod sglang;
mod threads;

pub use batch_limits::{
    BatchLimits, LLMSERVINGSIM_MAX_NUM_BATCHED_TOKENS, LLMSERVINGSIM_MAX_NUM_SEQS,
};
pub use control::{ControlOptions, RoutingOptions};
pub use host::HostOptions;
pub use instances::{EngineOptions, InstanceConfig, ResolvedSpecs};
pub use parallel::TpAllReduce;
pub use paths::{NamedFile, cluster_named_files};
pub use pim::{InstancePim, PimOptions};
pub use placement::InstancePlacement;
pub use power::{PowerConfig, parse_log_interval};
pub use prefix_storage::{PrefixStorageOptions, TierPool};
pub use quick::Layout;
pub use scaling::{MAX_REPLICA_SLOTS, MIN_INTERVAL_NS};
pub use sglang::SglangOptions;
pub use threads::{AUTO_FROM_REQUESTS, Threads};

use crate::Nanos;
use crate::astra::{self, AstraMode, AstraOptions, CosimOptions, InstanceNetwork};
use crate::chakra::EmitEt;
use crate::config::{
    ClusterConfig, ClusterLinks, ConfigError, Hardware, InstanceRole, KvCapacity, ModelArch,
    PrefixStorage, Problem,
};
use crate::control::ControlConfig;
use crate::latency::ExpertRouting;
use crate::metrics::{FitnessWeights, PlotFormat, SloTargets};
use crate::router::{RoutingPolicy, SignalConfig};
use crate::workload::DatasetOptions;
use prefix_storage::Cluster;
use std::path::PathBuf;

/// Where the main job's requests come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkloadSource {
    /// A dataset file (LLMServingSim JSONL or a trace) and how to read it.
    Dataset(PathBuf, DatasetOptions),
    /// A WorkloadSpec YAML file, generated in memory.
    Spec(PathBuf),
    /// A built-in scenario, generated in memory.
    Scenario(String),
    /// The quick workload (`--rate`, `--prompt-tokens`, `--output-tokens`), generated in
    /// memory.
    Synthetic(crate::workload::spec::Synthetic),
}

/// How arrivals are replayed.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum ReplayMode {
    /// Every arrival at its time (the default).
    #[default]
    Trace,
    /// Arrival gaps from the first arrival divided by this factor.
    Speedup(f64),
    /// At most this many requests in the cluster; arrivals enter as room frees.
    Concurrency(usize),
}

/// A time series of the run (`--timeseries`): where it goes and its row interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeSeriesOutput {
    pub path: PathBuf,
    /// Simulated ns per row.
    pub interval_ns: u64,
}

/// Pictures of a run: where they go and their format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlotsOutput {
    pub dir: PathBuf,
    pub format: PlotFormat,
}

/// What is deployed: one instance from model, hardware and TP, or a cluster config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deployment {
    /// One instance (`None`: the defaults, Llama-3.1-8B on an H100-SXM at TP 1), or the
    /// quick cluster of `layout` of such instances (`--num-instances`, `--pd`).
    Standalone {
        model: Option<String>,
        hardware: Option<String>,
        tp: Option<u32>,
        layout: Layout,
    },
    /// The instances of an LLMServingSim cluster config.
    ClusterConfig(PathBuf),
}

/// What the run asks of its evaluation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvaluationConfig {
    /// `--fitness-weights`: the fitness is then printed and in the summary JSON.
    pub weights: Option<FitnessWeights>,
    /// `--evaluation-json`.
    pub json: Option<PathBuf>,
    /// `--export-policy`: the run's control-plane settings written as a policy bundle.
    pub export_policy: Option<PathBuf>,
}

impl EvaluationConfig {
    /// Whether the run computes a fitness or writes an evaluation.
    pub fn requested(&self) -> bool {
        self.weights.is_some() || self.json.is_some()
    }
}

/// A run as its options describe it, before resolution: plain typed values, no command-line
/// types. The command line builds one from its flags; a sweep or a policy bundle can build
/// one directly.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub workload: WorkloadSource,
    pub deployment: Deployment,
    /// Engine settings every instance starts from (a cluster config may override them).
    pub engine: EngineOptions,
    /// The routing policy, its weights or scorers, and what the router sees.
    pub routing: RoutingOptions,
    /// The cluster control plane: the policy bundle and the settings over it.
    pub control: ControlOptions,
    /// Decision traces and anomaly detection.
    pub diagnostics: crate::trace::Diagnostics,
    /// How MoE tokens pick experts (a random policy is reseeded per instance).
    pub expert_routing: ExpertRouting,
    /// How a prefilled request reaches its decode instance (`--pd-flow`).
    pub pd_flow: crate::config::PdFlow,
    /// How a cluster config's TP all-reduces are priced on its declared link
    /// (`--llmservingsim`: the ring alone).
    pub tp_all_reduce: TpAllReduce,
    pub profile_dir: Option<PathBuf>,
    pub architecture: Option<PathBuf>,
    pub output: Option<PathBuf>,
    pub summary_json: Option<PathBuf>,
    pub timeseries: Option<TimeSeriesOutput>,
    pub plots: Option<PlotsOutput>,
    pub slo_targets: SloTargets,
    /// Fitness and evaluation result (`--fitness-weights`, `--evaluation-json`).
    pub evaluation: EvaluationConfig,
    pub sessions_output: Option<PathBuf>,
    pub replay: ReplayMode,
    pub num_reqs: Option<usize>,
    pub max_requests: Option<u64>,
    pub seed: u64,
    pub log_level: log::LevelFilter,
    /// Seconds between power log lines.
    pub log_interval: f64,
    /// Threads of the run (`--threads`).
    pub threads: Threads,
    pub emit_et: Option<EmitEt>,
    pub prefix: PrefixStorageOptions,
    pub pim: PimOptions,
    pub astra: CosimOptions,
    pub host: HostOptions,
}

impl RunOptions {
    /// Seed of the run's random streams, by default.
    pub const DEFAULT_SEED: u64 = 0;
    /// Simulated seconds per interval of the power series, by default.
    pub const DEFAULT_LOG_INTERVAL_S: f64 = 1.0;

    /// The options of a run of `workload` with every setting at the default of its flag
    /// (LLMServingSim's where it has one): one Llama-3.1-8B instance on an H100-SXM, TP 1,
    /// vLLM 0.19's scheduler limits for its GPU (H100: 1024 sequences, 8192 tokens), `LOAD`
    /// routing, seed 0.
    pub fn new(workload: WorkloadSource) -> RunOptions {
        RunOptions {
            workload,
            deployment: Deployment::Standalone {
                model: None,
                hardware: None,
                tp: None,
                layout: Layout::Single,
            },
            engine: EngineOptions::default(),
            routing: RoutingOptions::default(),
            control: ControlOptions::default(),
            diagnostics: crate::trace::Diagnostics::default(),
            expert_routing: ExpertRouting::Balanced,
            pd_flow: crate::config::PdFlow::Vllm,
            tp_all_reduce: TpAllReduce::Vllm,
            profile_dir: None,
            architecture: None,
            output: None,
            summary_json: None,
            timeseries: None,
            plots: None,
            slo_targets: SloTargets::default(),
            evaluation: EvaluationConfig::default(),
            sessions_output: None,
            replay: ReplayMode::Trace,
            num_reqs: None,
            max_requests: None,
            seed: RunOptions::DEFAULT_SEED,
            log_level: log::LevelFilter::Warn,
            log_interval: RunOptions::DEFAULT_LOG_INTERVAL_S,
            threads: Threads::Auto,
            emit_et: None,
            prefix: PrefixStorageOptions::default(),
            pim: PimOptions::default(),
            astra: CosimOptions::default(),
            host: HostOptions::default(),
        }
    }
}

/// Everything a run needs, resolved and validated.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub workload: WorkloadSource,
    pub output: Option<PathBuf>,
    pub summary_json: Option<PathBuf>,
    /// The time series to write (`--timeseries`).
    pub timeseries: Option<TimeSeriesOutput>,
    /// SLO targets (`--slo-ttft`, `--slo-tpot`, `--slo-e2e`).
    pub slo_targets: SloTargets,
    /// Fitness and evaluation result (`--fitness-weights`, `--evaluation-json`).
    pub evaluation: EvaluationConfig,
    /// The policy bundle the run read (`--policy-config`), whose content names the policy.
    pub policy_config: Option<PathBuf>,
    /// Pictures of the run (`--plots`).
    pub plots: Option<PlotsOutput>,
    /// Per-session CSV (workloads with sessions).
    pub sessions_output: Option<PathBuf>,
    /// How arrivals are replayed.
    pub replay: ReplayMode,
    /// Requests to load; `None` loads all.
    pub num_reqs: Option<usize>,
    /// Most requests a workload spec may plan (`--max-requests`); `None`: the default.
    pub max_requests: Option<u64>,
    /// The configured instances, in file order of the cluster config; at least one. In an
    /// autoscaled run, each is the template of [`SimConfig::replicas_per_template`]
    /// consecutive replica slots, held once: [`SimConfig::instance`] and
    /// [`SimConfig::each_instance`] see the instances by id.
    pub instances: Vec<InstanceConfig>,
    /// Each configured instance's KV cache (see [`SimConfig::kv`]).
    pub kv: Vec<KvCapacity>,
    /// Replica slots per configured instance: `max_replicas` when autoscaled, else 1.
    pub replicas_per_template: usize,
    /// Nodes the instances sit on.
    pub num_nodes: usize,
    /// The links KV transfers take, when some instances are prefill or decode instances.
    pub links: Option<ClusterLinks>,
    /// The lower tier of the prefix cache (`--prefix-storage`); each instance's pool is in
    /// its [`InstanceConfig::lower_tier`].
    pub prefix_storage: Option<PrefixStorage>,
    /// How requests are routed to instances.
    pub routing: RoutingPolicy,
    /// What the router sees of the instances and how stale.
    pub signals: SignalConfig,
    /// How a prefilled request reaches its decode instance (`--pd-flow`).
    pub pd_flow: crate::config::PdFlow,
    /// The cluster control plane (admission, priority, gateway queue, latencies, instance
    /// scheduling policies).
    pub control: ControlConfig,
    /// Decision traces and anomaly detection.
    pub diagnostics: crate::trace::Diagnostics,
    /// Profile root for the measured latency backend; `None` selects the roofline.
    pub profile_dir: Option<PathBuf>,
    /// Architecture YAML overriding the bundled layer sequence.
    pub architecture: Option<PathBuf>,
    pub seed: u64,
    pub log_level: log::LevelFilter,
    /// Threads of the run (`--threads`).
    pub threads: Threads,
    /// Execution traces of the first steps to write (`--emit-et`).
    pub emit_et: Option<EmitEt>,
    /// The power model, when every node of the cluster config has a `power` block.
    pub power: Option<PowerConfig>,
    /// The vLLM release modelled (`--vllm-version`).
    pub vllm_version: crate::config::VllmVersion,
}

impl SimConfig {
    /// GPUs the deployment uses: the sum over the configured instances (the templates of an
    /// autoscaled run) of TP × PP.
    pub fn gpus(&self) -> u64 {
        (self.instances.iter())
            .map(|i| u64::from(i.tp) * u64::from(i.pp))
            .sum()
    }

    /// The run's instances: the configured ones, times the replica slots of each when
    /// autoscaled.
    pub fn num_instances(&self) -> usize {
        self.instances.len() * self.replicas_per_template
    }

    /// Instance `id`'s configuration (a replica slot's is its template's).
    pub fn instance(&self, id: usize) -> &InstanceConfig {
        &self.instances[id / self.replicas_per_template]
    }

    /// Instance `id`'s KV cache (a replica slot's is its template's).
    pub fn kv(&self, id: usize) -> &KvCapacity {
        &self.kv[id / self.replicas_per_template]
    }

    /// Every instance's configuration, by id (each template once per replica slot).
    pub fn each_instance(&self) -> impl Iterator<Item = &InstanceConfig> + Clone {
        let per = self.replicas_per_template;
        (self.instances.iter()).flat_map(move |i| std::iter::repeat_n(i, per))
    }

    /// The ASTRA-Sim settings of the run (those of the first instance: binary, mode, memo and
    /// the other flags are the same for every instance; each instance's own network is in its
    /// [`InstanceConfig::astra`]); `None`: the analytical network backend.
    pub fn astra(&self) -> Option<&AstraOptions> {
        self.instances.first().and_then(|i| i.astra.as_ref())
    }
}

/// The instances of a deployment and what the cluster around them holds.
struct Deployed {
    instances: Vec<InstanceConfig>,
    num_nodes: usize,
    /// Per-instance ASTRA-Sim networks (empty unless ASTRA-Sim prices the run).
    networks: Vec<InstanceNetwork>,
    links: Option<ClusterLinks>,
    prefix_storage: Option<PrefixStorage>,
    power: Option<PowerConfig>,
}

/// Why a run's options do not resolve.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A file or value of the configuration is invalid (its file, line and field named).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Instance `id`'s configuration is invalid (a run of several instances).
    #[error("instance {id}")]
    Instance {
        id: usize,
        #[source]
        source: ConfigError,
    },
    /// An autoscaled run with more replica slots than [`MAX_REPLICA_SLOTS`].
    #[error(
        "autoscaling: {templates} instance template(s) × {max_replicas} max replicas are {slots} \
         replica slots, more than the limit of {MAX_REPLICA_SLOTS}; lower --autoscale-max (or \
         the policy bundle's autoscale.max_replicas)"
    )]
    TooManyReplicaSlots {
        templates: u64,
        max_replicas: u32,
        slots: u64,
    },
    /// An autoscaler interval under [`MIN_INTERVAL_NS`].
    #[error(
        "autoscaling: an interval of {interval_ns} ns is under the limit of {MIN_INTERVAL_NS} ns \
         (1 ms); raise --autoscale-interval (or the policy bundle's autoscale.interval)"
    )]
    AutoscaleIntervalTooShort { interval_ns: Nanos },
    /// An autoscaled run with a member of a data-parallel group.
    #[error(
        "autoscaling: instance {instance} is a member of a data-parallel group; a DP group \
         steps in lock step as one unit, so its members cannot come and go one by one"
    )]
    AutoscaledDpMember { instance: usize },
}

/// Resolves and validates `options` into the configuration of a run.
pub fn resolve(options: RunOptions) -> Result<SimConfig, SetupError> {
    check_diagnostics(&options.diagnostics)?;
    let resolved = control::resolve(&options.control, &options.routing)?;
    let mut deployed = deploy(&options)?;
    attach_astra(&options, &mut deployed)?;
    options.host.assign(&mut deployed.instances)?;
    sglang::check_supported(&deployed.instances)?;
    check_emit_et(&options, &deployed.instances)?;
    let replicas_per_template = match &resolved.control.autoscale {
        Some(a) => {
            check_autoscaled_power(&options, &deployed)?;
            scaling::check_slots(&deployed.instances, a)?
        }
        None => 1,
    };
    let kv = scaling::kv_capacities(&deployed.instances, replicas_per_template)?;
    sglang::size_running_requests(&mut deployed.instances, &kv);
    let sized = KvSizing {
        kv,
        replicas_per_template,
    };
    Ok(sim_config(options, resolved, deployed, sized))
}

/// The instances of the run's deployment: one given by model, hardware and TP (alone or in a
/// `--layout`), or a cluster config's.
fn deploy(options: &RunOptions) -> Result<Deployed, SetupError> {
    let pricing = parallel::CommPricing::of(options.astra.selects_astra(), options.tp_all_reduce);
    let deployed = match &options.deployment {
        Deployment::Standalone {
            model,
            hardware,
            tp,
            layout: Layout::Single,
        } => standalone(options, model.as_deref(), hardware.as_deref(), *tp, pricing)?,
        Deployment::Standalone {
            model,
            hardware,
            tp,
            layout,
        } => {
            let text = quick::cluster_text(
                model.as_deref().unwrap_or(DEFAULT_MODEL),
                hardware.as_deref().unwrap_or(DEFAULT_HARDWARE),
                tp.unwrap_or(DEFAULT_TP),
                *layout,
            )?;
            let flag = layout.flag();
            let config = ClusterConfig::parse(&text, flag)?;
            let mut deployed =
                deploy_cluster(options, config, std::path::Path::new(flag), pricing)?;
            parallel::hardware_tp_links(&mut deployed.instances);
            deployed
        }
        Deployment::ClusterConfig(path) => {
            let config = ClusterConfig::load(path)?;
            deploy_cluster(options, config, path, pricing)?
        }
    };
    Ok(deployed)
}

/// The power model counts the configured instances, each powered for the whole run, not the
/// replicas an autoscaler provisions and releases: a cluster config with `power` blocks is
/// refused with an autoscaler (its replica slots once indexed past the modelled instances).
fn check_autoscaled_power(options: &RunOptions, deployed: &Deployed) -> Result<(), SetupError> {
    if deployed.power.is_none() {
        return Ok(());
    }
    let source = match &options.deployment {
        Deployment::ClusterConfig(path) => path.display().to_string(),
        Deployment::Standalone { .. } => "cluster config".to_owned(),
    };
    Err(SetupError::Config(ConfigError::invalid(
        &source,
        "nodes[0].power",
        Problem::unsupported(
            "the power model with an autoscaler (it counts the configured instances, not \
             the replicas that come and go)",
            Some(
                "drop the `power` blocks, or the autoscaler (--autoscale, or the policy \
                  bundle's `autoscale`)",
            ),
        ),
    )))
}

/// `--emit-et` cannot write the traces of instances that offload attention to PIM.
fn check_emit_et(options: &RunOptions, instances: &[InstanceConfig]) -> Result<(), SetupError> {
    if options.emit_et.is_some() && instances.iter().any(|i| i.pim.is_some()) {
        return Err(SetupError::Config(ConfigError::flag(
            "--emit-et",
            Problem::unsupported(
                "writing the traces of instances that offload attention to PIM (they would \
                 need PIM_COMP nodes)",
                None,
            ),
        )));
    }
    Ok(())
}

/// The KV capacity of each instance and the replica slots of each template.
struct KvSizing {
    kv: Vec<KvCapacity>,
    replicas_per_template: usize,
}

/// The run's configuration: the options' settings, with the control plane and routing
/// `resolved`, the instances `deployed` and `sized`.
fn sim_config(
    options: RunOptions,
    resolved: control::Resolved,
    deployed: Deployed,
    sized: KvSizing,
) -> SimConfig {
    SimConfig {
        workload: options.workload,
        output: options.output,
        summary_json: options.summary_json,
        timeseries: options.timeseries,
        slo_targets: options.slo_targets,
        evaluation: options.evaluation,
        policy_config: options.control.policy_config,
        plots: options.plots,
        sessions_output: options.sessions_output,
        replay: options.replay,
        num_reqs: options.num_reqs,
        max_requests: options.max_requests,
        instances: deployed.instances,
        kv: sized.kv,
        replicas_per_template: sized.replicas_per_template,
        num_nodes: deployed.num_nodes,
        links: deployed.links,
        prefix_storage: deployed.prefix_storage,
        routing: resolved.routing,
        signals: resolved.signals,
        pd_flow: options.pd_flow,
        control: resolved.control,
        diagnostics: options.diagnostics,
        profile_dir: options.profile_dir,
        architecture: options.architecture,
        seed: options.seed,
        log_level: options.log_level,
        threads: options.threads,
        emit_et: options.emit_et,
        power: deployed.power,
        vllm_version: options.engine.vllm_version,
    }
}

/// The trace flags need a trace level, and a trace level needs somewhere to go.
fn check_diagnostics(d: &crate::trace::Diagnostics) -> Result<(), ConfigError> {
    let traced = d.trace_level != crate::trace::TraceLevel::None;
    let needs_level =
        |flag: &str| ConfigError::flag(flag, Problem::needs("--trace-level decisions or detailed"));
    if !traced && d.trace_output.is_some() {
        return Err(needs_level("--trace-output"));
    }
    if !traced && d.summarize_trace {
        return Err(needs_level("--summarize-trace"));
    }
    if traced && d.trace_output.is_none() && !d.summarize_trace {
        return Err(ConfigError::flag(
            "--trace-level",
            Problem::needs("--trace-output or --summarize-trace, or it traces nothing"),
        ));
    }
    Ok(())
}

/// One instance from model, hardware and TP (defaults: Llama-3.1-8B, H100-SXM, 1).
fn standalone(
    options: &RunOptions,
    model: Option<&str>,
    hardware: Option<&str>,
    tp: Option<u32>,
    pricing: parallel::CommPricing,
) -> Result<Deployed, ConfigError> {
    options.pim.check_standalone()?;
    let model = ModelArch::resolve(model.unwrap_or(DEFAULT_MODEL))?;
    let hardware = Hardware::resolve(hardware.unwrap_or(DEFAULT_HARDWARE))?;
    let tp = tp.unwrap_or(DEFAULT_TP);
    let mut instances = vec![options.engine.instance(0, model, hardware, tp)];
    parallel::standalone(&mut instances[0], pricing);
    let prefix_storage = options.prefix.assign(None, &mut instances)?;
    let network = InstanceNetwork::from_hardware(&instances[0].hardware, instances[0].tp);
    Ok(Deployed {
        instances,
        num_nodes: 1,
        networks: vec![network],
        links: None,
        prefix_storage,
        power: None,
    })
}

/// The model, hardware and TP degree of a deployment that names none.
pub const DEFAULT_MODEL: &str = "meta-llama/Llama-3.1-8B";
pub const DEFAULT_HARDWARE: &str = "H100-SXM";
pub const DEFAULT_TP: u32 = 1;

/// The instances of `cluster` (read from `path`), with everything the config sets for them.
fn deploy_cluster(
    options: &RunOptions,
    mut cluster: ClusterConfig,
    path: &std::path::Path,
    pricing: parallel::CommPricing,
) -> Result<Deployed, ConfigError> {
    let source = path.display().to_string();
    let astra_selected = pricing == parallel::CommPricing::Astra;
    let pims = options.pim.resolve(&mut cluster, path, &source)?;
    let placed = cluster.instances(&source)?;
    let mut specs = ResolvedSpecs::default();
    let mut instances = placed
        .iter()
        .map(|placed| options.engine.cluster_instance(placed, &source, &mut specs))
        .collect::<Result<Vec<_>, _>>()?;
    placement::assign(&cluster, &placed, &mut instances, &source)?;
    let expert = (options.expert_routing, options.seed);
    parallel::resolve(&cluster, &placed, &mut instances, expert, pricing, &source)?;
    pipeline::resolve(&cluster, &placed, &mut instances, astra_selected, &source)?;
    pim::assign(pims, &placed, &mut instances, astra_selected, &source)?;
    if instances.is_empty() {
        return Err(ConfigError::invalid(&source, "nodes", Problem::Empty));
    }
    // Only ASTRA-Sim reads the per-instance networks (and checks link lists).
    let networks = if astra_selected {
        InstanceNetwork::for_cluster(&cluster, &placed, &source)?
    } else {
        Vec::new()
    };
    let links = if placed.iter().any(|p| p.role != InstanceRole::Colocated) {
        Some(ClusterLinks::new(&cluster, &placed, &source)?)
    } else {
        None
    };
    let layout = Cluster {
        config: &cluster,
        placed: &placed,
        source: &source,
    };
    let prefix_storage = options.prefix.assign(Some(&layout), &mut instances)?;
    let power = power::resolve(&cluster, &placed, &instances, options.log_interval, &source)?;
    Ok(Deployed {
        instances,
        num_nodes: cluster.num_nodes,
        networks,
        links,
        prefix_storage,
        power,
    })
}

/// Gives every instance its ASTRA-Sim settings when ASTRA-Sim prices the run: the run's
/// flags with the instance's own network (pipelined, prefill and DP-group instances get the
/// networks of their processes).
fn attach_astra(options: &RunOptions, deployed: &mut Deployed) -> Result<(), ConfigError> {
    let instances = &mut deployed.instances;
    astra_dp::refuse_network_config(&options.astra, instances)?;
    let astra = options.astra.resolve_instances(&deployed.networks)?;
    for (inst, settings) in instances.iter_mut().zip(astra.into_iter().flatten()) {
        let streams = inst
            .placement
            .as_ref()
            .is_some_and(InstancePlacement::streams_weights);
        if streams && settings.mode == AstraMode::Stock {
            return Err(ConfigError::flag(
                "--astra-mode",
                Problem::unsupported(
                    "stock ASTRA-Sim with weights a `placement` keeps outside the GPU (it has \
                     no CXL memory for them)",
                    Some("use the fork (--astra-mode fork)"),
                ),
            ));
        }
        inst.astra = Some(settings);
    }
    let links = deployed.links.as_ref();
    astra_prefill_networks(instances, links, &options.astra)?;
    astra_pipeline_networks(instances, &options.astra)?;
    astra_dp::group_networks(instances, links);
    Ok(())
}

/// Gives every pipelined instance co-simulated by ASTRA-Sim the network of its process: its
/// stages of TP NPUs, `[tp, pp]` ([`astra::pipeline_network`]), the stages over the link its
/// pipeline sends over (a MoE DP group's members get their group's network afterwards,
/// [`astra_dp::group_networks`]). A `--network-config` (one network of TP NPUs for every
/// instance) cannot describe that and is refused with pipelined instances.
fn astra_pipeline_networks(
    instances: &mut [InstanceConfig],
    args: &CosimOptions,
) -> Result<(), ConfigError> {
    for (id, inst) in instances.iter_mut().enumerate() {
        let (Some(pipeline), Some(options), None) =
            (&inst.pipeline, inst.astra.as_mut(), inst.dp_group)
        else {
            continue;
        };
        if args.network_config.is_some() {
            return Err(network_config_refused(
                format!("pipelined instances (instance {id}, pp_size {})", inst.pp),
                "their ASTRA-Sim network holds every stage",
            ));
        }
        options.network = astra::pipeline_network(&options.network, inst.pp, pipeline.link);
    }
    Ok(())
}

/// `--network-config` refused with `instances`: one network file cannot stand for the
/// networks generated from the cluster config (`why`: what those hold).
pub(super) fn network_config_refused(instances: String, why: &str) -> ConfigError {
    let what = format!("one --network-config for {instances}");
    let hint = format!("{why} and is generated from the cluster config");
    ConfigError::flag("--network-config", Problem::unsupported(what, Some(&hint)))
}

/// Gives every prefill instance co-simulated by ASTRA-Sim the network of its process: its
/// TP NPUs and their KV receivers, one hop away over the link LLMServingSim's cluster
/// network puts between them ([`astra::prefill_network`]). A `--network-config` (one network
/// for every instance) cannot describe that and is refused with prefill instances.
fn astra_prefill_networks(
    instances: &mut [InstanceConfig],
    links: Option<&ClusterLinks>,
    args: &CosimOptions,
) -> Result<(), ConfigError> {
    for (id, inst) in instances.iter_mut().enumerate() {
        let (InstanceRole::Prefill, Some(options), Some(links)) =
            (inst.role, inst.astra.as_mut(), links)
        else {
            continue;
        };
        if args.network_config.is_some() {
            return Err(network_config_refused(
                format!("prefill instances (instance {id})"),
                "their ASTRA-Sim network holds their KV receivers too",
            ));
        }
        options.network =
            astra::prefill_network(&options.network, links.receiver_link(id, inst.tp));
    }
    Ok(())
}
