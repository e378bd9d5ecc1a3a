//! The main job: load the workload, size the KV cache, run the engine, write the outputs.

use crate::Nanos;
use crate::astra::{self, AstraBackend, AstraInstance};
use crate::chakra::{StepEmitter, read_et, render_dump};
use crate::cli::{
    EtCommand, GenerateArgs, InstanceConfig, ReplayMode, SimConfig, ValidateArgs, WorkloadSource,
};
use crate::config::{Dtype, KvSizing, kv_capacity};
use crate::engine::{self, Dynamics, InstanceSetup, Observer, StepEvent};
use crate::latency::{LatencyBackend, ProfileDb, ProfileSpec, Roofline};
use crate::metrics::{
    InstanceInfo, PlotFormat, PrefixCacheStats, RequestCsv, RequestRecord, RunInfo, SessionSummary,
    Summary, SummaryCollector, Validation, write_atomically, write_sessions_csv,
};
use crate::router::Router;
use crate::workload::sessions::{SessionRegistry, SessionSet};
use crate::workload::spec::{
    Generator, Overrides, SCENARIOS, WorkloadSpec, generate_workload, scenario, write_jsonl,
};
use crate::workload::{Request, Workload, read_workload};
use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::borrow::Cow;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Runs the simulation described by `config` and returns its summary. The CSV and JSON files
/// are in place when this returns `Ok`; on error, none of them is touched.
pub fn run(config: &SimConfig) -> anyhow::Result<Summary> {
    let mut workload = match &config.workload {
        WorkloadSource::Dataset(path) => read_workload(path, config.num_reqs)?,
        WorkloadSource::Spec(path) => {
            let spec = WorkloadSpec::load(path)?;
            let overrides = Overrides {
                num_requests: config.num_reqs.map(|n| n as u64),
                seed: None,
            };
            generate_workload(&spec, overrides)?
        }
    };
    let has_sessions = !workload.sessions.is_empty();
    if config.sessions_output.is_some() && !has_sessions {
        anyhow::bail!("--sessions-output: the workload has no sessions");
    }
    let max_in_flight = replay(&mut workload, config.replay);
    let mut registry = SessionRegistry::new(&workload.sessions);
    let requests = initial_requests(&workload, &mut registry);
    let multi = config.instances.len() > 1;
    let first_arrival = requests.first().map_or(0, |r| r.arrival_ns);
    eprintln!("{}", astra::describe(config.astra.as_ref()));
    let mut setups = Vec::with_capacity(config.instances.len());
    let mut capacities = Vec::with_capacity(config.instances.len());
    let mut backends = Vec::with_capacity(config.instances.len());
    for (id, inst) in config.instances.iter().enumerate() {
        let label = if multi {
            format!("instance {id}: ")
        } else {
            String::new()
        };
        let capacity = kv_capacity(&inst.model, &kv_sizing(inst));
        let capacity = if multi {
            capacity.with_context(|| format!("instance {id}"))?
        } else {
            capacity?
        };
        let num_blocks = u32::try_from(capacity.num_blocks)
            .context("the KV cache has more than 2^32 blocks; raise --block-size")?;
        log::info!(
            "{label}KV cache: {} tokens / {} blocks ({:.2} GiB per GPU at utilization {})",
            capacity.num_blocks * u64::from(capacity.block_size),
            capacity.num_blocks,
            (capacity.num_blocks * u64::from(capacity.block_size) * capacity.kv_bytes_per_token)
                as f64
                / f64::from(1u32 << 30),
            inst.memory_utilization
        );
        setups.push(InstanceSetup {
            model_name: inst.model.name.clone(),
            max_model_len: u32::try_from(inst.model.max_position_embeddings).unwrap_or(u32::MAX),
            num_blocks,
            scheduler: inst.scheduler.clone(),
        });
        capacities.push(capacity);
        backends.push(Backend::new(config, inst, &label, first_arrival)?);
    }

    let csv = match &config.output {
        Some(path) if has_sessions => Some(RequestCsv::create_with_sessions(path)?),
        Some(path) => Some(RequestCsv::create(path)?),
        None => None,
    };
    let emit_et = match &config.emit_et {
        None => Vec::new(),
        Some(settings) => config
            .instances
            .iter()
            .enumerate()
            .map(|(id, inst)| {
                let mut settings = settings.clone();
                if multi {
                    settings.dir = settings.dir.join(format!("instance{id}"));
                }
                StepEmitter::new(settings, &inst.model, inst.tp, inst.dtype)
            })
            .collect(),
    };
    let mut outputs = Outputs {
        csv,
        summary: SummaryCollector::new(),
        progress: Progress::new(workload.num_requests() as u64),
        emit_et,
        multi,
        sessions: has_sessions.then_some(&workload.sessions),
    };
    let mut router = Router::new(config.routing.clone(), config.seed);
    let mut dyn_backends: Vec<&mut dyn LatencyBackend> =
        backends.iter_mut().map(Backend::as_dyn).collect();
    let dynamics = Dynamics {
        injector: &mut registry,
        max_in_flight,
    };
    let outcome = engine::run_cluster_with(
        &requests,
        &setups,
        &mut dyn_backends,
        &mut router,
        &mut outputs,
        dynamics,
    )?;
    drop(dyn_backends);
    outputs.progress.finish();

    let instances = config
        .instances
        .iter()
        .zip(&capacities)
        .zip(&mut backends)
        .zip(&outcome.instances)
        .map(|(((inst, capacity), backend), out)| InstanceInfo {
            node_id: inst.node_id,
            model: inst.model.name.clone(),
            hardware: inst.hardware.name.clone(),
            backend: backend.as_dyn().name().to_owned(),
            tp: inst.tp,
            num_kv_blocks: capacity.num_blocks,
            block_size: capacity.block_size,
            preemptions: out.stats.preemptions,
            recomputed_tokens: out.stats.recomputed_tokens,
            prefix_cache: inst
                .scheduler
                .enable_prefix_caching
                .then_some(PrefixCacheStats {
                    requested_tokens: out.stats.prefix_requested_tokens,
                    hit_tokens: out.stats.prefix_hit_tokens,
                }),
            profile_lookups: backend.as_dyn().profile_lookups(),
        })
        .collect();
    for backend in backends {
        backend.finish()?;
    }
    let info = RunInfo {
        seed: config.seed,
        total_clocks_ns: outcome.total_clocks_ns,
        routing_policy: config.routing.to_string(),
        num_nodes: config.num_nodes,
        instances,
    };
    let mut summary = outputs.summary.finish(info);
    if has_sessions {
        let outcomes = registry.outcomes();
        summary.set_sessions(SessionSummary::new(&outcomes));
        if let Some(path) = &config.sessions_output {
            write_sessions_csv(path, &outcomes)?;
        }
    }
    if let Some(path) = &config.summary_json {
        summary.write_json(path)?;
    }
    if let Some(csv) = outputs.csv {
        csv.commit()?;
    }
    Ok(summary)
}

