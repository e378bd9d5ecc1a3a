//! The main job: load the workload, size the KV cache, run the engine, write the outputs.

pub mod backend;
mod evaluate;
pub mod huge_pages;
mod outputs;
mod rehearsal;
mod scaling;
mod waves;

use crate::evaluation::RunSignals;
use crate::metrics::{FoldBehind, RunPlots, RunSettings, SloCollector, TimeSeries};
use crate::output::{Finished, StagedDir};

use crate::Nanos;
use crate::astra;
use crate::autoscale::AutoscaleReport;
use crate::chakra::StepEmitter;
use crate::config::{InstanceRole, KvCapacity, Link, full_kv_bytes_per_token};
use crate::control::priority::NominalPriority;
use crate::control::{ControlPlane, OutcomeCollector};
use crate::engine::{
    self, AnomalyWatch, Disaggregation, InstanceSetup, LowerTierSetup, Run, RunOutcome, Services,
};
use crate::latency::LatencyBackend;
use crate::metrics::{
    CsvColumns, InstanceInfo, KvOffloadStats, LowerTierStats, PrefixCacheStats, RequestCsv,
    RunInfo, SessionSummary, Summary, SummaryCollector, prepare_sessions_csv,
};
use crate::power::{InstancePowerSetup, PowerModel};
use crate::router::Router;
use crate::scheduler::Engine;
use crate::setup::{InstanceConfig, ReplayMode, SimConfig, WorkloadSource};
use crate::trace::{TraceLevel, TraceWriter};
use crate::workload::sessions::SessionRegistry;
use crate::workload::sessions::{LiveSessions, SessionOutcome, SharedSessions};
use crate::workload::spec::{
    DrawnAhead, Generator, Overrides, Retime as SpecRetime, SessionStream, StreamPlan, Synthetic,
    WorkloadSpec, generate_workload, scenario, stream_workload, stream_workload_untimed,
};
use crate::workload::{
    DatasetFormat, DatasetPlan, DatasetRead, DatasetRow, DatasetRows, DatasetSessions, Injector,
    MAX_TIME_NS, Request, StreamFailure, Workload, detected, read_dataset, read_dataset_within,
};
use anyhow::Context;
use backend::{Rooflines, SlotBackend};
use outputs::{Outputs, Progress, SessionLabels};
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::thread::Scope;

pub use rehearsal::Rehearsal;

/// Runs the simulation described by `config` and returns its summary. The CSV and JSON files
/// are in place when this returns `Ok`; on error, none of them is touched.
pub fn run(config: &SimConfig) -> anyhow::Result<Summary> {
    let started = std::time::Instant::now();
    huge_pages::prefer_huge_pages();
    let spec = load_spec(config)?;
    std::thread::scope(|scope| run_in(config, spec.as_ref(), scope, started))
}

/// [`run`] with the workload's `spec` loaded, any second thread it starts in `scope`.
fn run_in<'scope, 'env>(
    config: &'env SimConfig,
    spec: Option<&'env WorkloadSpec>,
    scope: &'scope Scope<'scope, 'env>,
    started: std::time::Instant,
) -> anyhow::Result<Summary> {
    let Prepared {
        workload,
        stream,
        has_sessions,
        retime,
        max_in_flight,
    } = prepare(config, spec)?;
    let mut registry =
        SessionRegistry::new(&workload.sessions).with_clients(workload.classes.as_ref());
    let live: SharedSessions<'_> =
        Rc::new(RefCell::new(LiveSessions::new(workload.classes.as_ref())));
    let requests = initial_requests(&workload, &mut registry);
    let drawing = Drawing { retime, scope };
    let (num_requests, streamed) = start_stream(config, &workload, stream, drawing, &live)?;
    let (first_arrival, last_arrival) = arrival_span(streamed.as_ref(), &requests);
    if let Some(a) = &config.control.autoscale {
        scaling::check_ticks(a, last_arrival)?;
    }
    eprintln!("{}", astra::describe(config.astra()));
    let mut instances = build_instances(config, first_arrival)?;
    let disaggregation = disaggregation(config);
    let labels = has_sessions.then(|| match &streamed {
        Some(_) => SessionLabels::Live(Rc::clone(&live)),
        None => SessionLabels::Listed(&workload.sessions),
    });
    let mut outputs = open_outputs(
        config,
        &workload,
        labels,
        num_requests,
        disaggregation.is_some(),
    )?;
    let (stream, listed, failure) = match streamed {
        Some(s) => (Some(s.stream), Some(s.listed), s.failure),
        None => (None, None, None),
    };
    let input = EngineInput {
        requests: &requests,
        stream,
        disaggregation,
        max_in_flight,
        num_requests,
        first_arrival,
    };
    let mut live_injector = Rc::clone(&live);
    // A stream without sessions releases nothing: the (empty) registry says so, and a
    // quiet instance may run ahead of the clock (`Cluster::step_ahead`).
    let injector: &mut dyn Injector = match listed {
        Some(_) if has_sessions => &mut live_injector,
        _ => &mut registry,
    };
    let simulated = simulate(
        config,
        &workload,
        input,
        &mut instances,
        &mut outputs,
        injector,
    );
    // A dataset read as the run went that failed ended the run's arrivals early.
    if let Some(e) = failure.as_ref().and_then(StreamFailure::take) {
        return Err(e.into());
    }
    let (mut outcome, waves) = simulated?;
    outputs.progress.finish();
    // The requests listed before the run, or those the stream handed out.
    let count = listed.as_ref().map_or(requests.len(), |c| c.get() as usize);
    let info = close_instances(config, instances, waves, &outcome, count)?;
    let live = live.borrow();
    let sessions = has_sessions.then(|| match &listed {
        Some(_) => live.outcomes(),
        None => registry.outcomes(),
    });
    if let Some(slo) = &mut outputs.slo {
        slo.add_pooled_itls(&outcome.itl, &outcome.itl_cells);
    }
    outputs
        .summary
        .add_pooled_itls(std::mem::take(&mut outcome.itl));
    write_results(
        config,
        outputs,
        info,
        &outcome,
        sessions.as_deref(),
        started,
    )
}

