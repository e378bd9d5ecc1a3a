//! The discrete-event loop: one or more instances behind a router.
//!
//! Events live in one heap ordered by `(time ns, kind, sequence number)` ([`EventKind`]): the
//! arrival cursor (the next request's arrival) and, per instance, the end of its step in
//! flight (each instance runs at most one step at a time). At each instant `t`, taken from the
//! earliest event, the loop:
//! 1. Applies every step that finishes at `t`, in instance id order: first tokens, inter-token
//!    gaps and completions (which free their KV blocks). The instance becomes idle.
//! 2. Routes every request arriving at `t`, in arrival order (then file order; released
//!    requests after the initial ones of the same instant, in release order), against the
//!    instances' state at that moment (after step 1), and queues it on the chosen instance.
//! 3. Lets every idle instance that has work start its next step, in instance id order: its
//!    scheduler forms a batch, its latency backend prices it, and the step's end is scheduled
//!    at `t + step time` (plus the time to load the KV the step recalls from the lower tier
//!    of the prefix cache, if any; see `tiers.rs`). A busy instance's next step therefore
//!    starts at the very instant its previous one ends (steps run back to back), and an idle
//!    one starts exactly at the arrival that gives it work.
//!
//! Only then does the clock move on to the next event; it never goes back. An idle instance
//! with work that cannot form a batch is a loud error ([`SimError::Stuck`]), never a spin
//! (except a prefill instance whose KV blocks are held by transfers still in flight: it
//! retries when one ends). Before the run, every request is checked against every instance; a
//! request no instance can serve is refused ([`SimError::Unservable`]).
//!
//! With prefill/decode disaggregation ([`run_disaggregated`], see [`Disaggregation`]),
//! arrivals are routed among prefill and colocated instances; step 1 also hands off the
//! requests whose prompt a prefill instance completed, and KV transfers ending at `t` deliver
//! requests to decode instances (after the step completions, before the arrivals).
//!
//! The members of a data-parallel group ([`InstanceSetup::dp_group`]) step in lock step, as
//! waves: in step 3 a wave starts when every member is idle and one has work; every member
//! forms a batch (an idle one a dummy batch), the batches are padded to the widest, and all
//! members' steps end when the slowest member's does (`dp.rs`).
//!
//! A pipelined instance ([`InstanceSetup::pipeline`], `pp > 1`) has up to `pp` steps in
//! flight: in step 3 it forms a step when its stage 0 is free and fewer than `pp` are in
//! flight, its end is scheduled when the step's last stage ends, and a `StageFree` event
//! marks it ready again when stage 0 is free (`pipeline.rs`). A pipelined DP group does the
//! same with its waves.
//!
//! A finished request is also reported to the run's [`Injector`] (the one hook for work
//! released at run time, e.g. the next step of an agentic session; [`run_cluster_with`], see
//! `inject.rs`), whose requests join the arrivals still to come at their arrival time, after
//! the requests already pending for the same instant. Only a true completion counts: the last
//! token of a request on a colocated or decode instance (or a one-token request on a prefill
//! instance), never the hand-off at the end of a prefill. Released requests are checked and
//! routed like initial ones, under disaggregation too.
//!
//! The same-instant order is therefore, in full: step ends (by instance id; each collects the
//! requests its completions release and the hand-offs of its prefills), then KV transfer ends
//! (by sending instance), then arrivals (initial requests in list order, then released ones in
//! release order); then idle instances start steps, by instance id. Every tie is broken by a
//! fixed rule, so a run is deterministic.

mod dp;
mod eligibility;
mod events;
mod inject;
mod pd;
mod pipeline;
mod tiers;

pub use dp::WavePricer;
pub use events::{Event, EventKind, EventQueue};
pub use inject::{Dynamics, Injector, NoInjection};
pub use pd::{Disaggregation, TransferEvent};
pub use pipeline::{Pipeline, stage_blocks};
pub use tiers::LowerTierSetup;

use crate::Nanos;
use crate::config::InstanceRole;
use crate::latency::{BatchDesc, LatencyBackend, LatencyError, StageSends};
use crate::metrics::RequestRecord;
use crate::router::{Router, RoutingPolicy};
use crate::scheduler::{Scheduler, SchedulerBug, SchedulerConfig, SchedulerStats, StepTokens};
use crate::workload::Request;
use dp::StepShape;
use eligibility::Eligibility;
use inject::{Arrivals, Hooked};
use pd::Transfers;
use std::borrow::Cow;