/// Applies the replay mode to the arrivals known before the run; returns the concurrency
/// limit of concurrency mode.
fn replay(workload: &mut Workload, mode: ReplayMode) -> Option<usize> {
    let first = workload.first_arrival()?;
    match mode {
        ReplayMode::Trace => None,
        ReplayMode::Speedup(f) => {
            workload.retime(|t| first + ((t - first) as f64 / f).round() as Nanos);
            None
        }
        ReplayMode::Concurrency(n) => {
            workload.retime(|_| first);
            Some(n)
        }
    }
}

/// The requests known before the run, sorted by arrival (then id): the flat ones and those
/// the sessions start with.
fn initial_requests<'w>(
    workload: &'w Workload,
    registry: &mut SessionRegistry<'_>,
) -> Cow<'w, [Request]> {
    if workload.sessions.is_empty() {
        return Cow::Borrowed(&workload.requests);
    }
    Cow::Owned(registry.initial_requests(&workload.requests))
}

/// What sizes an instance's KV cache.
fn kv_sizing(inst: &InstanceConfig) -> KvSizing {
    KvSizing {
        memory_gib: inst.hardware.memory_gib,
        utilization: inst.memory_utilization,
        block_size: inst.scheduler.block_size,
        tp: inst.tp,
        dtype: inst.dtype,
        kv_dtype: if inst.kv_cache_fp8 {
            Dtype::Fp8
        } else {
            inst.dtype
        },
    }
}

