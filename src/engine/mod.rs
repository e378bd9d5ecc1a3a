//! The discrete-event loop: one or more instances behind a router.
//!
//! A run ([`Run`]: requests, instances, disaggregation, concurrency gate) is a [`Cluster`],
//! a state machine that settles one instant per [`Cluster::step`] (or up to a time,
//! [`Cluster::step_until`], or to the end, [`Cluster::run`]; [`simulate`] is the one-call
//! entry), calling the run's [`Services`] (latency backends, router, observer, injector).
//!
//! Events live in one heap ordered by `(time ns, phase, instance, sequence number)`
//! ([`Phase`], the one statement of the same-instant order and of why it is so): the arrival
//! cursor (the next request's arrival) and, per instance, the end of its step in flight (each
//! instance runs at most one step at a time). At each instant `t`, taken from the earliest
//! event, the loop:
//! 1. Applies every step that finishes at `t`, in instance id order: first tokens, inter-token
//!    gaps and completions (which free their KV blocks). The instance becomes idle.
//! 2. Routes every request arriving at `t`, in arrival order (then file order; released
//!    requests after the initial ones of the same instant, in release order), against the
//!    instances' state at that moment (after step 1), and acts on the router's decision
//!    ([`crate::router::RouteDecision`]): queues it on the chosen instance, holds it at the
//!    gateway (asked about again, first, at every later instant at which a step or transfer
//!    ends), or rejects it (it ends there, reported to [`Observer::request_rejected`]).
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
//! With prefill/decode disaggregation ([`Run::disaggregated`], see [`Disaggregation`]),
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
//! released at run time, e.g. the next step of an agentic session; [`Services::with_injector`],
//! see `inject.rs`), whose requests join the arrivals still to come at their arrival time, after
//! the requests already pending for the same instant. Only a true completion counts: the last
//! token of a request on a colocated or decode instance (or a one-token request on a prefill
//! instance), never the hand-off at the end of a prefill. Released requests are checked and
//! routed like initial ones, under disaggregation too.
//!
//! With a control plane ([`Services::with_control`], see [`crate::control`]) an arriving
//! request is parked and handed to it instead of the router: admission, priority, the gateway
//! queue and the control-plane latencies decide when (and whether) it is routed. Its
//! decisions falling due at `t` are settled in their own phase, after the pipeline stages
//! freed and before the arrivals; a request it ends unserved goes to
//! [`Observer::request_dropped`]. The instances then order their waiting queues and pick
//! preemption victims by its policies ([`crate::scheduler::QueueOrder`]).
//!
//! Requests whose clients give them a timeout ([`Run::clients`], see `timeouts.rs`) end as
//! timed out when it runs out before they complete, wherever they are, reported to
//! [`Observer::request_dropped`]; a run without timeouts has no timers.
//!
//! The same-instant order is therefore, in full ([`Phase`]): step ends (by instance id; each
//! collects the requests its completions release and the hand-offs of its prefills), then KV
//! transfer ends (by sending instance), then pipeline stages freed, then the control plane's
//! decisions due, then arrivals (requests held at the gateway in the order they were held,
//! then initial requests in list order, then released ones in release order), then timeouts
//! (in the order the requests entered); then idle instances start steps, by instance id. Every tie is broken by a fixed rule, so a run is
//! deterministic.
//!
//! Most instants are one instance's step end and nothing else. When that step ends no request,
//! the instant's phases have nothing to do but start that instance's next step, so the loop
//! settles it quietly ([`Cluster::step_quietly`]): the instance forms and prices its next step
//! at once, and that step's end takes the place of the one applied in the event queue. Every
//! step is still formed, priced and completed one at a time (the latency backend, the host
//! model and ASTRA-Sim see each one); only runs in which something outside the instance hears
//! of every step or may act at any step end settle every instant phase by phase: an observer of
//! steps or decisions, a control plane waiting for room a step may make (by utilization) or
//! requests held at the gateway, and the steps of DP groups and pipelined instances. Under P/D,
//! a step end that hands a prefill off is applied phase by phase; one whose next step starts KV
//! pulls starts them as the closing phase would. Under autoscaling, so is a draining replica's
//! step end (it may let the replica go).
//!
//! A whole run ([`Cluster::run`]) goes one further ([`Cluster::step_ahead`]): after a quiet step
//! end, while the instance's step in flight ends no request (a decode stretch's, none of whose
//! members finishes with it) and ends before the next known arrival, it is completed and the next
//! one formed and priced at its end without an event, ahead of the clock (under P/D or autoscaling,
//! before any other event; not while requests wait for a decode instance's pulls). Nothing can read
//! or change the instance before that arrival, and what a ranking reads of it (its queues' lengths)
//! is read then, as it is then. Each step is still formed, priced (the backend sees the instance's
//! steps one at a time, in order) and completed; a step that ends a request is left to its instant,
//! so completions are heard of in time order. Not when finished requests may release others
//! (sessions): a released request could arrive first. A streamed workload's next known arrival is
//! its stream's head, drawn when the request before it entered (on two threads, waited for then as
//! on one): a run ahead never passes an arrival not drawn yet, and never waits for one.

