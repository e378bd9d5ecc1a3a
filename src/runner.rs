//! The main job: load the workload, size the KV cache, run the engine, write the outputs.

use crate::Nanos;
use crate::astra::{self, AstraBackend, AstraInstance};
use crate::chakra::{StepEmitter, read_et, render_dump};
use crate::cli::{
    EtCommand, GenerateArgs, InstanceConfig, SimConfig, ValidateArgs, WorkloadSource,
};
use crate::config::{Dtype, InstanceRole, KvSizing, full_kv_bytes_per_token, kv_capacity};
use crate::engine::{self, Disaggregation, InstanceSetup, Observer, StepEvent, TransferEvent};
use crate::latency::{LatencyBackend, ProfileDb, ProfileSpec, Roofline};
use crate::metrics::{
    InstanceInfo, PlotFormat, PrefixCacheStats, RequestCsv, RequestRecord, RunInfo, Summary,
    SummaryCollector, Validation, write_atomically,
};
use crate::router::Router;
use crate::workload::read_jsonl;
use crate::workload::spec::{
    Generator, Overrides, SCENARIOS, WorkloadSpec, generate_requests, scenario, write_jsonl,
};
use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Runs the simulation described by `config` and returns its summary. The CSV and JSON files
/// are in place when this returns `Ok`; on error, none of them is touched.
pub fn run(config: &SimConfig) -> anyhow::Result<Summary> {
    let requests = match &config.workload {
        WorkloadSource::Dataset(path) => read_jsonl(path, config.num_reqs)?,
        WorkloadSource::Spec(path) => {
            let spec = WorkloadSpec::load(path)?;
            let overrides = Overrides {
                num_requests: config.num_reqs.map(|n| n as u64),
                seed: None,
            };
            generate_requests(&spec, overrides)?
        }
    };
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

    let disaggregation = disaggregation(config);
    let csv = match &config.output {
        Some(path) if disaggregation.is_some() => Some(RequestCsv::create_pd(path)?),
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
        progress: Progress::new(requests.len() as u64),
        emit_et,
        multi,
    };
    let mut router = Router::new(config.routing.clone(), config.seed);
    let mut dyn_backends: Vec<&mut dyn LatencyBackend> =
        backends.iter_mut().map(Backend::as_dyn).collect();
    let outcome = match disaggregation {
        Some(pd) => engine::run_disaggregated(
            &requests,
            &setups,
            pd,
            &mut dyn_backends,
            &mut router,
            &mut outputs,
        )?,
        None => engine::run_cluster(
            &requests,
            &setups,
            &mut dyn_backends,
            &mut router,
            &mut outputs,
        )?,
    };
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
            role: inst.role,
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
    let summary = outputs.summary.finish(info);
    if let Some(path) = &config.summary_json {
        summary.write_json(path)?;
    }
    if let Some(csv) = outputs.csv {
        csv.commit()?;
    }
    Ok(summary)
}

/// The prefill/decode setup of the run, when some instance is a prefill or decode instance:
/// roles, the full-model KV bytes per token each prefill instance sends, the links of the
/// cluster config, and a decode-side router applying the run's policy on its own stream.
fn disaggregation(config: &SimConfig) -> Option<Disaggregation> {
    let links = config.links.as_ref()?;
    let instances = &config.instances;
    if instances.iter().all(|i| i.role == InstanceRole::Colocated) {
        return None;
    }
    Some(Disaggregation::new(
        instances.iter().map(|i| i.role).collect(),
        instances
            .iter()
            .map(|i| full_kv_bytes_per_token(&i.model, kv_sizing(i).kv_dtype))
            .collect(),
        Router::with_stream(config.routing.clone(), config.seed, b"router-decode"),
        |from, to| links.link(from, to),
    ))
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
struct Outputs {
    csv: Option<RequestCsv>,
    summary: SummaryCollector,
    progress: Progress,
    /// One per instance when `--emit-et` is given, else none.
    emit_et: Vec<StepEmitter>,
    /// Several instances: log lines name the instance.
    multi: bool,
}

impl Observer for Outputs {
    fn request_finished(&mut self, record: &RequestRecord<'_>) -> anyhow::Result<()> {
        if let Some(csv) = &mut self.csv {
            csv.write(record)?;
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

    fn kv_transfer(&mut self, t: &TransferEvent) -> anyhow::Result<()> {
        if t.arrived {
            log::debug!(
                "[t={} ns] KV of request {} arrived: instance {} -> {}, {} bytes, {} ns on the \
                 wire after {} ns waiting for the link; {} blocks freed on instance {}",
                t.end_ns,
                t.request_id,
                t.from,
                t.to,
                t.bytes,
                t.end_ns - t.start_ns,
                t.start_ns - t.prefill_end_ns,
                t.request_blocks,
                t.from
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
    eprintln!("wrote {count} requests to {}", args.out.display());
    Ok(())
}

/// `blis-cosim scenarios`: prints the built-in scenarios, one per line with its description.
pub fn list_scenarios() {
    for s in SCENARIOS {
        println!("{:<16} {}", s.name, s.description);
    }
}
