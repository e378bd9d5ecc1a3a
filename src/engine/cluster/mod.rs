//! The cluster as a stepping state machine: [`Cluster`] owns a run's state (clock, event
//! queue, instances and their schedulers, arrivals, transfers, the gateway queue) and
//! advances it one instant at a time ([`Cluster::step`], [`Cluster::step_until`],
//! [`Cluster::run`]). The services it calls (latency backends, router, observer, injector,
//! wave pricer, control plane) are passed to each call ([`Services`]), so that borrows stay
//! simple and a test can stop the run at any instant and look.
//!
//! Components return their effects as values and the loop alone applies them: a step's start
//! returns when it ends, a completed step hands back the requests it finished
//! ([`crate::scheduler::Completions`]), transfers queue their ends and events, the control
//! plane returns its actions, the router returns a [`crate::router::RouteDecision`]. Every
//! request ends through [`Cluster::end`] (`endings.rs`), and what the observer hears of (records,
//! steps, transfers, decisions) is queued as effects and applied in one place,
//! `Cluster::apply_effects` (`effects.rs`), after each event and after the instant's steps
//! start. The router sees the instances through the run's signals (`signals.rs`: immediate,
//! periodic or on-demand snapshots), never their live state.
//!
//! Files, by concern:
//! - `mod.rs`: the run's description ([`Run`], [`Services`]), the state, the stepping
//!   vocabulary and the outcome;
//! - `start.rs`: the state before the first instant;
//! - `instances.rs`: steps ending, KV transfers arriving, idle instances starting steps;
//! - `routing.rs`: arrivals, the router's decisions, the gateway;
//! - `control.rs`: the control plane's parked requests and decisions;
//! - `endings.rs`: how requests end ([`Cluster::end`], the counts, timeouts);
//! - `effects.rs`: the effects queued and their application, the only caller of the observer;
//! - `scaling.rs`: the autoscaler's ticks, replica lifecycles and drains.

use super::cores::Cores;
use super::eligibility::Eligibility;
use super::events::{EventKind, EventQueue};
use super::inject::{ArrivalStream, Arrivals};
use super::instance::InstanceSim;
use super::pd::{Disaggregation, Transfers};
use super::signals::Signals;
use super::{
    InstanceOutcome, InstanceSetup, Observer, RunOutcome, Setups, SimError, WavePricer, pipeline,
};
use crate::Nanos;
use crate::autoscale::Autoscaler;
use crate::control::ControlPlane;
use crate::control::priority::NominalPriority;
use crate::latency::LatencyBackend;
use crate::router::{InstanceSnapshot, Routing, SignalConfig};
/// Instances above which the loop warms the caches (defined beside the hints it issues).
pub use crate::scheduler::WARM_ABOVE;
use crate::scheduler::{Core, SchedulerBug, SchedulerStats};
use crate::workload::Injector;
use crate::workload::{Request, RequestClasses};

mod control;
pub(super) mod effects;
mod endings;
mod instances;
mod routing;
mod scaling;
mod start;

use control::ControlState;
use effects::Effects;
use endings::{Tally, TimeoutState};
use routing::Gateway;