/// How many requests the run has, and the stream of a generated workload (`stream`: its plan
/// and generator), drawn as `drawing` says.
fn start_stream<'r, 'scope: 'r, 'env: 'r>(
    config: &SimConfig,
    workload: &'r Workload,
    stream: Option<Source<'env>>,
    drawing: Drawing<'scope, 'env>,
    live: &SharedSessions<'r>,
) -> anyhow::Result<(u64, Option<Streamed<'r>>)> {
    match stream {
        None => Ok((workload.num_requests() as u64, None)),
        Some(Source::Spec(plan, generator)) => {
            let streamed = streamed(config, workload, &plan, generator, drawing, live)?;
            Ok((plan.count, Some(streamed)))
        }
        Some(Source::Dataset(plan)) if plan.sessions > 0 => {
            let streamed = dataset_with_sessions(config, workload, &plan, drawing, live)?;
            Ok((plan.count, Some(streamed)))
        }
        Some(Source::Dataset(plan)) => {
            Ok((plan.count, Some(streamed_dataset(config, &plan, drawing)?)))
        }
    }
}

/// What the engine runs, besides the configuration: the initial requests (listed, and
/// streamed as it reaches them; `num_requests` in all, the first arriving at `first_arrival`),
/// the P/D disaggregation and the concurrency limit.
struct EngineInput<'r> {
    requests: &'r [Request],
    stream: Option<engine::ArrivalStream<'r>>,
    disaggregation: Option<Disaggregation>,
    max_in_flight: Option<usize>,
    num_requests: u64,
    first_arrival: Nanos,
}

/// Runs the engine over `input` with the run's decision makers, the `instances`' backends and
/// the DP groups' processes, reporting into `outputs`; `injector` releases the sessions' later
/// requests. Returns the outcome and the DP groups' processes (still to be finished), or the
/// engine's error once every process is stopped.
fn simulate(
    config: &SimConfig,
    workload: &Workload,
    input: EngineInput<'_>,
    instances: &mut Instances<'_>,
    outputs: &mut Outputs<'_>,
    injector: &mut dyn Injector,
) -> anyhow::Result<(RunOutcome, Option<waves::AstraWaves>)> {
    let (mut control, mut router) = decision_makers(config, workload, outputs);
    let clients = workload.classes.as_ref();
    let nominal = NominalPriority::new(clients, &config.control.slo_priorities);
    let mut dyn_backends: Vec<&mut dyn LatencyBackend> = (instances.backends.iter_mut())
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut waves = waves::AstraWaves::start(config, input.first_arrival)?;
    let run = Run {
        requests: input.requests,
        stream: input.stream,
        setups: engine::Setups::replicated(&instances.setups, config.replicas_per_template),
        disaggregation: input.disaggregation,
        max_in_flight: input.max_in_flight,
        signals: config.signals,
        watch: anomaly_watch(config, outputs.watch_anomalies, &nominal),
        clients,
        autoscaler: scaling::autoscaler(config),
    };
    let services = Services::new(&mut dyn_backends, &mut router, outputs)
        .with_injector(injector)
        .with_waves(waves.as_mut().map(|w| w as &mut dyn engine::WavePricer))
        .with_control(control.as_mut());
    match simulate_folding(config, input.num_requests, run, services)? {
        Ok(outcome) => Ok((outcome, waves)),
        Err(e) => {
            // Stop every group's process (dropping it kills it) before reporting.
            drop(waves);
            Err(engine_error(e, &config.workload))
        }
    }
}

/// The first and the last arrival of the run's initial requests (`streamed` or listed).
fn arrival_span(streamed: Option<&Streamed<'_>>, requests: &[Request]) -> (Nanos, Nanos) {
    match streamed {
        Some(s) => (s.first_arrival, s.last_arrival),
        None => (
            requests.first().map_or(0, |r| r.arrival_ns),
            requests.iter().map(|r| r.arrival_ns).max().unwrap_or(0),
        ),
    }
}

/// After the engine: what the summary reports of the run and its instances (`listed`: how
/// many requests it was given), with every latency backend and DP group process ended.
fn close_instances(
    config: &SimConfig,
    mut instances: Instances<'_>,
    waves: Option<waves::AstraWaves>,
    outcome: &RunOutcome,
    listed: usize,
) -> anyhow::Result<(RunInfo, RunSettings)> {
    let infos = instance_infos(config, &mut instances, outcome);
    finish_backends(instances.backends, waves)?;
    let info = RunInfo {
        seed: config.seed,
        total_clocks_ns: outcome.total_clocks_ns,
        routing_policy: config.routing.to_string(),
        num_nodes: config.num_nodes,
        instances: infos,
    };
    Ok((info, run_settings(config, listed)))
}

/// The workload of a run before the engine starts: listed (its requests retimed by the replay
/// mode) or streamed from a spec, whether it has sessions, and the replay mode's move of the
/// arrivals still to come and its concurrency limit.
struct Prepared<'s> {
    workload: Workload,
    stream: Option<Source<'s>>,
    has_sessions: bool,
    retime: Retime,
    max_in_flight: Option<usize>,
}

/// A workload the run takes as it goes: generated from a spec (its plan and generator), or a
/// dataset too large to hold, read again as the run reaches its requests.
enum Source<'s> {
    Spec(StreamPlan, Generator<'s>),
    Dataset(DatasetPlan),
}

/// Reads or starts generating the workload (`spec`: the run's spec, if it has one) and applies
/// the replay mode to what is known before the run. Fails on `--sessions-output` without
/// sessions, and where the replay mode would move an arrival past the time bound.
fn prepare<'s>(config: &SimConfig, spec: Option<&'s WorkloadSpec>) -> anyhow::Result<Prepared<'s>> {
    let (mut workload, stream) = match spec {
        Some(spec) => {
            let (workload, stream) = generated(spec, config)?;
            (workload, stream.map(|(plan, g)| Source::Spec(plan, g)))
        }
        None => held_or_planned(config)?,
    };
    let has_sessions = match &stream {
        Some(Source::Spec(plan, _)) => plan.sessions > 0,
        Some(Source::Dataset(plan)) => plan.sessions > 0,
        None => !workload.sessions.is_empty(),
    };
    if config.sessions_output.is_some() && !has_sessions {
        anyhow::bail!("--sessions-output: the workload has no sessions");
    }
    let span = match &stream {
        Some(Source::Spec(plan, _)) => Some((plan.first_arrival_ns, plan.last_arrival_ns)),
        Some(Source::Dataset(plan)) => Some((plan.first_arrival_ns, plan.last_arrival_ns)),
        None => workload.first_arrival().zip(workload.last_arrival()),
    };
    let (retime, max_in_flight) = replay(span, config.replay)?;
    if !matches!(retime, Retime::Keep) {
        workload.retime(|t| retime.apply(t));
    }
    Ok(Prepared {
        workload,
        stream,
        has_sessions,
        retime,
        max_in_flight,
    })
}

