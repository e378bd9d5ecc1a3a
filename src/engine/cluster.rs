//! The cluster as a stepping state machine: [`Cluster`] owns a run's state (clock, event
//! queue, instances and their schedulers, arrivals, transfers, the gateway queue) and
//! advances it one instant at a time ([`Cluster::step`], [`Cluster::step_until`],
//! [`Cluster::run`]). The services it calls (latency backends, router, observer, injector,
//! wave pricer, control plane) are passed to each call ([`Services`]), so that borrows stay
//! simple and a test can stop the run at any instant and look.
//!
//! Components return their effects as values and the loop alone schedules events: a step's
//! start returns when it ends, transfers return [`TransferEffects`], finished requests give
//! back what they release, the control plane returns its actions, the router returns a
//! [`RouteDecision`]. The router sees the instances through the run's signals
//! (`signals.rs`: immediate, periodic or on-demand snapshots), never their live state.

use super::dp;
use super::eligibility::{Eligibility, Groups};
use super::events::{EventKind, EventQueue};
use super::hol::blocks_head_of_line;
use super::inject::{Arrivals, Injector};
use super::instance::{self, InstanceSim, Release};
use super::pd::{DecodeChoice, Disaggregation, TransferEffects, Transfers};
use super::signals::Signals;
use super::timeouts::Timeouts;
use super::{InstanceOutcome, InstanceSetup, Observer, RunOutcome, SimError, WavePricer};
use super::{pipeline, tiers};
use crate::Nanos;
use crate::autoscale::Autoscaler;
use crate::config::InstanceRole;
use crate::control::priority::NominalPriority;
use crate::control::{Action, ControlNote, ControlPlane, Dropped, Stage};
use crate::latency::LatencyBackend;
use crate::router::{InstanceSnapshot, RouteDecision, Routing, SignalConfig};
use crate::scheduler::{Scheduler, SchedulerBug, SchedulerStats};
use crate::trace::{Decision, TraceLevel};
use crate::workload::{Request, RequestClasses};
use std::borrow::Cow;
use std::collections::VecDeque;

mod scaling;

/// What a run is: its requests, its instances and how work enters.
pub struct Run<'r> {
    /// The initial requests, sorted by arrival.
    pub requests: &'r [Request],
    /// The instances (instance ids are the indices).
    pub setups: &'r [InstanceSetup],
    /// Prefill/decode disaggregation: the instances then have its roles.
    pub disaggregation: Option<Disaggregation>,
    /// Concurrency mode: most requests in the cluster at once; `None` is trace mode (see
    /// `inject.rs`).
    pub max_in_flight: Option<usize>,
    /// What the router sees of the instances and how stale (`signals.rs`).
    pub signals: SignalConfig,
    /// The autoscaler, when replicas come and go (`crate::autoscale`): the instances are
    /// then its replica slots, and only ready ones are routed to.
    pub autoscaler: Option<Autoscaler>,
    /// The requests' clients, whose timeouts the run enforces (`timeouts.rs`); `None`: no
    /// request has one.
    pub clients: Option<&'r RequestClasses>,
    /// Anomaly detection, when on (see [`crate::metrics::AnomalyCounts`]).
    pub watch: Option<AnomalyWatch<'r>>,
}

/// How a run detects anomalies: the thrash window, and the requests' nominal urgency that
/// priority inversions are judged by.
#[derive(Debug, Clone, Copy)]
pub struct AnomalyWatch<'r> {
    /// An eviction followed within this many ns by a lookup that needs the block is KV
    /// thrashing.
    pub thrash_window_ns: Nanos,
    /// Each request's nominal urgency.
    pub nominal: &'r NominalPriority,
}

impl<'r> Run<'r> {
    /// `requests` (sorted by arrival) on the instances of `setups`, in trace mode, colocated.
    pub fn new(requests: &'r [Request], setups: &'r [InstanceSetup]) -> Run<'r> {
        Run {
            requests,
            setups,
            disaggregation: None,
            max_in_flight: None,
            signals: SignalConfig::default(),
            watch: None,
            clients: None,
            autoscaler: None,
        }
    }

    /// The same run with its replicas scaled by `autoscaler`.
    pub fn autoscaled(self, autoscaler: Autoscaler) -> Run<'r> {
        Run {
            autoscaler: Some(autoscaler),
            ..self
        }
    }

    /// The same run, detecting anomalies as `watch` says.
    pub fn watch(self, watch: Option<AnomalyWatch<'r>>) -> Run<'r> {
        Run { watch, ..self }
    }

    /// The same run with the timeouts of the requests' `clients` enforced.
    pub fn clients(self, clients: Option<&'r RequestClasses>) -> Run<'r> {
        Run { clients, ..self }
    }

    /// The same run with prefill/decode disaggregation `pd`.
    pub fn disaggregated(self, pd: Disaggregation) -> Run<'r> {
        Run {
            disaggregation: Some(pd),
            ..self
        }
    }

    /// The same run with the router seeing the instances as `signals` says.
    pub fn signals(self, signals: SignalConfig) -> Run<'r> {
        Run { signals, ..self }
    }

    /// The same run with at most `limit` requests in the cluster at once (`None`: trace mode).
    pub fn max_in_flight(self, limit: Option<usize>) -> Run<'r> {
        Run {
            max_in_flight: limit,
            ..self
        }
    }
}