/// What a run is: its requests, its instances and how work enters.
pub struct Run<'r> {
    /// The initial requests, sorted by arrival.
    pub requests: &'r [Request],
    /// More initial requests, drawn as the run reaches them (see [`Run::streamed`]).
    pub stream: Option<ArrivalStream<'r>>,
    /// The instances (instance ids are the indices): an autoscaled run's replica slots share
    /// their template's setup.
    pub setups: Setups<'r>,
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
            stream: None,
            setups: setups.into(),
            disaggregation: None,
            max_in_flight: None,
            signals: SignalConfig::default(),
            watch: None,
            clients: None,
            autoscaler: None,
        }
    }

    /// The same run with more initial requests drawn from `stream` as the run reaches them
    /// (in arrival order, after the listed ones at equal times), so that only the requests
    /// in flight are held. A streamed request no instance can serve is refused when it
    /// arrives, not before the run.
    pub fn streamed(self, stream: ArrivalStream<'r>) -> Run<'r> {
        Run {
            stream: Some(stream),
            ..self
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

/// A run's state between instants. See the module docs of [`crate::engine`] for what one
/// instant does.
pub struct Cluster<'r> {
    setups: Setups<'r>,
    eligibility: Eligibility,
    arrivals: Arrivals<'r>,
    schedulers: Cores<'r>,
    instances: Vec<InstanceSim<'r>>,
    /// The members of each DP group, by group index.
    groups: Vec<Vec<u32>>,
    /// The stages of each pipelined DP group (its members share them), by group index.
    group_stages: Vec<Option<pipeline::Stages<'r>>>,
    transfers: Option<Transfers<'r>>,
    /// What happened and is not applied yet.
    effects: Effects<'r>,
    queue: EventQueue,
    /// Instances to try to start at the end of the instant.
    ready: Vec<u32>,
    /// Requests released by the completions being applied, not yet among the arrivals.
    released: Vec<Request>,
    /// Requests the router holds.
    gateway: Gateway,
    /// What the router sees of the instances.
    signals: Signals,
    /// How many requests ended, by how.
    tally: Tally,
    /// The engine's side of the control plane (empty without one).
    control: ControlState<'r>,
    /// Anomaly detection, when on, and the head-of-line blocking events so far.
    watch: Option<AnomalyWatch<'r>>,
    hol_blocking: u64,
    /// Whether decisions are reported to the observer (its trace level is not `none`).
    tracing: bool,
    /// Whether finished steps are reported to the observer ([`super::Observer::wants_steps`]).
    report_steps: bool,
    /// The requests' timers, when some have a timeout.
    timeouts: Option<TimeoutState<'r>>,
    /// The autoscaler and its scratch, when replicas come and go.
    scaling: Option<scaling::Scaling<'r>>,
    /// The clock.
    now: Nanos,
    /// The last instant settled: the end of the run once nothing is left (stepping to a
    /// later time moves the clock, not the run's end).
    settled: Nanos,
    /// Whether the loop warms the caches for the next instance's step ([`WARM_ABOVE`]).
    warm: bool,
    /// Whether a step end alone at its instant may be settled quietly
    /// ([`Cluster::step_quietly`]), and how many were.
    quiet: bool,
    quiet_steps: u64,
    /// Whether a quiet step end may run its instance ahead of the clock
    /// ([`Cluster::step_ahead`]), and how many steps were.
    ahead: bool,
    steps_ahead: u64,
    /// Whether the run's injector may release requests as others finish (then no instance
    /// runs ahead: a released request could arrive before the next known arrival).
    releases: bool,
}

impl<'r> Cluster<'r> {
    /// The simulated time: the last instant settled (0 before the first), or the time
    /// [`Cluster::step_until`] was last asked for, if later.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// When the next instant is, if anything is left to happen.
    pub fn next_instant(&self) -> Option<Nanos> {
        self.queue.next_time()
    }

    /// Instance `id`'s scheduler, as it is now.
    pub fn scheduler(&self, id: u32) -> &Core {
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
        self.tally.finished
    }

    /// Requests the router rejected so far.
    pub fn rejected(&self) -> u64 {
        self.tally.rejected
    }

    /// Requests the control plane ended unserved so far.
    pub fn dropped(&self) -> u64 {
        self.tally.dropped
    }

    /// Requests the router holds at the gateway now.
    pub fn held(&self) -> usize {
        self.gateway.held.len()
    }

    /// Requests that timed out so far.
    pub fn timed_out(&self) -> u64 {
        self.tally.timed_out
    }

    /// Instance snapshots taken so far for the router and the autoscaler, at the start (one
    /// per instance) included.
    pub fn snapshots_taken(&self) -> u64 {
        self.signals.snapshots_taken()
    }

    /// Engine cores built so far: one per instance built, and one per setup standing for
    /// its instances not built yet (see `cores.rs`).
    pub fn cores_built(&self) -> usize {
        self.schedulers.built()
    }

    /// Autoscaler ticks evaluated so far (0 without an autoscaler).
    pub fn ticks_evaluated(&self) -> u64 {
        self.scaling.as_ref().map_or(0, |sc| sc.evaluated)
    }

    /// Skips the autoscaler's ticks that would change nothing (`true`, the default), or
    /// evaluates every tick: the run is the same either way.
    pub fn skip_idle_ticks(&mut self, on: bool) {
        if let Some(sc) = &mut self.scaling {
            sc.skip_idle = on;
        }
    }

    /// Warms the CPU caches one event ahead (`true`) or not, whatever the instance count
    /// ([`WARM_ABOVE`] decides by default): the run is the same either way.
    pub fn warm_caches(&mut self, on: bool) {
        self.warm = on;
    }

    /// Whether the loop warms the CPU caches one event ahead.
    pub fn warms_caches(&self) -> bool {
        self.warm
    }

    /// Settles a step end that is alone at its instant and ends no request quietly (`true`, the
    /// default where the run allows it), or always phase by phase: the run is the same either
    /// way. Quietly, the instance's next step is formed and priced at once and its end replaces
    /// the one applied in the event queue, without the instant's phases, effects and queue of
    /// instances to start. A run allows it when nothing outside the instance hears of such a
    /// step: no observer of steps or decisions, and (checked at each step) no control plane
    /// waiting for room that a step may make (its detector reads utilization) and no request
    /// held at the gateway; DP groups and pipelined instances always step phase by phase. (A
    /// concurrency gate admits only at completions, which are never quiet.) Under P/D, a step
    /// end that hands prefills off is applied phase by phase, and the KV pulls a quietly formed
    /// step starts are started with it; under autoscaling, so is a draining replica's step end.
    pub fn step_quietly(&mut self, on: bool) {
        self.quiet = on && self.allows_quiet_steps();
    }

    /// Whether step ends may be settled quietly ([`Cluster::step_quietly`]).
    pub fn steps_quietly(&self) -> bool {
        self.quiet
    }

    /// How many instants were settled by a quiet step end so far.
    pub fn quiet_steps(&self) -> u64 {
        self.quiet_steps
    }

    /// Lets a quiet step end run its instance ahead of the clock (`true`; [`Cluster::run`] does) or
    /// not (the default for a run stepped from outside, so that every instance is as of the clock
    /// between two calls): the outputs are the same either way. After a quiet step end, while the
    /// instance's step in flight ends no request (every request in it a decode-stretch member that
    /// does not finish with it) and ends before the next known arrival, timeout and control-plane
    /// decision (under P/D or autoscaling, before any other event: a hand-off or a tick may read
    /// the instance, a hand-off or a replica's change route to it, a transfer's end bring it a
    /// request), that step is completed and the next formed and priced at its end at once, without
    /// an event: nothing outside the instance can read or change it before then (a quiet step end
    /// already means no observer of steps; a concurrency gate holding requests holds arrivals
    /// already due, so that it stops every run ahead), and its queues' lengths, what a ranking
    /// reads, are read at the arrival as they are then. Not when completed requests may release
    /// others ([`crate::workload::Injector::may_release`]): those could arrive first; nor for a
    /// decode instance with requests waiting, whose steps may start KV pulls.
    pub fn step_ahead(&mut self, on: bool) {
        self.ahead = on;
    }

    /// How many steps quiet step ends ran ahead of the clock so far ([`Cluster::step_ahead`]).
    pub fn steps_run_ahead(&self) -> u64 {
        self.steps_ahead
    }

    /// Whether the run allows quiet step ends ([`Cluster::step_quietly`]).
    fn allows_quiet_steps(&self) -> bool {
        !self.report_steps && !self.tracing
    }

    /// Makes every instance let go of step finish times no live request names once `steps`
    /// are held (4,096 by default): the run is the same whatever it is.
    pub fn retire_steps_after(&mut self, steps: usize) {
        self.schedulers.retire_steps_after(steps);
    }

    /// Requests that ended so far, served or not.
    fn ended(&self) -> u64 {
        self.tally.ended()
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
        // A control plane waiting for room that a step may make is asked again at every
        // step end.
        let quiet = self.quiet
            && self.gateway.held.is_empty()
            && !(s.control.as_deref()).is_some_and(ControlPlane::waiting_on_steps);
        if quiet && self.quiet_step_end(t, s)? {
            self.quiet_steps += 1;
            self.settled = t;
            return Ok(Some(t));
        }
        while let Some(event) = self.queue.pop_until(t) {
            if self.warm {
                self.warm_next();
            }
            match event.kind {
                EventKind::StepEnd { instance } => self.on_step_end(instance, s)?,
                EventKind::TransferEnd { sender } => self.on_transfer_end(sender, s)?,
                EventKind::StageFree { instance } => self.mark_ready(instance),
                EventKind::Replica { instance, epoch } => self.on_replica(instance, epoch, s)?,
                EventKind::ScaleTick => self.on_scale_tick(s)?,
                EventKind::Arrival => self.on_arrivals(s)?,
                EventKind::Control => {
                    if self.control.wake == Some(t) {
                        self.control.wake = None;
                    }
                    self.drain_control(s)?;
                }
                EventKind::Timeout => self.on_timeouts(s)?,
            }
            self.apply_effects(s)?;
        }
        self.start_ready_instances(s)?;
        self.apply_effects(s)?;
        self.settled = t;
        Ok(Some(t))
    }

    /// Settles every instant up to and including `t`, and leaves the clock at `t` (the next
    /// instant is later). A `t` before the clock is refused ([`SimError::Backwards`]), the
    /// run unchanged.
    pub fn step_until(&mut self, t: Nanos, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        if t < self.now {
            return Err(SimError::Backwards { now: self.now, t });
        }
        while self.queue.next_time().is_some_and(|next| next <= t) {
            self.step(s)?;
        }
        self.now = t;
        Ok(())
    }

    /// Runs to completion and returns the outcome.
    pub fn run(mut self, mut s: Services<'_, '_>) -> Result<RunOutcome, SimError> {
        // Nobody looks between two instants: instances may run ahead of the clock.
        self.step_ahead(true);
        while self.step(&mut s)?.is_some() {}
        log::info!(
            "{} of {} step ends settled quietly, {} steps run ahead of the clock",
            self.quiet_steps,
            self.instances.iter().map(|i| i.steps).sum::<u64>(),
            self.steps_ahead
        );
        self.into_outcome()
    }

    /// The outcome of a run with nothing left to happen; an error if a request was lost. It
    /// takes the cluster, so that the instances' pooled inter-token gaps are moved into it,
    /// not copied.
    pub fn into_outcome(mut self) -> Result<RunOutcome, SimError> {
        let parked = self.control.parked();
        if !self.gateway.held.is_empty() || parked > 0 {
            return Err(SimError::Stranded {
                now: self.settled,
                held: self.gateway.held.len() + parked,
            });
        }
        let arrived = self.arrivals.known();
        if self.ended() != arrived {
            let message = format!(
                "{} of {arrived} requests finished, {} were rejected by the router, {} \
                 ended in the control plane and {} timed out",
                self.tally.finished, self.tally.rejected, self.tally.dropped, self.tally.timed_out
            );
            return Err(SchedulerBug::new(message).into());
        }
        let mut stats = SchedulerStats::default();
        for scheduler in self.schedulers.iter() {
            stats += scheduler.stats();
        }
        let mut itl = crate::metrics::IntegerCounts::default();
        self.schedulers
            .each_built_mut(|scheduler| scheduler.take_itl_counts(&mut itl));
        let mut itl_cells =
            vec![crate::metrics::IntegerCounts::default(); self.schedulers.itl_cells()];
        self.schedulers.each_built_mut(|core| {
            if let Some(vllm) = core.vllm_mut() {
                vllm.take_itl_cells(&mut itl_cells);
            }
        });
        Ok(RunOutcome {
            total_clocks_ns: self.settled,
            steps: self.instances.iter().map(|i| i.steps).sum(),
            finished: self.tally.finished,
            rejected: self.tally.rejected,
            dropped: self.tally.dropped,
            timed_out: self.tally.timed_out,
            autoscale: self.scaling.as_ref().map(|sc| sc.report(self.settled)),
            stats,
            hol_blocking: self.hol_blocking
                + self.transfers.as_ref().map_or(0, Transfers::hol_blocking),
            instances: self
                .instances
                .iter()
                .zip(self.schedulers.iter())
                .map(|(i, scheduler)| InstanceOutcome {
                    steps: i.steps,
                    dummy_steps: i.dummy_steps,
                    finished: i.finished,
                    stats: scheduler.stats(),
                })
                .collect(),
            itl,
            itl_cells,
            step_series: (self.instances.iter_mut())
                .filter_map(|i| i.series.take().map(|s| *s))
                .collect(),
        })
    }

    /// Warms the CPU cache for the step of the instance whose step ends next (see
    /// `scheduler/warm.rs`): its state beside its scheduler and what its scheduler touches
    /// first.
    fn warm_next(&self) {
        if let Some(j) = self.queue.next_step_end() {
            self.warm_instance(j);
        }
    }

    /// Warms the CPU cache for a step of instance `j`: its state beside its scheduler and
    /// what its scheduler touches first.
    fn warm_instance(&self, j: u32) {
        let j = j as usize;
        crate::scheduler::warm_value(&self.instances[j]);
        self.schedulers[j].warm();
    }

    /// Instance `id`'s DP group, if any. A run without DP groups does not look the
    /// instance's setup up (a division, and a cache line of the setup a step needs nothing
    /// else from).
    fn dp_group(&self, id: u32) -> Option<u32> {
        match self.groups.is_empty() {
            true => None,
            false => self.setups[id as usize].dp_group,
        }
    }

    /// Queues instance `id` for a scheduling attempt at the end of the current instant.
    fn mark_ready(&mut self, id: u32) {
        let inst = &mut self.instances[id as usize];
        if !inst.ready {
            inst.ready = true;
            self.ready.push(id);
        }
    }

    /// Something ended now: in concurrency mode, requests waiting for room enter.
    fn admit_gated(&mut self) {
        if self.arrivals.gated() && self.arrivals.has_waiting(self.now) {
            self.queue.push(self.now, EventKind::Arrival);
        }
    }
}