/// What the engine needs to know about an instance beyond its scheduler.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceSetup {
    /// Model name, reported in the CSV; requests naming another model are not routed here.
    pub model_name: String,
    /// Longest sequence (prompt + output) the model accepts.
    pub max_model_len: u32,
    /// KV blocks of the instance.
    pub num_blocks: u32,
    /// Scheduler limits and switches.
    pub scheduler: SchedulerConfig,
    /// The lock-step data-parallel group of the instance (an index shared by its members),
    /// if any: the group's steps run as waves (see the module docs).
    pub dp_group: Option<u32>,
    /// The lower tier of the instance's prefix cache (`--prefix-storage`), if any.
    pub lower_tier: Option<LowerTierSetup>,
    /// Pipeline parallelism (`pp > 1`): the stages its steps run through, up to `pp` steps
    /// in flight (see `pipeline.rs`). `None`: one step at a time.
    pub pipeline: Option<Pipeline>,
}

/// One finished step, for observers (logging, progress).
#[derive(Debug, Clone, Copy)]
pub struct StepEvent<'a> {
    /// Instance that ran the step.
    pub instance: u32,
    /// Step start time.
    pub start_ns: Nanos,
    /// Step finish time.
    pub end_ns: Nanos,
    /// The step's batch as it was priced: a DP group member's is padded to its wave's widest
    /// batch and carries the group's gate tokens.
    pub batch: BatchDesc<'a>,
    /// Requests waiting on the instance when the step was formed.
    pub waiting: usize,
    /// Requests running on the instance when the step was formed.
    pub running: usize,
    /// The tokens the step computed.
    pub tokens: StepTokens,
    /// KV blocks held by requests once the step is done, and the instance's total.
    pub kv_blocks_used: usize,
    pub kv_blocks: usize,
}

/// Receives the run's results as they happen.
pub trait Observer {
    /// A request produced its last token.
    fn request_finished(&mut self, record: &RequestRecord<'_>) -> anyhow::Result<()>;

    /// A step finished (called after its requests are recorded); `backend` is the latency
    /// backend of the instance that ran it.
    fn step_finished(
        &mut self,
        step: &StepEvent<'_>,
        backend: &mut dyn LatencyBackend,
    ) -> anyhow::Result<()>;

    /// A KV transfer from a prefill to a decode instance started or arrived. Ignored unless
    /// implemented.
    fn kv_transfer(&mut self, _event: &TransferEvent) -> anyhow::Result<()> {
        Ok(())
    }
}

/// What one instance did over a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceOutcome {
    /// Steps executed (dummy steps of an idle DP-group member not included).
    pub steps: u64,
    /// Dummy steps run to keep pace with the other members of its DP group.
    pub dummy_steps: u64,
    /// Requests finished.
    pub finished: u64,
    /// Scheduler counters.
    pub stats: SchedulerStats,
}

/// The outcome of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    /// Simulated time when the last request finished.
    pub total_clocks_ns: Nanos,
    /// Steps executed, over all instances.
    pub steps: u64,
    /// Requests finished, over all instances.
    pub finished: u64,
    /// Scheduler counters summed over all instances.
    pub stats: SchedulerStats,
    /// Per instance, by id.
    pub instances: Vec<InstanceOutcome>,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A request can never be served as configured.
    #[error("request {id} (workload line {line}): {message}")]
    Unservable { id: u64, line: u64, message: String },
    /// The latency backend failed.
    #[error("latency backend: {0}")]
    Latency(#[from] LatencyError),
    /// An internal invariant broke.
    #[error(transparent)]
    Bug(#[from] SchedulerBug),
    /// An idle instance has requests but no step can be formed: a bug, reported instead of
    /// spinning.
    #[error(
        "stuck at {now} ns on instance {instance}: nothing can be scheduled with {waiting} \
         waiting and {running} running"
    )]
    Stuck {
        now: Nanos,
        instance: u32,
        waiting: usize,
        running: usize,
    },
    /// The simulated clock would pass its limit: an input far outside any real deployment.
    #[error(
        "at {now} ns a step or transfer of {ns} ns would end past the latest simulated time \
         (10^18 ns, about 31 years): check the workload's times, the latency tables and the configs"
    )]
    ClockOverflow { now: Nanos, ns: Nanos },
    /// Writing results failed.
    #[error(transparent)]
    Output(#[from] anyhow::Error),
}