/// The latency backend of one instance.
enum Backend {
    /// The compute backend alone: the profile DB or the roofline.
    Compute(Box<dyn LatencyBackend>),
    /// ASTRA-Sim co-simulation over a compute backend.
    Astra(Box<AstraBackend>),
}

impl Backend {
    /// The compute backend of `inst` (the profile DB when a profile root is given, else the
    /// analytical roofline), wrapped by ASTRA-Sim when the network backend is astra;
    /// `first_arrival` is where ASTRA-Sim's initial workload ends; `label` prefixes log lines.
    fn new(
        config: &SimConfig,
        inst: &InstanceConfig,
        label: &str,
        first_arrival: Nanos,
    ) -> anyhow::Result<Backend> {
        let compute = Backend::compute(config, inst, label)?;
        let Some(options) = &config.astra else {
            return Ok(Backend::Compute(compute));
        };
        let instance = AstraInstance {
            model: &inst.model,
            tp: inst.tp,
            dtype: inst.dtype,
        };
        let backend = AstraBackend::start(options.clone(), instance, compute, first_arrival)?;
        if options.keep_inputs {
            eprintln!(
                "ASTRA-Sim inputs kept in {}",
                backend.inputs_dir().display()
            );
        }
        Ok(Backend::Astra(Box::new(backend)))
    }

    fn compute(
        config: &SimConfig,
        inst: &InstanceConfig,
        label: &str,
    ) -> anyhow::Result<Box<dyn LatencyBackend>> {
        let Some(root) = &config.profile_dir else {
            log::info!("{label}latency backend: roofline (analytical)");
            return Ok(Box::new(Roofline::new(
                &inst.model,
                &inst.hardware,
                inst.tp,
                inst.dtype,
            )));
        };
        let started = Instant::now();
        let db = ProfileDb::load(&ProfileSpec {
            root,
            hardware: &inst.hardware.name,
            model: &inst.model,
            dtype: inst.dtype,
            kv_cache_fp8: inst.kv_cache_fp8,
            tp: inst.tp,
            architecture: config.architecture.as_deref(),
            max_num_batched_tokens: inst.scheduler.max_num_batched_tokens,
            max_num_seqs: inst.scheduler.max_num_seqs,
        })?;
        log::info!(
            "{label}latency backend: profile DB {} (loaded in {:.1} ms)",
            db.bundle_dir().display(),
            started.elapsed().as_secs_f64() * 1e3
        );
        Ok(Box::new(db))
    }

    fn as_dyn(&mut self) -> &mut dyn LatencyBackend {
        match self {
            Backend::Compute(c) => c.as_mut(),
            Backend::Astra(a) => a.as_mut(),
        }
    }

    /// Ends ASTRA-Sim (if any) and prints its report on stderr.
    fn finish(self) -> anyhow::Result<()> {
        if let Backend::Astra(a) = self {
            let stats = a.finish()?;
            eprintln!("{}", astra::report_line(&stats));
        }
        Ok(())
    }
}

/// Receives the engine's results: CSV rows, summary samples, progress, execution traces,
/// debug logs.
struct Outputs<'w> {
    csv: Option<RequestCsv>,
    summary: SummaryCollector,
    progress: Progress,
    /// One per instance when `--emit-et` is given, else none.
    emit_et: Vec<StepEmitter>,
    /// Several instances: log lines name the instance.
    multi: bool,
    /// The workload's sessions, when it has any: the CSV then names each request's session.
    sessions: Option<&'w SessionSet>,
}