pub mod cluster;
mod cores;
pub mod dp;
pub mod eligibility;
pub mod events;
mod hol;
mod inject;
mod instance;
pub mod pd;
pub mod pipeline;
mod signals;
mod tiers;
mod timeouts;

pub use crate::config::PdFlow;
pub use crate::observe::{StepEvent, TransferEvent};
pub use crate::workload::{Injector, NoInjection};
pub use cluster::{AnomalyWatch, Cluster, Run, Services};
pub use dp::WavePricer;
pub use events::{Event, EventKind, EventQueue, Phase};
pub use inject::ArrivalStream;
pub use pd::Disaggregation;
pub use pipeline::{Pipeline, stage_blocks};
pub use tiers::LowerTierSetup;

use crate::Nanos;
use crate::control::{Dropped, Stage};
use crate::latency::{LatencyBackend, LatencyError};
use crate::metrics::RequestRecord;
use crate::scheduler::sglang::SglangConfig;
use crate::scheduler::{SchedulerBug, SchedulerConfig, SchedulerStats};
use crate::workload::Request;
use instance::InstanceSim;

/// What a failed run's error is about, for callers that run many (a sweep records an
/// input or backend failure against its point and goes on; output failures and bugs are
/// worth stopping for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCause {
    /// The workload or configuration cannot be simulated as given.
    Input,
    /// The latency backend failed (e.g. ASTRA-Sim).
    Backend,
    /// Writing results failed.
    Output,
    /// An internal invariant broke: a bug of the simulator.
    Bug,
}

impl SimError {
    /// What the error is about.
    pub fn cause(&self) -> ErrorCause {
        match self {
            SimError::Unservable { .. }
            | SimError::ClockOverflow { .. }
            | SimError::Stranded { .. } => ErrorCause::Input,
            SimError::Latency(_) => ErrorCause::Backend,
            SimError::Output(_) => ErrorCause::Output,
            SimError::Bug(_) | SimError::Stuck { .. } | SimError::Backwards { .. } => {
                ErrorCause::Bug
            }
        }
    }
}

/// Runs `run` with `services` to completion: the one entry point ([`Cluster`] steps a run
/// instant by instant).
pub fn simulate(run: Run<'_>, services: Services<'_, '_>) -> Result<RunOutcome, SimError> {
    Cluster::new(run, &services)?.run(services)
}

pub(crate) use instance::clock_add;

/// What the engine needs to know about an instance beyond its scheduler.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceSetup {
    /// Model name, reported in the CSV; requests naming another model are not routed here.
    pub model_name: String,
    /// Longest sequence (prompt + output) the model accepts.
    pub max_model_len: u32,
    /// KV blocks of the instance.
    pub num_blocks: u32,
    /// Scheduler limits and switches (for an SGLang instance, the engine-neutral view of its
    /// settings, [`crate::scheduler::sglang::SglangConfig::view`]).
    pub scheduler: SchedulerConfig,
    /// SGLang's settings when the instance runs SGLang (`--engine sglang`); `None`: vLLM.
    pub sglang: Option<SglangConfig>,
    /// The lock-step data-parallel group of the instance (an index shared by its members),
    /// if any: the group's steps run as waves (see the module docs).
    pub dp_group: Option<u32>,
    /// The lower tier of the instance's prefix cache (`--prefix-storage`), if any.
    pub lower_tier: Option<LowerTierSetup>,
    /// Pipeline parallelism (`pp > 1`): the stages its steps run through, up to `pp` steps
    /// in flight (see `pipeline.rs`). `None`: one step at a time.
    pub pipeline: Option<Pipeline>,
}