/// A generated workload as the run draws it: the stream of the requests it starts with, the
/// first of their arrivals and (for the autoscaler's limit) the last, and the count of
/// requests the stream has handed out.
struct Streamed<'r> {
    stream: engine::ArrivalStream<'r>,
    first_arrival: Nanos,
    last_arrival: Nanos,
    listed: Rc<Cell<u64>>,
    /// Where a dataset read as the run goes keeps its failure.
    failure: Option<StreamFailure>,
}

impl<'r> Streamed<'r> {
    /// The run's stream of `requests` (counted in `listed`), its first request drawn now to
    /// learn the first arrival.
    fn starting(
        mut requests: impl Iterator<Item = Request> + 'r,
        listed: Rc<Cell<u64>>,
        last_arrival: Nanos,
        failure: Option<StreamFailure>,
    ) -> Streamed<'r> {
        let first = requests.next();
        Streamed {
            first_arrival: first.as_ref().map_or(0, |r| r.arrival_ns),
            last_arrival,
            stream: Box::new(first.into_iter().chain(requests)),
            listed,
            failure,
        }
    }
}

/// The anomaly watch of a run: detected when shown (`shown`), and for the evaluation's
/// anomaly counts.
fn anomaly_watch<'a>(
    config: &SimConfig,
    shown: bool,
    nominal: &'a NominalPriority,
) -> Option<AnomalyWatch<'a>> {
    (shown || config.evaluation.requested()).then_some(AnomalyWatch {
        thrash_window_ns: config.diagnostics.thrash_window_ns,
        nominal,
    })
}

/// [`engine::simulate`] of a run of `requests` requests, the instances' inter-token gaps
/// folded behind the loop on a second thread while it runs when the run takes one.
fn simulate_folding(
    config: &SimConfig,
    requests: u64,
    run: Run<'_>,
    services: Services<'_, '_>,
) -> anyhow::Result<Result<RunOutcome, engine::SimError>> {
    let folding = (config.threads.second(requests))
        .then(FoldBehind::start)
        .transpose()
        .context("starting the thread that folds the gaps")?;
    let simulated = engine::simulate(run, services);
    drop(folding);
    Ok(simulated)
}

/// How a generated workload's stream is drawn: its arrivals moved by `retime`; drawn ahead on
/// a thread of `scope` when the run takes a second thread and the workload has no sessions.
struct Drawing<'scope, 'env> {
    retime: Retime,
    scope: &'scope Scope<'scope, 'env>,
}

/// The stream of the workload `generator` draws (surveyed in `plan`), as `drawing` says, its
/// sessions started in `live`. The last arrival is learnt only for an autoscaled run, of a
/// workload with sessions by a dry pass over what it starts with.
fn streamed<'r, 'scope: 'r, 'env: 'r>(
    config: &SimConfig,
    workload: &'r Workload,
    plan: &StreamPlan,
    generator: Generator<'env>,
    drawing: Drawing<'scope, 'env>,
    live: &SharedSessions<'r>,
) -> anyhow::Result<Streamed<'r>> {
    let retime = drawing.retime;
    let last_arrival = match (&config.control.autoscale, plan.sessions) {
        (None, _) => 0,
        (Some(_), 0) => retime.apply(plan.last_arrival_ns),
        (Some(_), _) => {
            let again = Generator::new(generator.spec(), spec_overrides(config))?;
            let retimed = Box::new(move |t| retime.apply(t));
            let dry = SessionStream::dry(again, workload.classes.as_ref(), retimed);
            dry.map(|r| r.arrival_ns).max().unwrap_or(0)
        }
    };
    if plan.sessions == 0 && config.threads.second(plan.count) {
        let ahead = DrawnAhead::start(drawing.scope, generator, move |t| retime.apply(t))
            .context("starting the thread that draws the workload")?;
        let listed = ahead.counter();
        return Ok(Streamed::starting(ahead, listed, last_arrival, None));
    }
    let retimed = Box::new(move |t| retime.apply(t));
    let stream = SessionStream::new(generator, Rc::clone(live), retimed);
    let listed = stream.counter();
    Ok(Streamed::starting(stream, listed, last_arrival, None))
}

/// The stream of the dataset `plan` surveyed, read again from its file, its arrivals moved as
/// `drawing` says, on a thread of its scope when the run takes a second thread.
fn streamed_dataset<'r, 'scope: 'r, 'env: 'r>(
    config: &SimConfig,
    plan: &DatasetPlan,
    drawing: Drawing<'scope, 'env>,
) -> anyhow::Result<Streamed<'r>> {
    let retime = drawing.retime;
    let requests = plan.requests();
    let failure = Some(requests.failure());
    let retimed = requests.map(move |mut r| {
        r.arrival_ns = retime.apply(r.arrival_ns);
        r
    });
    let (stream, listed): (engine::ArrivalStream<'r>, _) = match config.threads.second(plan.count) {
        true => {
            let ahead = DrawnAhead::start_from(drawing.scope, move || retimed)
                .context("starting the thread that reads the dataset")?;
            let listed = ahead.counter();
            (Box::new(ahead), listed)
        }
        false => {
            let listed = Rc::new(Cell::new(0));
            let counter = Rc::clone(&listed);
            let counted = retimed.inspect(move |_| counter.set(counter.get() + 1));
            (Box::new(counted), listed)
        }
    };
    let last_arrival = match &config.control.autoscale {
        Some(_) => retime.apply(plan.last_arrival_ns),
        None => 0,
    };
    Ok(Streamed {
        stream,
        first_arrival: retime.apply(plan.first_arrival_ns),
        last_arrival,
        listed,
        failure,
    })
}