/// Runs `requests` (sorted by arrival) on one instance to completion.
pub fn run(
    requests: &[Request],
    setup: &InstanceSetup,
    backend: &mut dyn LatencyBackend,
    observer: &mut dyn Observer,
) -> Result<RunOutcome, SimError> {
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    run_cluster(
        requests,
        std::slice::from_ref(setup),
        &mut [backend],
        &mut router,
        observer,
    )
}

/// One instance's state in the loop, besides its scheduler.
struct InstanceSim<'a> {
    setup: &'a InstanceSetup,
    /// A step is in flight.
    busy: bool,
    step_start: Nanos,
    /// Queue lengths when the step in flight was formed.
    waiting: usize,
    running: usize,
    steps: u64,
    dummy_steps: u64,
    /// The step in flight is a DP dummy step (no request of the instance in it).
    dummy: bool,
    /// The padding and gate tokens the step in flight was priced with (set by DP waves).
    shape: StepShape,
    finished: u64,
    /// Queued for a scheduling attempt at the end of the current instant.
    ready: bool,
    /// The stages of a pipelined instance (then `busy` and `step_start` are unused).
    stages: Option<pipeline::Stages<'a>>,
    /// When its last step ended (`None` before the first).
    last_end: Option<Nanos>,
    /// The step being formed starts as the previous one ends ([`BatchDesc::back_to_back`]).
    back_to_back: bool,
}

/// Runs `requests` (sorted by arrival) on the instances described by `setups`, priced by
/// `backends` (one per instance, same order; instance ids are the indices), routed by
/// `router`, to completion.
pub fn run_cluster(
    requests: &[Request],
    setups: &[InstanceSetup],
    backends: &mut [&mut dyn LatencyBackend],
    router: &mut Router,
    observer: &mut dyn Observer,
) -> Result<RunOutcome, SimError> {
    let dynamics = Dynamics {
        injector: &mut NoInjection,
        max_in_flight: None,
    };
    run_instances(requests, setups, None, backends, router, observer, dynamics)
}

/// [`run_cluster`], plus requests released as earlier ones finish and the concurrency gate
/// of `dynamics` (see [`Injector`]).
pub fn run_cluster_with(
    requests: &[Request],
    setups: &[InstanceSetup],
    backends: &mut [&mut dyn LatencyBackend],
    router: &mut Router,
    observer: &mut dyn Observer,
    dynamics: Dynamics<'_>,
) -> Result<RunOutcome, SimError> {
    run_instances(requests, setups, None, backends, router, observer, dynamics)
}

/// [`run_cluster`] with prefill/decode disaggregation: the instances have the roles of `pd`;
/// `router` spreads arrivals over the prefill and colocated instances, `pd`'s router hands
/// prefilled requests to decode instances.
pub fn run_disaggregated(
    requests: &[Request],
    setups: &[InstanceSetup],
    pd: Disaggregation,
    backends: &mut [&mut dyn LatencyBackend],
    router: &mut Router,
    observer: &mut dyn Observer,
) -> Result<RunOutcome, SimError> {
    let dynamics = Dynamics {
        injector: &mut NoInjection,
        max_in_flight: None,
    };
    run_instances(
        requests,
        setups,
        Some(pd),
        backends,
        router,
        observer,
        dynamics,
    )
}

/// The general entry, which the others wrap: runs `requests` (sorted by arrival) on the
/// instances described by `setups` to completion, with prefill/decode disaggregation when
/// `pd` is given (the instances then have its roles) and the requests released at run time
/// and concurrency gate of `dynamics`. `backends` has one latency backend per instance, same
/// order (instance ids are the indices); `router` spreads arrivals, initial and released.
pub fn run_instances(
    requests: &[Request],
    setups: &[InstanceSetup],
    pd: Option<Disaggregation>,
    backends: &mut [&mut dyn LatencyBackend],
    router: &mut Router,
    observer: &mut dyn Observer,
    dynamics: Dynamics<'_>,
) -> Result<RunOutcome, SimError> {
    let run = (requests, setups, pd);
    run_priced(run, backends, None, router, observer, dynamics)
}