/// The setups of a run's instances, by id: each of `templates` stands for `per` consecutive
/// instances (an autoscaled run's replica slots), held once.
#[derive(Debug, Clone, Copy)]
pub struct Setups<'r> {
    templates: &'r [InstanceSetup],
    per: usize,
}

impl<'r> Setups<'r> {
    /// `templates`, each the setup of `per` consecutive instances (`per` ≥ 1).
    pub fn replicated(templates: &'r [InstanceSetup], per: usize) -> Setups<'r> {
        assert!(per >= 1, "at least one instance per setup");
        Setups { templates, per }
    }

    /// How many instances there are.
    pub fn len(self) -> usize {
        self.templates.len() * self.per
    }

    /// Whether there is none.
    pub fn is_empty(self) -> bool {
        self.templates.is_empty()
    }

    /// Instance `id`'s setup.
    pub fn get(self, id: usize) -> &'r InstanceSetup {
        &self.templates[id / self.per]
    }

    /// The setups held, each that of [`Setups::per`] consecutive instances.
    pub fn templates(self) -> &'r [InstanceSetup] {
        self.templates
    }

    /// How many consecutive instances share each setup.
    pub fn per(self) -> usize {
        self.per
    }

    /// Every instance's setup, by id.
    pub fn iter(self) -> impl Iterator<Item = &'r InstanceSetup> + Clone {
        (self.templates.iter()).flat_map(move |s| std::iter::repeat_n(s, self.per))
    }
}

impl<'r> From<&'r [InstanceSetup]> for Setups<'r> {
    /// One instance per setup.
    fn from(setups: &'r [InstanceSetup]) -> Setups<'r> {
        Setups::replicated(setups, 1)
    }
}

impl std::ops::Index<usize> for Setups<'_> {
    type Output = InstanceSetup;

    fn index(&self, id: usize) -> &InstanceSetup {
        self.get(id)
    }
}