/// The stream of the dataset with sessions `plan` surveyed, read again from its file (on a
/// thread of `drawing`'s scope when the run takes a second thread), its arrivals moved as
/// `drawing` says, its sessions started in `live` on this thread as the run reaches them. The
/// last arrival is learnt only for an autoscaled run, by a dry pass over what it starts with.
fn dataset_with_sessions<'r, 'scope: 'r, 'env: 'r>(
    config: &SimConfig,
    workload: &'r Workload,
    plan: &DatasetPlan,
    drawing: Drawing<'scope, 'env>,
    live: &SharedSessions<'r>,
) -> anyhow::Result<Streamed<'r>> {
    let retime = drawing.retime;
    // A whole read sorts what the run starts with by moved arrival, then id: with every
    // arrival moved to one time, that is file order.
    let (in_order, rows): (bool, fn(&DatasetPlan) -> DatasetRows) = match retime {
        Retime::Keep => (true, DatasetPlan::rows),
        Retime::Speedup { .. } => (false, DatasetPlan::rows),
        Retime::AllAt(_) => (true, DatasetPlan::rows_in_file_order),
    };
    let moved = || -> SpecRetime<'r> { Box::new(move |t| retime.apply(t)) };
    let last_arrival = match &config.control.autoscale {
        None => 0,
        Some(_) => {
            let dry = Rc::new(RefCell::new(LiveSessions::dry(workload.classes.as_ref())));
            last_start(rows(plan), |entries| {
                DatasetSessions::new(entries, in_order, dry, moved())
            })?
        }
    };
    let entries = rows(plan);
    let failure = Some(entries.failure());
    let entries: Box<dyn Iterator<Item = DatasetRow> + 'r> = match config.threads.second(plan.count)
    {
        true => Box::new(
            DrawnAhead::start_from(drawing.scope, move || entries)
                .context("starting the thread that reads the dataset")?,
        ),
        false => Box::new(entries),
    };
    let requests = DatasetSessions::new(entries, in_order, Rc::clone(live), moved());
    let listed = requests.counter();
    Ok(Streamed::starting(requests, listed, last_arrival, failure))
}

/// The latest arrival of the requests a dataset's `entries` start a run with, through the
/// stream `start` makes of them (a dry pass).
fn last_start<'r>(
    entries: DatasetRows,
    start: impl FnOnce(Box<dyn Iterator<Item = DatasetRow> + 'r>) -> DatasetSessions<'r>,
) -> anyhow::Result<Nanos> {
    let failure = entries.failure();
    let last = start(Box::new(entries)).map(|r| r.arrival_ns).max();
    match failure.take() {
        Some(e) => Err(e.into()),
        None => Ok(last.unwrap_or(0)),
    }
}

/// The engine settings of the run, as a vLLM bench run's `meta.json` records them: those of
/// its first instance (a cluster's instances usually share them), for `validate`'s hints.
fn run_settings(config: &SimConfig, num_requests: usize) -> RunSettings {
    let first = config.instance(0);
    let s = &first.scheduler;
    let dp = first.dp_group.map_or(1, |g| {
        config
            .instances
            .iter()
            .filter(|i| i.dp_group == Some(g))
            .count()
    });
    RunSettings {
        tensor_parallel_size: Some(u64::from(first.tp)),
        data_parallel_size: Some(dp as u64),
        max_num_seqs: s.max_num_seqs.map(u64::from),
        max_num_batched_tokens: Some(u64::from(s.max_num_batched_tokens)),
        dtype: Some(first.dtype.to_string()),
        kv_cache_dtype: Some(if first.kv_cache_fp8 { "fp8" } else { "auto" }.to_owned()),
        vllm_version: first
            .sglang
            .is_none()
            .then(|| config.vllm_version.to_string()),
        async_scheduling: Some(s.async_scheduling),
        reserve_full_isl: Some(s.reserve_full_isl),
        enable_chunked_prefill: Some(s.enable_chunked_prefill),
        enable_prefix_caching: Some(s.enable_prefix_caching),
        enforce_eager: first.host_model.as_ref().map(|p| p.enforce_eager()),
        num_requests: Some(num_requests as u64),
    }
}

/// The run's control plane (none when it would change nothing: without admission, delays,
/// gateway queue or scheduling policies the engine runs without one, exactly as before it
/// existed) and router, both reporting their decisions when the run traces them. Outcomes
/// are collected when requests can end unserved or the run is evaluated, and anomalies shown
/// with a control plane, an autoscaler or several SLO classes.
fn decision_makers(
    config: &SimConfig,
    workload: &Workload,
    outputs: &mut Outputs<'_>,
) -> (Option<ControlPlane>, Router) {
    let classes = workload.classes.as_ref();
    let mut control =
        (!config.control.is_passive()).then(|| ControlPlane::new(config.control.clone(), classes));
    let has_timeouts = classes.is_some_and(|c| c.has_timeouts());
    outputs.show_outcomes = control.is_some() || has_timeouts;
    if outputs.show_outcomes || config.evaluation.requested() {
        outputs.outcomes = Some(OutcomeCollector::new(classes));
    }
    let mut router = Router::new(config.routing.clone(), config.seed);
    let diagnostics = &config.diagnostics;
    if diagnostics.trace_level != TraceLevel::None {
        router.explain_top(diagnostics.counterfactual_k);
        if let Some(control) = &mut control {
            control.trace_decisions();
        }
    }
    outputs.watch_anomalies = control.is_some()
        || config.control.autoscale.is_some()
        || classes.is_some_and(|c| c.classes().len() > 1);
    (control, router)
}

/// The instances of a run as the engine needs them: the setup of each configured instance
/// (an autoscaled run's replica slots share their template's) and every instance's latency
/// backend (by instance id).
struct Instances<'c> {
    setups: Vec<InstanceSetup>,
    backends: Vec<SlotBackend<'c>>,
}

/// Each configured instance's setup (with the KV cache the configuration sized) and every
/// instance's latency backend: started for the configured instances, started when first
/// used for the other replica slots of an autoscaled run.
fn build_instances(config: &SimConfig, first_arrival: Nanos) -> anyhow::Result<Instances<'_>> {
    let (n, per) = (config.num_instances(), config.replicas_per_template);
    let mut built = Instances {
        setups: Vec::with_capacity(config.instances.len()),
        backends: Vec::with_capacity(n),
    };
    let rooflines = Rc::new(Rooflines::default());
    for id in 0..n {
        let (inst, capacity) = (config.instance(id), config.kv(id));
        let template = (id % per != 0).then(|| &built.backends[id - id % per]);
        let backend = SlotBackend::new(config, id, first_arrival, template, &rooflines)?;
        log_memory(config, inst, capacity, &backend.label());
        if template.is_none() {
            built.setups.push(instance_setup(inst, capacity)?);
        }
        built.backends.push(backend);
    }
    Ok(built)
}