/// [`run_instances`] (`run`: its requests, setups and disaggregation) with the waves of DP
/// groups priced by `waves` where it takes them (see [`WavePricer`]).
pub fn run_priced(
    run: (&[Request], &[InstanceSetup], Option<Disaggregation>),
    backends: &mut [&mut dyn LatencyBackend],
    mut waves: Option<&mut dyn WavePricer>,
    router: &mut Router,
    observer: &mut dyn Observer,
    dynamics: Dynamics<'_>,
) -> Result<RunOutcome, SimError> {
    let (requests, setups, pd) = run;
    assert!(
        !setups.is_empty() && setups.len() == backends.len(),
        "one backend per instance, at least one instance"
    );
    let roles = match &pd {
        Some(pd) => {
            assert_eq!(pd.roles().len(), setups.len(), "one role per instance");
            pd.roles().to_vec()
        }
        None => vec![InstanceRole::Colocated; setups.len()],
    };
    let mut eligibility = Eligibility::compute(requests, setups, &roles)?;
    eligibility.check(dynamics.injector.deferred(), setups)?;
    let mut arrivals = Arrivals::new(requests, dynamics.max_in_flight);
    let observer = &mut Hooked::new(observer, dynamics.injector);
    // Schedulers apart from the rest, so that the router can observe them as they are.
    let mut schedulers: Vec<Scheduler> = setups
        .iter()
        .zip(&roles)
        .map(|(setup, &role)| {
            let mut scheduler = Scheduler::new(setup.scheduler.clone(), setup.num_blocks);
            if let Some(p) = &setup.pipeline {
                scheduler.set_pipeline_depth(p.stage_blocks.len());
            }
            if role == InstanceRole::Prefill {
                scheduler.hand_off_prefills();
            }
            scheduler
        })
        .collect();
    tiers::attach(setups, &mut schedulers)?;
    let mut transfers = pd.map(|pd| Transfers::new(pd, requests));
    let mut instances: Vec<InstanceSim<'_>> = setups
        .iter()
        .map(|setup| InstanceSim {
            setup,
            busy: false,
            step_start: 0,
            waiting: 0,
            running: 0,
            steps: 0,
            dummy_steps: 0,
            dummy: false,
            shape: StepShape::default(),
            finished: 0,
            ready: false,
            stages: setup.pipeline.as_ref().map(pipeline::Stages::new),
            last_end: None,
            back_to_back: false,
        })
        .collect();
    let groups = dp::groups(setups);
    // The stages of each pipelined DP group (its members share them), by group index.
    let mut group_stages: Vec<Option<pipeline::Stages<'_>>> = groups
        .iter()
        .map(|members| {
            let first = members.first()?;
            setups[*first as usize]
                .pipeline
                .as_ref()
                .map(pipeline::Stages::new)
        })
        .collect();
    let mut queue = EventQueue::with_capacity(2 * setups.len() + 1);
    let mut ready: Vec<u32> = Vec::with_capacity(setups.len());
    let mut now: Nanos = 0;
    if let Some(first) = arrivals.initial_event(None) {
        queue.push(first, EventKind::Arrival);
    }
    while let Some(t) = queue.next_time() {
        debug_assert!(t >= now, "the clock went back from {now} to {t}");
        now = t;
        while let Some(event) = queue.pop_until(now) {
            match event.kind {
                EventKind::StepEnd { instance } => {
                    let i = instance as usize;
                    let inst = &mut instances[i];
                    finish_step(
                        &mut schedulers[i],
                        inst,
                        instance,
                        now,
                        &mut *backends[i],
                        observer,
                    )?;
                    mark_ready(inst, instance, &mut ready);
                    if let Some(t) = &mut transfers {
                        let (s, e) = (setups, &eligibility);
                        t.hand_off(instance, now, &mut schedulers, s, e, &mut queue, observer)?;
                    }
                    // Requests released by this step's completions (hand-offs release none).
                    observer.collect(&mut arrivals, |t| queue.push(t, EventKind::Arrival));
                    if arrivals.gated() && arrivals.has_waiting(now) {
                        queue.push(now, EventKind::Arrival);
                    }
                }
                EventKind::TransferEnd { sender } => {
                    let Some(t) = &mut transfers else {
                        return Err(SchedulerBug::new("a transfer without P/D".into()).into());
                    };
                    let to = t.finish(sender, now, &mut schedulers, &mut queue, observer)?;
                    // The decode instance has a request; the sender has blocks back.
                    mark_ready(&mut instances[to as usize], to, &mut ready);
                    mark_ready(&mut instances[sender as usize], sender, &mut ready);
                }
                EventKind::StageFree { instance } => {
                    mark_ready(&mut instances[instance as usize], instance, &mut ready);
                }
                EventKind::Arrival => {
                    while let Some(due) = arrivals.next_due(now, observer.finished()) {
                        let (r, groups) = due.enter(now, &mut eligibility, setups)?;
                        let id = router.route(&r, eligibility.arrival(groups), &schedulers);
                        schedulers[id as usize].enqueue(&r);
                        mark_ready(&mut instances[id as usize], id, &mut ready);
                        if let (Some(t), Cow::Owned(r)) = (&mut transfers, r) {
                            t.entered(id, r, groups);
                        }
                    }
                    if let Some(t) = arrivals.initial_event(Some(now)) {
                        queue.push(t, EventKind::Arrival);
                    }
                }
            }
        }
        ready.sort_unstable();
        for &id in &ready {
            instances[id as usize].ready = false;
            if let Some(g) = setups[id as usize].dp_group {
                let members = &groups[g as usize];
                let wave = dp::Wave {
                    group: g,
                    members,
                    instances: &mut instances,
                    schedulers: &mut schedulers,
                    backends,
                    pricer: waves.as_deref_mut(),
                };
                if let Some(stages) = group_stages[g as usize].as_mut() {
                    let pipelined = dp::PipelinedWave { wave, stages };
                    if let Some(t) = pipelined.start(now)? {
                        for &m in members {
                            queue.push(t.end, EventKind::StepEnd { instance: m });
                        }
                        let first = members[0];
                        queue.push(t.stage0_free, EventKind::StageFree { instance: first });
                    }
                    continue;
                }
                if let Some(end) = wave.start(now)? {
                    for (i, &m) in members.iter().enumerate() {
                        queue.push(end.of(i), EventKind::StepEnd { instance: m });
                    }
                }
                continue;
            }
            let (inst, scheduler) = (&mut instances[id as usize], &mut schedulers[id as usize]);
            if inst.stages.is_some() {
                let backend = &mut *backends[id as usize];
                if let Some(t) = start_pipelined(scheduler, inst, id, now, backend)? {
                    queue.push(t.end, EventKind::StepEnd { instance: id });
                    queue.push(t.stage0_free, EventKind::StageFree { instance: id });
                }
                continue;
            }
            if !inst.busy
                && scheduler.has_work()
                && let Some(end) =
                    start_step(scheduler, inst, id, now, &mut *backends[id as usize])?
            {
                queue.push(end, EventKind::StepEnd { instance: id });
            }
        }
        ready.clear();
    }
    let finished: u64 = instances.iter().map(|i| i.finished).sum();
    let arrived = requests.len() as u64 + arrivals.released();
    if finished != arrived {
        return Err(SchedulerBug::new(format!("{finished} of {arrived} requests finished")).into());
    }
    let mut stats = SchedulerStats::default();
    for scheduler in &schedulers {
        stats += scheduler.stats();
    }
    Ok(RunOutcome {
        total_clocks_ns: now,
        steps: instances.iter().map(|i| i.steps).sum(),
        finished,
        stats,
        instances: instances
            .iter()
            .zip(&schedulers)
            .map(|(i, scheduler)| InstanceOutcome {
                steps: i.steps,
                dummy_steps: i.dummy_steps,
                finished: i.finished,
                stats: scheduler.stats(),
            })
            .collect(),
    })
}