/// What a run calls out to: one latency backend per instance (same order as the setups),
/// the router of arrivals, the observer of results, and optionally an injector of requests
/// released at run time, a pricer of whole DP waves and the cluster's control plane
/// (admission, priorities, gateway queue, control-plane latencies; without one, requests
/// are routed at their arrival).
pub struct Services<'s, 'b> {
    pub backends: &'s mut [&'b mut dyn LatencyBackend],
    pub router: &'s mut dyn Routing,
    pub observer: &'s mut dyn Observer,
    pub injector: Option<&'s mut dyn Injector>,
    pub waves: Option<&'s mut dyn WavePricer>,
    pub control: Option<&'s mut ControlPlane>,
}

impl<'s, 'b> Services<'s, 'b> {
    /// The services of a run with neither injector nor wave pricer.
    pub fn new(
        backends: &'s mut [&'b mut dyn LatencyBackend],
        router: &'s mut dyn Routing,
        observer: &'s mut dyn Observer,
    ) -> Services<'s, 'b> {
        Services {
            backends,
            router,
            observer,
            injector: None,
            waves: None,
            control: None,
        }
    }

    /// The same services, with arrivals going through `control` (see [`crate::control`]).
    pub fn with_control(self, control: Option<&'s mut ControlPlane>) -> Services<'s, 'b> {
        Services { control, ..self }
    }

    /// The same services, with requests released at run time by `injector`.
    pub fn with_injector(self, injector: &'s mut dyn Injector) -> Services<'s, 'b> {
        Services {
            injector: Some(injector),
            ..self
        }
    }

    /// The same services, with the waves of DP groups priced by `waves` where it takes them.
    pub fn with_waves(self, waves: Option<&'s mut dyn WavePricer>) -> Services<'s, 'b> {
        Services { waves, ..self }
    }
}

/// A request the router held at the gateway.
struct Held {
    request: Request,
    groups: Groups,
    /// Its control-plane priority (0 without a control plane).
    priority: i32,
    /// When it was (last) held: it is asked about again only at a later instant.
    since: Nanos,
}

/// A run's state between instants. See the module docs of [`crate::engine`] for what one
/// instant does.
pub struct Cluster<'r> {
    setups: &'r [InstanceSetup],
    requests: &'r [Request],
    eligibility: Eligibility,
    arrivals: Arrivals<'r>,
    schedulers: Vec<Scheduler>,
    instances: Vec<InstanceSim<'r>>,
    /// The members of each DP group, by group index.
    groups: Vec<Vec<u32>>,
    /// The stages of each pipelined DP group (its members share them), by group index.
    group_stages: Vec<Option<pipeline::Stages<'r>>>,
    transfers: Option<Transfers<'r>>,
    effects: TransferEffects,
    queue: EventQueue,
    /// Instances to try to start at the end of the instant.
    ready: Vec<u32>,
    /// Requests released by the completions being applied, not yet among the arrivals.
    released: Vec<Request>,
    /// Requests the router holds, in the order they were held.
    gateway: VecDeque<Held>,
    /// The instant for which an arrival event to ask about the gateway is scheduled.
    gateway_event: Option<Nanos>,
    /// What the router sees of the instances.
    signals: Signals,
    finished: u64,
    rejected: u64,
    /// Requests the control plane ended unserved.
    dropped: u64,
    /// Requests in the control plane's hands (parked by slot), and the free slots.
    parked: Vec<Option<(Cow<'r, Request>, Groups)>>,
    free_parked: Vec<u32>,
    /// The control plane's decisions being carried out (a reused buffer).
    actions: Vec<Action>,
    /// The instances the control plane sees as serving: all, or an autoscaled run's ready
    /// replicas (refreshed before each look; a reused buffer).
    serving: Vec<u32>,
    /// The earliest instant for which a control event is scheduled and not yet applied
    /// (later ones may be pending too: a control event with nothing due does nothing).
    control_wake: Option<Nanos>,
    /// Ids of the requests the step being applied finished (with a control plane or
    /// timeouts).
    done: Vec<u64>,
    /// Anomaly detection, when on, and the head-of-line blocking events so far.
    watch: Option<AnomalyWatch<'r>>,
    hol_blocking: u64,
    /// Whether decisions are reported to the observer (its trace level is not `none`).
    tracing: bool,
    /// The requests' timers, when some have a timeout.
    timeouts: Option<Timeouts<'r>>,
    /// The instant for which a timeout event is scheduled and not yet applied.
    timeout_wake: Option<Nanos>,
    /// Requests that timed out.
    timed_out: u64,
    /// The autoscaler and its scratch, when replicas come and go.
    scaling: Option<scaling::Scaling<'r>>,
    now: Nanos,
}