/// Logs (INFO) an instance's KV cache and lower tier.
fn log_memory(config: &SimConfig, inst: &InstanceConfig, capacity: &KvCapacity, label: &str) {
    let tokens = capacity.num_blocks * u64::from(capacity.block_size);
    log::info!(
        "{label}KV cache: {tokens} tokens / {} blocks ({:.2} GiB per GPU at utilization {})",
        capacity.num_blocks,
        (tokens * capacity.kv_bytes_per_token) as f64 / f64::from(1u32 << 30),
        inst.memory_utilization
    );
    if let (Some(storage), Some(pool)) = (config.prefix_storage, inst.lower_tier) {
        log::info!(
            "{label}prefix storage: {} pool {} ({:.2} GiB, {} GB/s, {} ns)",
            storage.name(),
            pool.id,
            pool.memory.capacity_bytes as f64 / f64::from(1u32 << 30),
            pool.memory.bandwidth_gbps,
            pool.memory.latency_ns
        );
    }
}

/// What the engine needs to know of instance `inst` with KV capacity `capacity`.
fn instance_setup(inst: &InstanceConfig, capacity: &KvCapacity) -> anyhow::Result<InstanceSetup> {
    let num_blocks = u32::try_from(capacity.num_blocks)
        .context("the KV cache has more than 2^32 blocks; raise --block-size")?;
    Ok(InstanceSetup {
        model_name: inst.model.name.clone(),
        max_model_len: u32::try_from(inst.model.max_position_embeddings).unwrap_or(u32::MAX),
        num_blocks,
        scheduler: inst.scheduler.clone(),
        dp_group: inst.dp_group,
        sglang: inst.sglang.clone(),
        pipeline: inst.pipeline.clone(),
        lower_tier: inst.lower_tier.map(|pool| LowerTierSetup {
            pool: pool.id,
            memory: pool.memory,
            kv_bytes_per_token: full_kv_bytes_per_token(&inst.model, inst.kv_dtype()),
            offload: pool.offload,
        }),
    })
}

/// Each instance's engine name, when some instance runs SGLang (the request CSV's and the
/// trace's engine column and field), else `None`.
fn instance_engines(config: &SimConfig) -> Option<Box<[&'static str]>> {
    let engine = |inst: &InstanceConfig| match inst.sglang {
        Some(_) => Engine::Sglang,
        None => Engine::Vllm,
    };
    let engines = config.each_instance().map(engine);
    engines
        .clone()
        .any(|e| e == Engine::Sglang)
        .then(|| engines.map(<&'static str>::from).collect())
}

/// The run's observers: the request CSV, summary, progress, traces, power, time series,
/// pictures and SLO metrics the configuration asks for.
fn open_outputs<'w>(
    config: &SimConfig,
    workload: &'w Workload,
    sessions: Option<SessionLabels<'w>>,
    num_requests: u64,
    pd: bool,
) -> anyhow::Result<Outputs<'w>> {
    let has_sessions = sessions.is_some();
    let columns = CsvColumns {
        pd,
        sessions: has_sessions,
        engines: instance_engines(config),
    };
    let csv = match &config.output {
        Some(path) => Some(RequestCsv::create(path, columns)?),
        None => None,
    };
    let emit_et_dir = match &config.emit_et {
        Some(settings) => Some(StagedDir::create(&settings.dir)?),
        None => None,
    };
    let mut summary = SummaryCollector::with_pooled_itls();
    summary.expect_requests(num_requests);
    Ok(Outputs {
        csv,
        summary,
        progress: Progress::new(num_requests),
        emit_et: step_emitters(config, emit_et_dir.as_ref()),
        emit_et_dir,
        multi: config.num_instances() > 1,
        sessions,
        power: power_model(config),
        timeseries: time_series(config),
        plots: config
            .plots
            .as_ref()
            .map(|_| RunPlots::new(run_title(config))),
        slo: slo_collector(config, workload),
        outcomes: None,
        trace: trace_writer(config)?,
        watch_anomalies: false,
        show_outcomes: false,
    })
}

/// The SLO metrics' collector, when they are worth reporting or the run is evaluated.
fn slo_collector(config: &SimConfig, workload: &Workload) -> Option<SloCollector> {
    let mut collector = SloCollector::new(
        workload.classes.as_ref(),
        config.slo_targets,
        &config.control.slo_targets,
    );
    // The run pools every completed request's gaps (`RunOutcome::itl`); with one model,
    // those are all the gaps of the SLO report's overall group.
    let mut models = config.each_instance().map(|i| &i.model.name);
    let first = models.next();
    if models.all(|m| Some(m) == first) {
        collector.pool_overall_itls();
        // vLLM's scheduler pools them per class and tenant too; SGLang's does not.
        if config.each_instance().all(|i| i.sglang.is_none()) {
            collector.pool_cells();
        }
    }
    (collector.worth_reporting() || config.evaluation.requested()).then_some(collector)
}

/// The decision trace's writer, when the run traces its decisions; it summarises them for
/// `--summarize-trace` and for the evaluation.
fn trace_writer(config: &SimConfig) -> anyhow::Result<Option<TraceWriter>> {
    let d = &config.diagnostics;
    if d.trace_level == TraceLevel::None {
        return Ok(None);
    }
    let summarize = d.summarize_trace || config.evaluation.requested();
    let mut writer = TraceWriter::new(d.trace_level, d.trace_output.as_deref(), summarize)?;
    writer.name_engines(instance_engines(config));
    Ok(Some(writer))
}