impl Observer for Outputs<'_> {
    fn request_finished(&mut self, record: &RequestRecord<'_>) -> anyhow::Result<()> {
        match (&mut self.csv, self.sessions) {
            (Some(csv), Some(set)) => csv.write_in_session(record, set.label(record.request_id))?,
            (Some(csv), None) => csv.write(record)?,
            (None, _) => {}
        }
        self.summary.record(record);
        self.progress.advance();
        Ok(())
    }

    fn step_finished(
        &mut self,
        step: &StepEvent<'_>,
        backend: &mut dyn LatencyBackend,
    ) -> anyhow::Result<()> {
        if let Some(emitter) = self.emit_et.get_mut(step.instance as usize) {
            emitter.step_finished(&step.batch, backend)?;
        }
        if !log::log_enabled!(log::Level::Debug) {
            return Ok(());
        }
        let decodes = step.batch.items.iter().filter(|i| i.is_decode()).count();
        let instance = if self.multi {
            format!(" instance {}", step.instance)
        } else {
            String::new()
        };
        log::debug!(
            "[t={} ns]{instance} step {} ns: {} seqs ({} decode), {} tokens; {} waiting, {} running",
            step.end_ns,
            step.end_ns - step.start_ns,
            step.batch.num_seqs(),
            decodes,
            step.batch.total_tokens(),
            step.waiting,
            step.running
        );
        for layer in backend.breakdown(&step.batch)? {
            log::debug!(
                "    {:<26} {:>4} x {:>10} ns{}",
                layer.name,
                layer.repeats,
                layer.time_ns,
                if layer.is_comm { "  (comm)" } else { "" }
            );
        }
        Ok(())
    }
}

/// A progress bar on stderr, shown only when stderr is a terminal and the run has lasted more
/// than a second.
struct Progress {
    bar: ProgressBar,
    started: Instant,
    shown: bool,
    enabled: bool,
}

impl Progress {
    fn new(total: u64) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} requests  {elapsed} (eta {eta})")
                .expect("valid template"),
        );
        Progress {
            bar,
            started: Instant::now(),
            shown: false,
            enabled: std::io::stderr().is_terminal(),
        }
    }

    fn advance(&mut self) {
        self.bar.inc(1);
        if self.enabled && !self.shown && self.started.elapsed() > Duration::from_secs(1) {
            self.shown = true;
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// `blis-cosim validate`: prints the Diff% table of a simulated run against a real vLLM run,
/// and optionally writes it as JSON and draws the comparison plots.
pub fn validate(args: &ValidateArgs) -> anyhow::Result<()> {
    let validation = Validation::compare(&args.vllm, &args.sim)?;
    print!("{}", validation.render());
    if let Some(path) = &args.json {
        let mut text = serde_json::to_string_pretty(&validation.to_json())?;
        text.push('\n');
        write_atomically(path, |w| w.write_all(text.as_bytes()))?;
    }
    if let Some(dir) = &args.plots {
        let format = match args.plot_format.as_str() {
            "png" => PlotFormat::Png,
            _ => PlotFormat::Svg,
        };
        for path in validation.write_plots(dir, format)? {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}

/// `blis-cosim et ...`: tools for Chakra execution-trace files.
pub fn et(command: &EtCommand) -> anyhow::Result<()> {
    match command {
        EtCommand::Dump(args) => {
            let file = read_et(&args.file)?;
            print!("{}", render_dump(&args.file, &file, args.astra_dialect));
            Ok(())
        }
    }
}

/// `blis-cosim generate`: writes the requests of a workload spec or a built-in scenario as
/// workload JSONL, atomically; refuses to write an empty workload.
pub fn generate(args: &GenerateArgs) -> anyhow::Result<()> {
    let spec = match (&args.workload_spec, &args.scenario) {
        (Some(path), _) => WorkloadSpec::load(path)?,
        (None, Some(name)) => scenario(name)
            .with_context(|| format!("unknown scenario `{name}`"))?
            .spec()?,
        (None, None) => anyhow::bail!("give --workload-spec or --scenario"),
    };
    let overrides = Overrides {
        num_requests: args.num_requests,
        seed: args.seed,
    };
    let generator = Generator::new(&spec, overrides)?;
    let mut count = 0;
    write_atomically(&args.out, |w| {
        count = write_jsonl(generator, w)?;
        if count == 0 {
            return Err(std::io::Error::other(format!(
                "{}: no request arrives before the horizon",
                spec.source_name
            )));
        }
        Ok(())
    })?;
    let what = if spec.clients.iter().any(|c| c.traffic.is_session()) {
        "requests and sessions"
    } else {
        "requests"
    };
    eprintln!("wrote {count} {what} to {}", args.out.display());
    Ok(())
}

/// `blis-cosim scenarios`: prints the built-in scenarios, one per line with its description.
pub fn list_scenarios() {
    for s in SCENARIOS {
        println!("{:<16} {}", s.name, s.description);
    }
}