/// Each instance's role: from the P/D setup, else colocated.
fn roles_of(disaggregation: Option<&Disaggregation>, instances: usize) -> Vec<InstanceRole> {
    match disaggregation {
        Some(pd) => {
            assert_eq!(pd.roles().len(), instances, "one role per instance");
            pd.roles().to_vec()
        }
        None => vec![InstanceRole::Colocated; instances],
    }
}

/// The instances' schedulers with the control plane's policies, their lower KV tiers, and
/// anomaly watching and decision tracing when the run asks for them.
fn prepared_schedulers(
    setups: &[InstanceSetup],
    roles: &[InstanceRole],
    services: &Services<'_, '_>,
    watch: Option<&AnomalyWatch<'_>>,
    tracing: bool,
) -> Result<Vec<Scheduler>, SimError> {
    let mut schedulers = new_schedulers(setups, roles);
    if let Some(control) = &services.control {
        let (order, preemption) = control.scheduling();
        for scheduler in &mut schedulers {
            scheduler.set_policies(order, preemption);
        }
    }
    tiers::attach(setups, &mut schedulers)?;
    for scheduler in &mut schedulers {
        if let Some(w) = watch {
            scheduler.watch_anomalies(w.thrash_window_ns);
        }
        if tracing {
            scheduler.trace_decisions();
        }
    }
    Ok(schedulers)
}