/// One execution-trace writer per instance when `--emit-et` is given, else none; they write
/// into the staged folder `staged`, which becomes `--emit-et`'s folder when the run succeeds.
fn step_emitters(config: &SimConfig, staged: Option<&StagedDir>) -> Vec<StepEmitter> {
    let (Some(settings), Some(staged)) = (&config.emit_et, staged) else {
        return Vec::new();
    };
    let multi = config.num_instances() > 1;
    config
        .each_instance()
        .enumerate()
        .map(|(id, inst)| {
            let mut settings = settings.clone();
            settings.dir = staged.path().to_path_buf();
            if multi {
                settings.dir = settings.dir.join(format!("instance{id}"));
            }
            StepEmitter::new(
                settings,
                &inst.model,
                (inst.tp, inst.collectives.ep.total),
                inst.dtype,
                inst.placement
                    .as_ref()
                    .filter(|p| p.streams_weights())
                    .map(|p| &p.placement),
                inst.pipeline.as_ref().map_or(&[], |p| &p.stage_blocks),
            )
        })
        .collect()
}

/// What the summary reports of each instance after the run.
fn instance_infos(
    config: &SimConfig,
    instances: &mut Instances,
    outcome: &RunOutcome,
) -> Vec<InstanceInfo> {
    let kv = (0..config.num_instances()).map(|id| config.kv(id));
    config
        .each_instance()
        .zip(kv)
        .zip(&mut instances.backends)
        .zip(&outcome.instances)
        .map(|(((inst, capacity), backend), out)| InstanceInfo {
            node_id: inst.node_id,
            engine: if inst.sglang.is_some() {
                Engine::Sglang
            } else {
                Engine::Vllm
            },
            model: inst.model.name.clone(),
            hardware: inst.hardware.name.clone(),
            // A DP group member's ASTRA-Sim is its group's process.
            backend: if inst.astra.is_some() && inst.dp_group.is_some() {
                "astra".to_owned()
            } else {
                backend.name().to_owned()
            },
            tp: inst.tp,
            num_kv_blocks: capacity.num_blocks,
            block_size: capacity.block_size,
            preemptions: out.stats.preemptions,
            recomputed_tokens: out.stats.recomputed_tokens,
            dummy_steps: out.dummy_steps,
            prefix_cache: inst
                .scheduler
                .enable_prefix_caching
                .then_some(PrefixCacheStats {
                    requested_tokens: out.stats.prefix_requested_tokens,
                    hit_tokens: out.stats.prefix_hit_tokens,
                }),
            lower_tier: config.prefix_storage.map(|storage| LowerTierStats {
                storage,
                hit_tokens: out.stats.lower_hit_tokens,
                recalled_tokens: out.stats.recalled_tokens,
                recalled_bytes: out.stats.recalled_bytes,
                recall_ns: out.stats.recall_ns,
                offload: out.stats.kv_offload.map(|l| KvOffloadStats {
                    offloaded_blocks: l.offloaded_blocks,
                    reloads: l.reloads,
                    reload_wait_ns: l.reload_wait_ns,
                    max_queue_depth: l.max_queue_depth,
                }),
            }),
            profile_lookups: backend.profile_lookups(),
            role: inst.role,
        })
        .collect()
}

/// Ends every instance's ASTRA-Sim (each reports) and the DP groups' processes, even when an
/// earlier one fails; the first failure is returned.
fn finish_backends(
    backends: Vec<SlotBackend<'_>>,
    waves: Option<waves::AstraWaves>,
) -> anyhow::Result<()> {
    let mut finished = Ok(());
    for backend in backends {
        let result = backend.finish();
        if finished.is_ok() {
            finished = result;
        }
    }
    if let Some(waves) = waves {
        let result = waves.finish();
        if finished.is_ok() {
            finished = result;
        }
    }
    finished
}