/// Queues instance `id` for a scheduling attempt at the end of the current instant.
fn mark_ready(inst: &mut InstanceSim<'_>, id: u32, ready: &mut Vec<u32>) {
    if !inst.ready {
        inst.ready = true;
        ready.push(id);
    }
}

/// Forms and prices the next step of idle instance `id` at `now`; returns when it ends, or
/// `None` when nothing can run until KV transfers from the instance free its blocks.
fn start_step(
    scheduler: &mut Scheduler,
    inst: &mut InstanceSim<'_>,
    id: u32,
    now: Nanos,
    backend: &mut dyn LatencyBackend,
) -> Result<Option<Nanos>, SimError> {
    if scheduler.schedule(now)?.is_none() {
        if scheduler.num_handed_off() > 0 {
            return Ok(None);
        }
        return Err(SimError::Stuck {
            now,
            instance: id,
            waiting: scheduler.num_waiting(),
            running: scheduler.num_running(),
        });
    }
    let shape = StepShape {
        back_to_back: inst.last_end == Some(now),
        ..StepShape::of_step(scheduler)
    };
    let compute_ns = backend.step_time(&shape.apply(scheduler.last_batch()))?;
    if compute_ns == 0 {
        return Err(LatencyError::Backend("backend priced a step at 0 ns".to_owned()).into());
    }
    // KV recalled from the lower tier of the prefix cache is loaded before the step computes.
    let step_ns = compute_ns.saturating_add(scheduler.last_recall_ns());
    let end = clock_add(now, step_ns)?;
    inst.busy = true;
    inst.step_start = now;
    inst.waiting = scheduler.num_waiting();
    inst.running = scheduler.num_running();
    inst.shape = shape;
    inst.steps += 1;
    Ok(Some(end))
}