/// Receives the run's results as they happen: the engine queues them as effects and calls
/// the observer from one place once each event is settled, in the order they happened (see
/// `cluster/effects.rs`).
pub trait Observer {
    /// A request produced its last token.
    fn request_finished(&mut self, record: &RequestRecord<'_>) -> anyhow::Result<()>;

    /// A step finished (called after its requests are recorded); `backend` is the latency
    /// backend of the instance that ran it. Ignored unless implemented.
    fn step_finished(
        &mut self,
        _step: &StepEvent<'_>,
        _backend: &mut dyn LatencyBackend,
    ) -> anyhow::Result<()> {
        Ok(())
    }

    /// A KV transfer from a prefill to a decode instance started or arrived. Ignored unless
    /// implemented.
    fn kv_transfer(&mut self, _event: &TransferEvent) -> anyhow::Result<()> {
        Ok(())
    }

    /// How much of the run's decisions this observer traces: at
    /// [`crate::trace::TraceLevel::None`] (the default) the engine notes none and never calls
    /// [`Observer::decision`].
    fn trace_level(&self) -> crate::trace::TraceLevel {
        crate::trace::TraceLevel::None
    }

    /// A decision of the run, in the order the engine took it (see [`crate::trace`]).
    fn decision(&mut self, _decision: &crate::trace::Decision<'_>) -> anyhow::Result<()> {
        Ok(())
    }

    /// Whether this observer reads finished steps ([`Observer::step_finished`]); when not,
    /// the engine neither builds their reports nor calls it. Read once, at start-up.
    fn wants_steps(&self) -> bool {
        true
    }

    /// The interval at which the observer wants each instance's steps tallied
    /// ([`RunOutcome::step_series`]: a time series), which needs no step reported; none by
    /// default. Read once, at start-up.
    fn tallies_steps_every(&self) -> Option<Nanos> {
        None
    }

    /// Whether the records of finished requests must list their inter-token latencies
    /// ([`RequestRecord::itl_ns`]); when not, they are left empty, and the run's pooled gaps
    /// are in [`RunOutcome::itl`] all the same. Read once, at start-up.
    fn wants_itl_values(&self) -> bool {
        true
    }

    /// The classes and tenants by which the run pools the gaps of finished requests per
    /// step as well ([`RunOutcome::itl_cells`]), when the observer takes its per-group gaps
    /// from there; none by default. Read once, at start-up.
    fn pools_itl_by(&self) -> Option<std::rc::Rc<crate::workload::RequestClasses>> {
        None
    }

    /// The router rejected `request` at `now` (its end: it is never served). Ignored unless
    /// implemented.
    fn request_rejected(&mut self, _request: &Request, _now: Nanos) -> anyhow::Result<()> {
        Ok(())
    }

    /// `request` ended at `now` without being served, for the reason `why` (rejected,
    /// shed or expired; the stage and the policy): its end. Every request ends exactly once,
    /// here or in [`Observer::request_finished`]. By default a rejection by the router is
    /// passed on to [`Observer::request_rejected`] and anything else is ignored.
    fn request_dropped(
        &mut self,
        request: &Request,
        now: Nanos,
        why: Dropped,
    ) -> anyhow::Result<()> {
        if why.stage == Stage::Routing {
            self.request_rejected(request, now)?;
        }
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
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// Simulated time when the last request finished.
    pub total_clocks_ns: Nanos,
    /// Steps executed, over all instances.
    pub steps: u64,
    /// Requests finished, over all instances.
    pub finished: u64,
    /// Requests the router rejected.
    pub rejected: u64,
    /// Requests the control plane ended unserved (rejected, shed, expired), and those an
    /// `immediate` drain dropped.
    pub dropped: u64,
    /// Requests whose own timeout ran out before they completed.
    pub timed_out: u64,
    /// The autoscaling of the run, when on.
    pub autoscale: Option<crate::autoscale::AutoscaleReport>,
    /// Scheduler counters summed over all instances.
    pub stats: SchedulerStats,
    /// Requests the router queued behind others while a candidate had nobody waiting and
    /// room (counted when [`Run::watch`] is set).
    pub hol_blocking: u64,
    /// Per instance, by id.
    pub instances: Vec<InstanceOutcome>,
    /// Every inter-token gap of every finished request, pooled (whether or not the records
    /// listed them, [`Observer::wants_itl_values`]).
    pub itl: crate::metrics::IntegerCounts,
    /// The same per pair of SLO class and tenant of [`Observer::pools_itl_by`]
    /// ([`crate::workload::RequestClasses::cell_of`]); empty unless asked for.
    pub itl_cells: Vec<crate::metrics::IntegerCounts>,
    /// Each instance's steps per interval ([`Observer::tallies_steps_every`]), by id; empty
    /// unless asked for.
    pub step_series: Vec<crate::metrics::StepSeries>,
}

impl RunOutcome {
    /// The anomaly counters of the run (zero unless it watched for them, [`Run::watch`]).
    pub fn anomalies(&self) -> crate::metrics::AnomalyCounts {
        crate::metrics::AnomalyCounts {
            priority_inversions: self.stats.priority_inversions,
            hol_blocking: self.hol_blocking,
            kv_thrashing: self.stats.kv_thrash_blocks,
            scale_oscillations: self.autoscale.as_ref().map_or(0, |a| a.counts.oscillations),
        }
    }
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
    /// The router still held requests at the gateway when nothing was left in flight to
    /// make room.
    #[error(
        "at {now} ns the router still held {held} requests at the gateway with nothing left \
         in flight: they can never be served"
    )]
    Stranded { now: Nanos, held: usize },
    /// Writing results failed.
    #[error(transparent)]
    Output(#[from] anyhow::Error),
    /// A caller asked the run to step to a time before its clock
    /// ([`Cluster::step_until`]): time never goes back.
    #[error("cannot step back to {t} ns: the clock is at {now} ns")]
    Backwards { now: Nanos, t: Nanos },
}