/// Completes the summary (SLO, outcomes, fitness, power, sessions) and writes the run's
/// files: the evaluation and summary JSON, the time series and pictures, the sessions CSV
/// and, last, the request CSV.
fn write_results(
    config: &SimConfig,
    mut outputs: Outputs<'_>,
    (info, settings): (RunInfo, RunSettings),
    outcome: &RunOutcome,
    sessions: Option<&[SessionOutcome<'_>]>,
    started: std::time::Instant,
) -> anyhow::Result<Summary> {
    let mut summary = outputs.summary.finish(info);
    summary.set_settings(settings);
    if outputs.watch_anomalies {
        summary.set_anomalies(outcome.anomalies());
    }
    // Every output is written first and put in place last, together: a failure (a full
    // disk) leaves none of them.
    let mut ready = Vec::new();
    let trace_summary = match outputs.trace {
        Some(trace) => {
            let (file, trace_summary) = trace.prepare()?;
            ready.extend(file);
            trace_summary
        }
        None => None,
    };
    let signals = RunSignals {
        anomalies: outcome.anomalies(),
        trace_summary: trace_summary.as_ref().map(|t| t.to_json()),
    };
    if let Some(trace_summary) = trace_summary
        && config.diagnostics.summarize_trace
    {
        summary.set_trace(trace_summary);
    }
    let plots_dir = match &config.plots {
        Some(p) => Some(StagedDir::create(&p.dir)?),
        None => None,
    };
    if let Some(report) = &outcome.autoscale {
        if let (Some(p), Some(dir)) = (&config.plots, &plots_dir) {
            let title = run_title(config);
            for path in crate::metrics::write_autoscale_plots(report, &title, dir, p.format)? {
                eprintln!("wrote {}", path.display());
            }
        }
        summary.set_autoscale(report.clone());
    }
    let collected = evaluate::Collected {
        slo: outputs.slo.take(),
        outcomes: outputs.outcomes.take(),
        show_outcomes: outputs.show_outcomes,
        signals,
        started,
    };
    let evaluation = evaluate::finish(config, collected, &mut summary)?;
    if let Some(power) = outputs.power {
        let recalled: Vec<u64> = outcome
            .instances
            .iter()
            .map(|i| i.stats.recalled_bytes)
            .collect();
        summary.set_power(power.finish(outcome.total_clocks_ns, &recalled));
    }
    if let Some(outcomes) = sessions {
        summary.set_sessions(SessionSummary::new(outcomes));
        if let Some(path) = &config.sessions_output {
            ready.push(prepare_sessions_csv(path, outcomes)?);
        }
    }
    if let (Some(path), Some(document)) = (&config.evaluation.json, &evaluation) {
        ready.push(crate::evaluation::prepare(path, document)?);
    }
    if let Some(path) = &config.summary_json {
        ready.push(summary.prepare_json(path)?);
    }
    if let Some(path) = &config.evaluation.export_policy {
        let text = crate::control::export::bundle_text(&config.routing, &config.control);
        ready.push(crate::output::prepare(path, |w| {
            std::io::Write::write_all(w, text.as_bytes())
        })?);
    }
    if let Some(series) = &mut outputs.timeseries {
        series.add_steps(&outcome.step_series)?;
        let pictures = outputs.plots.zip(plots_dir.as_ref());
        ready.extend(write_series(
            series,
            pictures,
            config,
            outcome.autoscale.as_ref(),
        )?);
    }
    ready.extend(plots_dir.into_iter().map(Finished::Dir));
    ready.extend(outputs.emit_et_dir.map(Finished::Dir));
    if let Some(csv) = outputs.csv {
        ready.push(csv.finish()?);
    }
    crate::output::commit_all(ready)?;
    Ok(summary)
}

/// The run's workload spec, when it is generated from a spec or scenario.
fn load_spec(config: &SimConfig) -> anyhow::Result<Option<WorkloadSpec>> {
    Ok(match &config.workload {
        WorkloadSource::Dataset(..) => None,
        WorkloadSource::Spec(path) => Some(WorkloadSpec::load(path)?),
        WorkloadSource::Scenario(name) => {
            let scenario = scenario(name).with_context(|| format!("unknown scenario `{name}`"))?;
            Some(scenario.spec()?)
        }
        WorkloadSource::Synthetic(_) => None,
    })
}

/// The run's workload read from its dataset, or the quick path's (none for a spec's).
fn read_workload(config: &SimConfig) -> anyhow::Result<Workload> {
    let (path, options) = match &config.workload {
        WorkloadSource::Dataset(path, options) => (path, options),
        WorkloadSource::Synthetic(quick) => return synthetic(quick, config),
        _ => return Ok(Workload::default()),
    };
    let (workload, format) = read_dataset(path, *options, config.num_reqs)?;
    if options.format == DatasetFormat::Auto {
        eprintln!("{}", detected(path, format));
    }
    Ok(workload)
}

/// The run's workload without a spec: a dataset held in memory, or planned to be read as the
/// run goes when it is too large to hold ([`read_dataset_within`]); `--rate`'s requests.
fn held_or_planned<'s>(config: &SimConfig) -> anyhow::Result<(Workload, Option<Source<'s>>)> {
    let WorkloadSource::Dataset(path, options) = &config.workload else {
        return Ok((read_workload(config)?, None));
    };
    let (read, format) = read_dataset_within(path, *options, config.num_reqs)?;
    if options.format == DatasetFormat::Auto {
        eprintln!("{}", detected(path, format));
    }
    Ok(match read {
        DatasetRead::Listed(workload) => (workload, None),
        DatasetRead::Streamed(mut plan) => {
            eprintln!(
                "dataset {}: {} requests, more than --dataset-memory ({} MiB) holds: read again \
                 as the run reaches them",
                path.display(),
                plan.count,
                options.memory_bytes >> 20
            );
            let workload = Workload {
                classes: plan.classes.take(),
                ..Workload::default()
            };
            (workload, Some(Source::Dataset(plan)))
        }
    })
}

/// The time series the run collects: for `--timeseries` (at its interval) or for `--plots`
/// (at 1 s unless `--timeseries-interval` says otherwise).
fn time_series(config: &SimConfig) -> Option<TimeSeries> {
    (config.timeseries.is_some() || config.plots.is_some()).then(|| {
        let interval = config
            .timeseries
            .as_ref()
            .map_or(NS_PER_S, |t| t.interval_ns);
        TimeSeries::new(interval, config.num_instances())
    })
}