/// `now + ns`, refused past [`crate::workload::MAX_TIME_NS`] (where sums of times could
/// wrap) rather than wrapping into a wrong result.
pub(crate) fn clock_add(now: Nanos, ns: Nanos) -> Result<Nanos, SimError> {
    match now.checked_add(ns) {
        Some(t) if t <= crate::workload::MAX_TIME_NS => Ok(t),
        _ => Err(SimError::ClockOverflow { now, ns }),
    }
}

/// Forms the next step of pipelined instance `id` at `now` if stage 0 is free, fewer than
/// `pp` steps are in flight and a batch can be formed; returns when it ends and when stage 0
/// is free again.
fn start_pipelined(
    scheduler: &mut Scheduler,
    inst: &mut InstanceSim<'_>,
    id: u32,
    now: Nanos,
    backend: &mut dyn LatencyBackend,
) -> Result<Option<pipeline::Timing>, SimError> {
    let Some(stages) = inst.stages.as_mut() else {
        return Ok(None);
    };
    if !stages.stage0_free(now) || !scheduler.can_form_step() || !scheduler.has_work() {
        return Ok(None);
    }
    if scheduler.schedule(now)?.is_none() {
        // Every running request has its token in flight: the next step end brings work.
        if stages.in_flight() > 0 || scheduler.num_handed_off() > 0 {
            return Ok(None);
        }
        return Err(SimError::Stuck {
            now,
            instance: id,
            waiting: scheduler.num_waiting(),
            running: scheduler.num_running(),
        });
    }
    let shape = StepShape::of_step(scheduler);
    let batch = shape.apply(scheduler.last_batch());
    let tokens = batch.total_tokens();
    let blocks = &stages.pipeline().stage_blocks;
    let compute = stages.compute_mut();
    let sends = backend.stage_times(&batch, blocks, compute)?;
    if compute.iter().all(|&ns| ns == 0) {
        return Err(LatencyError::Backend("backend priced a step at 0 ns".to_owned()).into());
    }
    // KV recalled from the lower tier of the prefix cache is loaded before stage 0 computes.
    compute[0] += scheduler.last_recall_ns();
    let formed = pipeline::Formed {
        start: now,
        waiting: scheduler.num_waiting(),
        running: scheduler.num_running(),
        dummy: false,
        shape,
    };
    let send = match sends {
        StageSends::Separate => stages.send_ns(tokens),
        StageSends::Included => 0,
    };
    let timing = stages.start(formed, now, send);
    inst.steps += 1;
    Ok(Some(timing))
}

/// Applies the results of instance `id`'s step, which ends at `now`, and reports them.
fn finish_step(
    scheduler: &mut Scheduler,
    inst: &mut InstanceSim<'_>,
    id: u32,
    now: Nanos,
    backend: &mut dyn LatencyBackend,
    observer: &mut dyn Observer,
) -> Result<(), SimError> {
    if let Some(formed) = inst.stages.as_mut().and_then(|s| s.finish()) {
        inst.step_start = formed.start;
        inst.waiting = formed.waiting;
        inst.running = formed.running;
        inst.dummy = formed.dummy;
        inst.shape = formed.shape;
    }
    inst.busy = false;
    inst.last_end = Some(now);
    if std::mem::take(&mut inst.dummy) {
        return Ok(());
    }
    let finished = &mut inst.finished;
    scheduler.complete_step(now, &inst.setup.model_name, id, |rec| {
        *finished += 1;
        observer.request_finished(rec)
    })?;
    observer.step_finished(
        &StepEvent {
            instance: id,
            start_ns: inst.step_start,
            end_ns: now,
            batch: inst.shape.apply(scheduler.completed_batch()),
            waiting: inst.waiting,
            running: inst.running,
            tokens: scheduler.last_step_tokens(),
            kv_blocks_used: scheduler.pool().num_pinned(),
            kv_blocks: scheduler.pool().num_blocks(),
        },
        backend,
    )?;
    Ok(())
}