impl<'r> Cluster<'r> {
    /// The state of `run` before its first instant: every request (and every request the
    /// injector of `services` may release) checked against every instance, the instances
    /// idle, the first arrival scheduled.
    pub fn new(run: Run<'r>, services: &Services<'_, '_>) -> Result<Cluster<'r>, SimError> {
        let Run {
            requests,
            setups,
            disaggregation,
            max_in_flight,
            signals,
            watch,
            clients,
            autoscaler,
        } = run;
        assert!(
            !setups.is_empty() && setups.len() == services.backends.len(),
            "one backend per instance, at least one instance"
        );
        let roles = roles_of(disaggregation.as_ref(), setups.len());
        let mut eligibility = Eligibility::compute(requests, setups, &roles)?;
        if let Some(injector) = &services.injector {
            eligibility.check(injector.deferred(), setups)?;
        }
        let tracing = services.observer.trace_level() != TraceLevel::None;
        let mut schedulers =
            prepared_schedulers(setups, &roles, services, watch.as_ref(), tracing)?;
        let signals = Signals::new(signals, &mut schedulers);
        let groups = dp::groups(setups);
        let group_stages = groups
            .iter()
            .map(|members| {
                let first = members.first()?;
                let pipeline = setups[*first as usize].pipeline.as_ref();
                pipeline.map(pipeline::Stages::new)
            })
            .collect();
        let mut cluster = Cluster {
            setups,
            requests,
            eligibility,
            arrivals: Arrivals::new(requests, max_in_flight),
            schedulers,
            instances: setups.iter().map(InstanceSim::new).collect(),
            groups,
            group_stages,
            transfers: disaggregation.map(|pd| Transfers::new(pd, requests)),
            effects: TransferEffects::default(),
            queue: EventQueue::with_capacity(2 * setups.len() + 1),
            ready: Vec::with_capacity(setups.len()),
            released: Vec::new(),
            gateway: VecDeque::new(),
            gateway_event: None,
            signals,
            finished: 0,
            rejected: 0,
            dropped: 0,
            parked: Vec::new(),
            free_parked: Vec::new(),
            actions: Vec::new(),
            serving: (0..setups.len() as u32).collect(),
            control_wake: None,
            done: Vec::new(),
            watch,
            hol_blocking: 0,
            tracing,
            timeouts: Timeouts::new(clients),
            timeout_wake: None,
            timed_out: 0,
            scaling: None,
            now: 0,
        };
        if let Some(first) = cluster.arrivals.initial_event(None) {
            cluster.queue.push(first, EventKind::Arrival);
        }
        if let (Some(t), Some(_)) = (&mut cluster.transfers, &cluster.watch) {
            t.watch_anomalies();
        }
        if let Some(autoscaler) = autoscaler {
            cluster.start_scaling(autoscaler)?;
        }
        Ok(cluster)
    }

    /// The simulated time: the last instant settled (0 before the first).
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// When the next instant is, if anything is left to happen.
    pub fn next_instant(&self) -> Option<Nanos> {
        self.queue.next_time()
    }

    /// Instance `id`'s scheduler, as it is now.
    pub fn scheduler(&self, id: u32) -> &Scheduler {
        &self.schedulers[id as usize]
    }

    /// Instance `id` as it is now (live; the router sees each signal as stale as its refresh
    /// mode says, see [`crate::router::SignalConfig`]).
    pub fn snapshot(&self, id: u32) -> InstanceSnapshot {
        InstanceSnapshot::of(&self.schedulers[id as usize])
    }

    /// Re-reads every signal of every instance now, whatever its refresh mode (an explicit
    /// probe: how `on-demand` signals are refreshed).
    pub fn refresh_signals(&mut self) {
        let (schedulers, instances) = (&mut self.schedulers, &self.instances);
        self.signals.refresh_all(self.now, schedulers, instances);
    }

    /// Requests finished so far.
    pub fn finished(&self) -> u64 {
        self.finished
    }

    /// Requests the router rejected so far.
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// Requests the control plane ended unserved so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Requests the router holds at the gateway now.
    pub fn held(&self) -> usize {
        self.gateway.len()
    }

    /// Requests that timed out so far.
    pub fn timed_out(&self) -> u64 {
        self.timed_out
    }

    /// Requests that ended so far, served or not.
    fn ended(&self) -> u64 {
        self.finished + self.rejected + self.dropped + self.timed_out
    }

    /// Settles the next instant: applies every event due then, phase by phase
    /// ([`super::Phase`]), then starts the steps of the instances that can. Returns the
    /// instant, or `None` when nothing is left to happen.
    pub fn step(&mut self, s: &mut Services<'_, '_>) -> Result<Option<Nanos>, SimError> {
        self.skip_orphan_timeouts();
        let Some(t) = self.queue.next_time() else {
            return Ok(None);
        };
        if self.scaling.is_some() && self.work_done() {
            // Only the autoscaler's own events are left: the run is over.
            return Ok(None);
        }
        if t < self.now {
            let message = format!("the clock went back from {} to {t}", self.now);
            return Err(SchedulerBug::new(message).into());
        }
        self.now = t;
        while let Some(event) = self.queue.pop_until(t) {
            match event.kind {
                EventKind::StepEnd { instance } => self.on_step_end(instance, s)?,
                EventKind::TransferEnd { sender } => self.on_transfer_end(sender, s)?,
                EventKind::StageFree { instance } => self.mark_ready(instance),
                EventKind::Replica { instance, epoch } => self.on_replica(instance, epoch, s)?,
                EventKind::ScaleTick => self.on_scale_tick(s)?,
                EventKind::Arrival => self.on_arrivals(s)?,
                EventKind::Control => {
                    if self.control_wake == Some(t) {
                        self.control_wake = None;
                    }
                    self.drain_control(s)?;
                }
                EventKind::Timeout => self.on_timeouts(s)?,
            }
        }
        self.start_ready_instances(s)?;
        Ok(Some(t))
    }

    /// Settles every instant up to and including `t`; the clock is then at the last of them.
    pub fn step_until(&mut self, t: Nanos, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        while self.queue.next_time().is_some_and(|next| next <= t) {
            self.step(s)?;
        }
        Ok(())
    }

    /// Runs to completion and returns the outcome.
    pub fn run(mut self, mut s: Services<'_, '_>) -> Result<RunOutcome, SimError> {
        while self.step(&mut s)?.is_some() {}
        self.outcome()
    }

    /// The outcome of a run with nothing left to happen; an error if a request was lost.
    fn outcome(&self) -> Result<RunOutcome, SimError> {
        let parked = self.parked.len() - self.free_parked.len();
        if !self.gateway.is_empty() || parked > 0 {
            return Err(SimError::Stranded {
                now: self.now,
                held: self.gateway.len() + parked,
            });
        }
        let arrived = self.requests.len() as u64 + self.arrivals.released();
        if self.ended() != arrived {
            let message = format!(
                "{} of {arrived} requests finished, {} were rejected by the router, {} \
                 ended in the control plane and {} timed out",
                self.finished, self.rejected, self.dropped, self.timed_out
            );
            return Err(SchedulerBug::new(message).into());
        }
        let mut stats = SchedulerStats::default();
        for scheduler in &self.schedulers {
            stats += scheduler.stats();
        }
        Ok(RunOutcome {
            total_clocks_ns: self.now,
            steps: self.instances.iter().map(|i| i.steps).sum(),
            finished: self.finished,
            rejected: self.rejected,
            dropped: self.dropped,
            timed_out: self.timed_out,
            autoscale: self.scaling.as_ref().map(|sc| sc.report(self.now)),
            stats,
            hol_blocking: self.hol_blocking
                + self.transfers.as_ref().map_or(0, Transfers::hol_blocking),
            instances: self
                .instances
                .iter()
                .zip(&self.schedulers)
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
    fn mark_ready(&mut self, id: u32) {
        let inst = &mut self.instances[id as usize];
        if !inst.ready {
            inst.ready = true;
            self.ready.push(id);
        }
    }

    /// Phase 1: instance `id`'s step ends now. Its results are applied and reported, its
    /// prefills handed off, and the requests its completions release join the arrivals.
    fn on_step_end(&mut self, id: u32, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        let i = id as usize;
        let before = self.instances[i].finished;
        let counts_done = s.control.is_some()
            || self.timeouts.is_some()
            || self.scaling.as_ref().is_some_and(|sc| sc.keeps_requests());
        let release = Release {
            injector: s.injector.as_deref_mut(),
            released: &mut self.released,
            done: counts_done.then_some(&mut self.done),
        };
        let (scheduler, inst) = (&mut self.schedulers[i], &mut self.instances[i]);
        instance::finish_step(
            scheduler,
            inst,
            id,
            self.now,
            &mut *s.backends[i],
            &mut *s.observer,
            release,
        )?;
        self.finished += self.instances[i].finished - before;
        if let Some(scaling) = &mut self.scaling {
            scaling.forget(&self.done);
        }
        for &id in &self.done {
            if let Some(control) = s.control.as_deref_mut() {
                control.request_left(id);
            }
            if let Some(timeouts) = &mut self.timeouts {
                timeouts.disarm(id);
            }
        }
        self.done.clear();
        self.mark_ready(id);
        if let Some(t) = &mut self.transfers {
            let choice = DecodeChoice {
                setups: self.setups,
                eligibility: &self.eligibility,
                signals: &mut self.signals,
                instances: &self.instances,
                autoscaler: self.scaling.as_ref().map(|sc| sc.autoscaler()),
            };
            t.hand_off(
                id,
                self.now,
                &mut self.schedulers,
                choice,
                &mut self.effects,
            )?;
            self.apply_transfer_effects(s)?;
        }
        // After its hand-offs: a draining prefill replica waits for the KV it still holds.
        self.settle_drain(id, s)?;
        // Requests released by this step's completions (hand-offs release none).
        for request in self.released.drain(..) {
            let t = self.arrivals.release(request);
            self.queue.push(t, EventKind::Arrival);
        }
        self.admit_gated();
        self.ask_gateway_again(s);
        Ok(())
    }

    /// Something ended now: in concurrency mode, requests waiting for room enter.
    fn admit_gated(&mut self) {
        if self.arrivals.gated() && self.arrivals.has_waiting(self.now) {
            self.queue.push(self.now, EventKind::Arrival);
        }
    }

    /// Phase 2: the KV transfer from `sender` arrives now at its decode instance.
    fn on_transfer_end(&mut self, sender: u32, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        let Some(t) = &mut self.transfers else {
            return Err(SchedulerBug::new("a transfer without P/D".into()).into());
        };
        let to = t.finish(sender, self.now, &mut self.schedulers, &mut self.effects)?;
        self.apply_transfer_effects(s)?;
        // The decode instance has a request; the sender has blocks back.
        self.mark_ready(to);
        self.mark_ready(sender);
        // Draining replicas waiting for this transfer may be done (or drop what came).
        self.settle_drain(sender, s)?;
        self.settle_drain(to, s)?;
        self.ask_gateway_again(s);
        Ok(())
    }

    /// Schedules the transfer ends and reports the transfer events the last transfer call
    /// produced.
    fn apply_transfer_effects(&mut self, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        for (end, sender) in self.effects.ends.drain(..) {
            self.queue.push(end, EventKind::TransferEnd { sender });
        }
        for event in self.effects.events.drain(..) {
            s.observer.kv_transfer(&event)?;
            if self.tracing {
                s.observer.decision(&Decision::Transfer(&event))?;
            }
        }
        Ok(())
    }

    /// Something ended now: if the router holds requests, it is asked again in this
    /// instant's arrival phase.
    fn ask_gateway_again(&mut self, s: &Services<'_, '_>) {
        if !self.gateway.is_empty() && self.gateway_event != Some(self.now) {
            self.gateway_event = Some(self.now);
            self.queue.push(self.now, EventKind::Arrival);
        }
        if s.control.as_ref().is_some_and(|c| c.waiting_for_capacity()) {
            self.wake_control(self.now);
        }
    }

    /// Schedules a control event at `t` unless one is due by then (that one schedules the
    /// next when it is applied).
    fn wake_control(&mut self, t: Nanos) {
        if self.control_wake.is_none_or(|w| t < w) {
            self.control_wake = Some(t);
            self.queue.push(t, EventKind::Control);
        }
    }

    /// Phase 4: the requests the router held before now are asked about again (in the order
    /// they were held), then every request due now enters the run and is routed.
    fn on_arrivals(&mut self, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        let now = self.now;
        for _ in 0..self.gateway.len() {
            if self.gateway.front().is_none_or(|held| held.since >= now) {
                break;
            }
            if let Some(held) = self.gateway.pop_front() {
                self.dispatch(Cow::Owned(held.request), held.groups, held.priority, s)?;
            }
        }
        while let Some(due) = self.arrivals.next_due(now, self.ended()) {
            let (request, groups) = due.enter(now, &mut self.eligibility, self.setups)?;
            if let Some(deadline) = self.timeouts.as_mut().and_then(|t| t.arm(&request, now)) {
                self.wake_timeouts(deadline);
            }
            match s.control.as_deref_mut() {
                None => self.dispatch(request, groups, 0, s)?,
                Some(control) => {
                    let slot = match self.free_parked.pop() {
                        Some(slot) => slot,
                        None => {
                            self.parked.push(None);
                            (self.parked.len() - 1) as u32
                        }
                    };
                    control.arrive(now, slot, &request);
                    self.parked[slot as usize] = Some((request, groups));
                    self.drain_control(s)?;
                }
            }
        }
        if let Some(t) = self.arrivals.initial_event(Some(now)) {
            self.queue.push(t, EventKind::Arrival);
        }
        Ok(())
    }

    /// Phase [`super::Phase::Control`] (and after each arrival): carries out the control
    /// plane's decisions due now until it has none left, then schedules its next wake-up.
    fn drain_control(&mut self, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        loop {
            let mut actions = std::mem::take(&mut self.actions);
            if let Some(control) = s.control.as_deref_mut() {
                self.refresh_serving();
                control.poll(self.now, &self.schedulers, &self.serving, &mut actions);
                if self.tracing {
                    for note in control.take_notes() {
                        s.observer.decision(&note_decision(note))?;
                    }
                }
            }
            if actions.is_empty() {
                self.actions = actions;
                break;
            }
            for action in actions.drain(..) {
                self.act(action, s)?;
            }
            self.actions = actions;
        }
        let wake = s.control.as_ref().and_then(|c| c.next_wake());
        if let Some(t) = wake.filter(|&t| t > self.now) {
            self.wake_control(t);
        }
        Ok(())
    }

    /// Carries out one control-plane decision on a parked request.
    fn act(&mut self, action: Action, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        let slot = match action {
            Action::Route { slot, .. } | Action::Drop { slot, .. } => slot,
        };
        let Some((request, groups)) = self.parked.get_mut(slot as usize).and_then(Option::take)
        else {
            let message = format!("the control plane named an empty slot {slot}");
            return Err(SchedulerBug::new(message).into());
        };
        self.free_parked.push(slot);
        match action {
            Action::Route { priority, .. } => self.dispatch(request, groups, priority, s),
            Action::Drop { why, .. } => {
                self.dropped += 1;
                self.disarm(request.id);
                if self.tracing {
                    let (t, request) = (self.now, request.id);
                    let decision = match why.stage {
                        Stage::Admission => Decision::Admission {
                            t,
                            request,
                            refused: Some(why),
                        },
                        _ => Decision::Dropped { t, request, why },
                    };
                    s.observer.decision(&decision)?;
                }
                s.observer.request_dropped(&request, self.now, why)?;
                Ok(())
            }
        }
    }

    /// Routes `request` (with its candidate lists `groups` and control-plane `priority`)
    /// and acts on the decision.
    fn dispatch(
        &mut self,
        request: Cow<'r, Request>,
        groups: Groups,
        priority: i32,
        s: &mut Services<'_, '_>,
    ) -> Result<(), SimError> {
        let (schedulers, instances) = (&mut self.schedulers, &self.instances);
        self.signals.refresh_due(self.now, schedulers, instances);
        let mut candidates = self.eligibility.arrival(groups);
        if let Some(scaling) = &mut self.scaling {
            candidates = scaling.routable(candidates);
            if candidates.is_empty() {
                // No replica able to serve it is ready: it waits at the gateway for one.
                self.gateway.push_back(Held {
                    request: request.into_owned(),
                    groups,
                    priority,
                    since: self.now,
                });
                return Ok(());
            }
        }
        let view = self.signals.view(&self.schedulers);
        let decision = s.router.decide(&request, candidates, &view);
        if self.tracing {
            s.observer.decision(&Decision::Routing {
                t: self.now,
                request: request.id,
                decision,
                explanation: s.router.explanation(),
            })?;
        }
        match decision {
            RouteDecision::To(id) if candidates.binary_search(&id).is_ok() => {
                let blocked =
                    self.watch.is_some() && blocks_head_of_line(&self.schedulers, id, candidates);
                self.enqueue(id, &request, priority, blocked);
                self.mark_ready(id);
                if let Some(scaling) = &mut self.scaling {
                    scaling.routed(|| request.clone(), (groups, priority));
                }
                if let (Some(t), Cow::Owned(r)) = (&mut self.transfers, request) {
                    t.entered(id, r, groups);
                }
            }
            RouteDecision::To(id) => {
                let message = format!(
                    "the router sent request {} to instance {id}, which cannot serve it",
                    request.id
                );
                return Err(SchedulerBug::new(message).into());
            }
            RouteDecision::Queue => self.gateway.push_back(Held {
                request: request.into_owned(),
                groups,
                priority,
                since: self.now,
            }),
            RouteDecision::Reject => {
                self.rejected += 1;
                self.disarm(request.id);
                if let Some(control) = s.control.as_deref_mut() {
                    control.request_left(request.id);
                }
                let why = Dropped::rejected(Stage::Routing, "router");
                s.observer.request_dropped(&request, self.now, why)?;
            }
        }
        Ok(())
    }

    /// Queues `request` on instance `id` with `priority`; with anomaly detection, with its
    /// nominal urgency, counting a head-of-line blocking event if `blocked`.
    fn enqueue(&mut self, id: u32, request: &Request, priority: i32, blocked: bool) {
        let Some(w) = self.watch else {
            self.schedulers[id as usize].enqueue_with_priority(request, priority);
            return;
        };
        self.hol_blocking += u64::from(blocked);
        let nominal = w.nominal.of(request);
        self.schedulers[id as usize].enqueue_ranked(request, priority, nominal);
    }

    /// Reports the scheduling decisions instance `id` noted to the observer.
    fn report_scheduling(&mut self, id: u32, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        let t = self.now;
        for decision in self.schedulers[id as usize].take_decisions() {
            let d = Decision::Schedule {
                t,
                instance: id,
                decision,
            };
            s.observer.decision(&d)?;
        }
        Ok(())
    }

    /// Request `id` ended otherwise than by its timeout.
    fn disarm(&mut self, id: u64) {
        if let Some(timeouts) = &mut self.timeouts {
            timeouts.disarm(id);
        }
    }

    /// Schedules a timeout event at `t` unless one is due by then.
    fn wake_timeouts(&mut self, t: Nanos) {
        if self.timeout_wake.is_none_or(|w| t < w) {
            self.timeout_wake = Some(t);
            self.queue.push(t, EventKind::Timeout);
        }
    }

    /// Discards the timeout events due before any live timer (every request they were
    /// scheduled for has ended), so that they never move the clock (BLIS's lazy
    /// cancellation), and schedules one at the next live deadline instead.
    fn skip_orphan_timeouts(&mut self) {
        let Some(timeouts) = self.timeouts.as_mut() else {
            return;
        };
        while let Some(&event) = self.queue.peek() {
            let live = timeouts.next_deadline();
            if event.kind != EventKind::Timeout || live.is_some_and(|d| d <= event.time) {
                return;
            }
            self.queue.pop_until(event.time);
            if self.timeout_wake == Some(event.time) {
                self.timeout_wake = None;
            }
            if let Some(d) = live.filter(|_| self.timeout_wake.is_none()) {
                self.timeout_wake = Some(d);
                self.queue.push(d, EventKind::Timeout);
            }
        }
    }

    /// Phase [`super::Phase::Timeouts`]: every request whose timeout runs out now ends as
    /// timed out, wherever it is; what it held is free for this instant's steps.
    fn on_timeouts(&mut self, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        if self.timeout_wake == Some(self.now) {
            self.timeout_wake = None;
        }
        let mut any = false;
        while let Some(timer) = self.timeouts.as_mut().and_then(|t| t.next_due(self.now)) {
            let stage = self.withdraw(timer.id, s)?;
            if let Some(scaling) = &mut self.scaling {
                scaling.forget(&[timer.id]);
            }
            self.timed_out += 1;
            let why = Dropped::timed_out(stage);
            if self.tracing {
                let (t, request) = (self.now, timer.id);
                s.observer
                    .decision(&Decision::Dropped { t, request, why })?;
            }
            s.observer
                .request_dropped(&timer.request(), self.now, why)?;
            any = true;
        }
        if let Some(next) = self.timeouts.as_mut().and_then(|t| t.next_deadline()) {
            self.wake_timeouts(next);
        }
        if any {
            self.admit_gated();
            self.ask_gateway_again(s);
        }
        Ok(())
    }

    /// Takes request `id`, which has not ended, out of wherever it is; returns the stage.
    fn withdraw(&mut self, id: u64, s: &mut Services<'_, '_>) -> Result<Stage, SimError> {
        if let Some(k) = self.gateway.iter().position(|h| h.request.id == id) {
            self.gateway.remove(k);
            if let Some(control) = s.control.as_deref_mut() {
                control.request_left(id);
            }
            return Ok(Stage::Routing);
        }
        let parked =
            |p: &Option<(Cow<'r, Request>, Groups)>| p.as_ref().is_some_and(|p| p.0.id == id);
        if let Some(slot) = self.parked.iter().position(parked) {
            self.parked[slot] = None;
            self.free_parked.push(slot as u32);
            let stage = s
                .control
                .as_deref_mut()
                .and_then(|c| c.withdraw(slot as u32));
            return stage.ok_or_else(|| nowhere(id));
        }
        let on = (0..self.schedulers.len()).find(|&i| self.schedulers[i].cancel(id).is_some());
        let transfer = match &mut self.transfers {
            Some(t) => t.cancel(id, &mut self.schedulers)?,
            None => None,
        };
        let in_transfer = transfer.is_some();
        if let Some((from, to)) = transfer {
            // Draining replicas waiting for this transfer may be done.
            self.settle_drain(from, s)?;
            if let Some(to) = to {
                self.settle_drain(to, s)?;
            }
        }
        if let Some(i) = on {
            self.mark_ready(i as u32);
            // A draining replica whose last request this was is off now.
            self.settle_drain(i as u32, s)?;
        } else if !in_transfer {
            return Err(nowhere(id));
        }
        if let Some(control) = s.control.as_deref_mut() {
            control.request_left(id);
        }
        Ok(if in_transfer {
            Stage::Transfer
        } else {
            Stage::Instance
        })
    }

    /// Closing phase: every instance queued for an attempt, by id, starts a step (or its DP
    /// group a wave) if it can.
    fn start_ready_instances(&mut self, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        self.ready.sort_unstable();
        for k in 0..self.ready.len() {
            let id = self.ready[k];
            self.instances[id as usize].ready = false;
            match self.setups[id as usize].dp_group {
                Some(group) => {
                    self.start_wave(group, s)?;
                    if self.tracing {
                        for k in 0..self.groups[group as usize].len() {
                            self.report_scheduling(self.groups[group as usize][k], s)?;
                        }
                    }
                }
                None => {
                    self.start_instance(id, s)?;
                    if self.tracing {
                        self.report_scheduling(id, s)?;
                    }
                }
            }
        }
        self.ready.clear();
        Ok(())
    }

    /// Starts a wave of DP group `group` if it can (see `dp.rs`).
    fn start_wave(&mut self, group: u32, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        let members = &self.groups[group as usize];
        let wave = dp::Wave {
            group,
            members,
            instances: &mut self.instances,
            schedulers: &mut self.schedulers,
            backends: s.backends,
            pricer: s.waves.as_deref_mut(),
        };
        if let Some(stages) = self.group_stages[group as usize].as_mut() {
            let pipelined = dp::PipelinedWave { wave, stages };
            if let Some(t) = pipelined.start(self.now)? {
                for &m in members {
                    self.queue.push(t.end, EventKind::StepEnd { instance: m });
                }
                let first = members[0];
                let kind = EventKind::StageFree { instance: first };
                self.queue.push(t.stage0_free, kind);
            }
        } else if let Some(end) = wave.start(self.now)? {
            for (i, &m) in members.iter().enumerate() {
                self.queue
                    .push(end.of(i), EventKind::StepEnd { instance: m });
            }
        }
        Ok(())
    }

    /// Starts the next step of instance `id` (outside DP groups) if it can.
    fn start_instance(&mut self, id: u32, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        let i = id as usize;
        let (inst, scheduler) = (&mut self.instances[i], &mut self.schedulers[i]);
        let backend = &mut *s.backends[i];
        let now = self.now;
        if inst.stages.is_some() {
            if let Some(t) = instance::start_pipelined(scheduler, inst, id, now, backend)? {
                self.queue.push(t.end, EventKind::StepEnd { instance: id });
                let kind = EventKind::StageFree { instance: id };
                self.queue.push(t.stage0_free, kind);
            }
            return Ok(());
        }
        if !inst.busy
            && scheduler.has_work()
            && let Some(end) = instance::start_step(scheduler, inst, id, now, backend)?
        {
            self.queue.push(end, EventKind::StepEnd { instance: id });
        }
        Ok(())
    }
}

/// The error of a timed-out request found nowhere: a bug.
fn nowhere(id: u64) -> SimError {
    SchedulerBug::new(format!("request {id} timed out but is nowhere in the run")).into()
}

/// One scheduler per instance, set up for its pipeline depth and role.
fn new_schedulers(setups: &[InstanceSetup], roles: &[InstanceRole]) -> Vec<Scheduler> {
    setups
        .iter()
        .zip(roles)
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
        .collect()
}

/// The trace record of a control-plane note.
fn note_decision(note: ControlNote) -> Decision<'static> {
    match note {
        ControlNote::Priority {
            t,
            request,
            priority,
        } => Decision::Priority {
            t,
            request,
            priority,
        },
        ControlNote::Admitted { t, request } => Decision::Admission {
            t,
            request,
            refused: None,
        },
        ControlNote::Enqueued { t, request, depth } => {
            Decision::GatewayEnqueue { t, request, depth }
        }
        ControlNote::Dispatched {
            t,
            request,
            depth,
            waited_ns,
        } => Decision::GatewayDispatch {
            t,
            request,
            depth,
            waited_ns,
        },
    }
}