/// Writes the time series CSV (with the replica columns of an autoscaled run; returned, to
/// be put in place) and draws the pictures the run asked for.
fn write_series(
    series: &TimeSeries,
    pictures: Option<(RunPlots, &StagedDir)>,
    config: &SimConfig,
    replicas: Option<&AutoscaleReport>,
) -> anyhow::Result<Option<Finished>> {
    let file = match &config.timeseries {
        Some(t) => Some(series.prepare(&t.path, replicas)?),
        None => None,
    };
    if let (Some((pictures, dir)), Some(p)) = (pictures, &config.plots) {
        for path in pictures.write(series, dir, p.format)? {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(file)
}

/// One simulated second, ns.
const NS_PER_S: u64 = 1_000_000_000;

/// What a run is, for the titles of its pictures: the first instance's model and hardware
/// (with the instance count), and the workload's file or scenario name.
fn run_title(config: &SimConfig) -> String {
    let first = config.instance(0);
    let count = match config.num_instances() {
        1 => String::new(),
        n => format!(" × {n}"),
    };
    let model = first
        .model
        .name
        .rsplit('/')
        .next()
        .unwrap_or(&first.model.name);
    let file = |p: &std::path::Path| {
        p.file_name().map_or_else(
            || p.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    };
    let workload = match &config.workload {
        WorkloadSource::Dataset(path, _) | WorkloadSource::Spec(path) => file(path),
        WorkloadSource::Scenario(name) => name.clone(),
        WorkloadSource::Synthetic(q) => format!("{} req/s", q.rate),
    };
    format!("{model} on {}{count}, {workload}", first.hardware.name)
}

/// The quick workload: `--num-prompts` requests (100 by default), drawn with the run's seed.
fn synthetic(quick: &Synthetic, config: &SimConfig) -> anyhow::Result<Workload> {
    let n = config
        .num_reqs
        .map_or(Synthetic::DEFAULT_REQUESTS, |n| n as u64);
    let overrides = Overrides {
        num_requests: Some(n),
        seed: Some(config.seed as i64),
        max_requests: config.max_requests,
    };
    Ok(generate_workload(&quick.spec()?, overrides)?)
}

/// What the run changes of a spec: its request count.
fn spec_overrides(config: &SimConfig) -> Overrides {
    Overrides {
        num_requests: config.num_reqs.map(|n| n as u64),
        seed: None,
        max_requests: config.max_requests,
    }
}

/// The run's whole workload, every request in memory (a rehearsal replays it many times).
fn load_workload(config: &SimConfig) -> anyhow::Result<Workload> {
    match load_spec(config)? {
        Some(spec) => Ok(generate_workload(&spec, spec_overrides(config))?),
        None => read_workload(config),
    }
}

/// The workload `spec` generates, with the run's request count, as the run will draw it:
/// what it needs to know beforehand (the workload then holds only the requests' classes)
/// and the generator of its arrivals, so that its size does not bound the run's.
fn generated<'s>(
    spec: &'s WorkloadSpec,
    config: &SimConfig,
) -> anyhow::Result<(Workload, Option<(StreamPlan, Generator<'s>)>)> {
    let overrides = spec_overrides(config);
    // The plan's arrival times move arrivals (a replay mode) or bound the autoscaler's ticks.
    let timed = config.replay != ReplayMode::Trace || config.control.autoscale.is_some();
    let (mut plan, generator) = match timed {
        true => stream_workload(spec, overrides)?,
        false => stream_workload_untimed(spec, overrides)?,
    };
    let workload = Workload {
        classes: Some(std::mem::take(&mut plan.classes)),
        ..Workload::default()
    };
    Ok((workload, Some((plan, generator))))
}

/// A failure of the engine. A request of a generated workload has no workload line: it is
/// named by the spec (or scenario) and its line in `generate`'s output.
fn engine_error(e: engine::SimError, source: &WorkloadSource) -> anyhow::Error {
    let spec = match source {
        WorkloadSource::Dataset(..) => None,
        WorkloadSource::Spec(path) => Some(path.display().to_string()),
        WorkloadSource::Scenario(name) => Some(format!("scenario {name}")),
        WorkloadSource::Synthetic(_) => Some("--rate".to_owned()),
    };
    match (e, spec) {
        (engine::SimError::Unservable { id, line, message }, Some(spec)) => anyhow::anyhow!(
            "{spec}: generated request {id} (line {line} of `blis-cosim generate`'s output): \
             {message}"
        ),
        (e, _) => e.into(),
    }
}

/// The power model of the run, when its cluster config has `power` blocks.
fn power_model(config: &SimConfig) -> Option<PowerModel> {
    let power = config.power.as_ref()?;
    let instances: Vec<InstancePowerSetup> = config
        .each_instance()
        .zip(&power.npus)
        .map(|(inst, &npu)| InstancePowerSetup {
            node_id: inst.node_id,
            npu,
            tp: inst.tp,
            pp: inst.pp,
            ep_total: inst.collectives.ep.total,
            role: inst.role,
            model: inst.model.clone(),
            fp: inst.served_bytes().activations,
            kv_fp: inst.served_bytes().kv,
            pim_active_w: inst
                .pim
                .as_ref()
                .map_or(0.0, |p| p.device.peak_power_w - p.device.idle_power_w),
        })
        .collect();
    Some(PowerModel::new(
        &power.nodes,
        &power.cpu_mem_gb,
        &instances,
        power.interval_ns,
    ))
}

/// The prefill/decode setup of the run, when some instance is a prefill or decode instance:
/// roles, the full-model KV bytes per token each prefill instance sends, the links of the
/// cluster config (an autoscaled replica's being its template's), and a decode-side router applying the run's policy on its own stream.
fn disaggregation(config: &SimConfig) -> Option<Disaggregation> {
    let links = config.links.as_ref()?;
    // The links are those of the configured instances: an autoscaled run's replica slot
    // takes its template's.
    let per = config.replicas_per_template;
    if config
        .instances
        .iter()
        .all(|i| i.role == InstanceRole::Colocated)
    {
        return None;
    }
    // Held per pair of templates: one per pair of slots grows with the square of the slots.
    Some(
        Disaggregation::grouped(
            config.each_instance().map(|i| i.role).collect(),
            config
                .each_instance()
                .map(|i| full_kv_bytes_per_token(&i.model, i.kv_dtype()))
                .collect(),
            Router::with_stream(config.routing.clone(), config.seed, b"router-decode"),
            per,
            |from, to| {
                if transfer_in_step(&config.instances[from]) {
                    Link::IN_STEP
                } else {
                    links.link(from, to)
                }
            },
        )
        .with_flow(config.pd_flow),
    )
}

/// Whether the KV transfers of instance `inst` are part of its prefill steps: under ASTRA-Sim a
/// prefill instance's batch sends its KV to the decode side and completes once it has arrived
/// ([`crate::chakra::prefill`]), so the engine hands the request over when the step ends.
fn transfer_in_step(inst: &InstanceConfig) -> bool {
    inst.role == InstanceRole::Prefill && inst.astra.is_some()
}

/// How the replay mode moves the arrivals known before the run.
#[derive(Debug, Clone, Copy)]
enum Retime {
    /// Trace mode: each at its time.
    Keep,
    /// `--arrival-speedup`: the gaps after the first arrival divided by `factor`.
    Speedup { first: Nanos, factor: f64 },
    /// Concurrency mode: every one due at the first arrival, let in as room allows.
    AllAt(Nanos),
}

impl Retime {
    /// Where the arrival at `t` moves.
    fn apply(self, t: Nanos) -> Nanos {
        match self {
            Retime::Keep => t,
            Retime::Speedup { first, factor } => {
                let at = first as f64 + ((t - first) as f64 / factor).round();
                at.min(MAX_TIME_NS as f64) as Nanos
            }
            Retime::AllAt(first) => first,
        }
    }
}

/// The replay mode's move of the arrivals known before the run, which span `span` (first,
/// last; `None`: none), and the concurrency limit of concurrency mode. Fails when a
/// slowed-down arrival would pass [`MAX_TIME_NS`].
fn replay(
    span: Option<(Nanos, Nanos)>,
    mode: ReplayMode,
) -> anyhow::Result<(Retime, Option<usize>)> {
    let Some((first, last)) = span else {
        return Ok((Retime::Keep, None));
    };
    match mode {
        ReplayMode::Trace => Ok((Retime::Keep, None)),
        ReplayMode::Speedup(f) => {
            // Moves keep the order: the last arrival moves furthest.
            let latest = first as f64 + ((last - first) as f64 / f).round();
            if latest > MAX_TIME_NS as f64 {
                anyhow::bail!(
                    "--arrival-speedup {f}: an arrival would come at {latest:e} ns, beyond the \
                     latest simulated time (10^18 ns, about 31 years)"
                );
            }
            Ok((Retime::Speedup { first, factor: f }, None))
        }
        ReplayMode::Concurrency(n) => Ok((Retime::AllAt(first), Some(n))),
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
