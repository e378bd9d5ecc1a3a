//! The autoscaler in the loop (`crate::autoscale`): its periodic tick and the lifecycle
//! events of its replicas (phase [`super::super::Phase::Scaling`]), routing to ready replicas
//! only, and draining replicas by the drain mode, every request still ending exactly once.

use super::super::SimError;
use super::super::eligibility::Groups;
use super::super::pd::DecodeChoice;
use super::super::signals::Side;
use super::effects::Effect;
use super::endings::Ending;
use super::{Cluster, Services};
use crate::Nanos;
use crate::autoscale::{
    AutoscalePolicy, AutoscaleReport, Autoscaler, Change, DrainMode, ReplicaState, ScaleNote,
};
use crate::config::InstanceRole;
use crate::engine::EventKind;
use crate::metrics::RequestRecord;
use crate::router::Signal;
use crate::scheduler::{Evicted, SchedulerBug};
use crate::trace::Decision;
use crate::workload::Request;
use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};

/// The autoscaler of a run and the engine's scratch for it.
pub(super) struct Scaling<'r> {
    autoscaler: Autoscaler,
    /// The candidates of the request being routed that are ready (reused).
    routable: Vec<u32>,
    changes: Vec<Change>,
    evicted: Vec<Evicted>,
    /// With `redirect` drains: every request on an instance, by id, with its candidate
    /// lists and priority, to hand it back to the router.
    on_instances: HashMap<u64, (Cow<'r, Request>, Groups, i32)>,
    /// Whether ticks that would change nothing are skipped (on unless turned off, to
    /// compare with every tick evaluated).
    pub(super) skip_idle: bool,
    /// How many ticks the autoscaler evaluated.
    pub(super) evaluated: u64,
}

impl<'r> Scaling<'r> {
    /// Whether replica `id` is draining.
    pub(super) fn draining(&self, id: u32) -> bool {
        self.autoscaler.state(id) == ReplicaState::Draining
    }

    /// Whether the requests on the instances are kept (to hand them back).
    pub(super) fn keeps_requests(&self) -> bool {
        self.autoscaler.config().drain == DrainMode::Redirect
    }

    /// Request `id` ended.
    pub(super) fn forget(&mut self, id: u64) {
        if self.keeps_requests() {
            self.on_instances.remove(&id);
        }
    }

    /// The request of `record` finished on instance `id` (the `slo` policy's attainment
    /// window notes it).
    pub(super) fn request_finished(&mut self, id: u32, record: &RequestRecord<'_>) {
        self.autoscaler.request_finished(id, record);
    }

    /// A request was queued on an instance: it is counted, and kept (`keep`) when drains
    /// may hand it back.
    pub(super) fn routed(
        &mut self,
        request: impl FnOnce() -> Cow<'r, Request>,
        keep: (Groups, i32),
    ) {
        self.autoscaler.request_arrived();
        if self.keeps_requests() {
            let request = request();
            self.on_instances
                .insert(request.id, (request, keep.0, keep.1));
        }
    }

    /// The ready instances among `candidates` (ascending, as given): the ready replicas
    /// looked up in the candidates when they are fewer, so that a decision costs the
    /// replicas on, not every slot.
    pub(super) fn routable(&mut self, candidates: &[u32]) -> &[u32] {
        self.routable.clear();
        let a = &self.autoscaler;
        if a.num_ready() < candidates.len() {
            let ready = a.ready().filter(|id| candidates.binary_search(id).is_ok());
            self.routable.extend(ready);
        } else {
            let ready = candidates.iter().copied().filter(|&i| a.is_ready(i));
            self.routable.extend(ready);
        }
        &self.routable
    }

    /// The autoscaler of the run.
    pub(super) fn autoscaler(&self) -> &Autoscaler {
        &self.autoscaler
    }

    /// The autoscaling report of a run ended at `now`.
    pub(super) fn report(&self, now: Nanos) -> AutoscaleReport {
        self.autoscaler.report(now)
    }
}

/// The signals the autoscaler's policies observe (`crate::autoscale::Observation`): the
/// queue (held hand-offs included), the running requests and the KV cache in use; the `slo`
/// policy also the recent TTFT and TPOT.
const OBSERVED: [Signal; 3] = [Signal::Queue, Signal::Running, Signal::Kv];
const OBSERVED_SLO: [Signal; 5] = [
    Signal::Queue,
    Signal::Running,
    Signal::Kv,
    Signal::Ttft,
    Signal::Tpot,
];

/// What an evicted request was, as the observer is told of its end.
fn request_of(e: &Evicted) -> Request {
    Request {
        id: e.id,
        line: 0,
        model: None,
        arrival_ns: e.arrival_ns,
        input_toks: e.input_toks,
        output_toks: e.output_toks,
        token_ids: Vec::new(),
        prompt_blocks: None,
        known_hashes: None,
    }
}

impl<'r> Cluster<'r> {
    /// Hands the run to `autoscaler` (its replica slots are the instances) and schedules
    /// its first tick. Refused for DP groups (checked by the caller too).
    pub(super) fn start_scaling(&mut self, mut autoscaler: Autoscaler) -> Result<(), SimError> {
        if !self.groups.is_empty() {
            let message = "autoscaling runs instances outside DP groups".to_owned();
            return Err(SchedulerBug::new(message).into());
        }
        self.feed_decode_pools(&mut autoscaler);
        if self.tracing {
            autoscaler.trace_decisions();
        }
        // Slots never provisioned hold nothing and never change: the signals and the idle
        // check visit only the slots provisioned so far.
        self.signals.only_active(autoscaler.on());
        let interval = autoscaler.config().interval_ns;
        self.scaling = Some(Scaling {
            autoscaler,
            routable: Vec::with_capacity(self.setups.len()),
            changes: Vec::new(),
            evicted: Vec::new(),
            on_instances: HashMap::new(),
            skip_idle: true,
            evaluated: 0,
        });
        self.queue.push(interval, EventKind::ScaleTick);
        Ok(())
    }

    /// Tells `autoscaler` which prefill instances hand off to each decode pool (those of the
    /// models of its replicas), so that hand-offs held for want of a ready one count as its
    /// demand. One pass over the slots: the prefill slots grouped by model, the decode slots
    /// by pool and model (a slot's pool and model never change).
    fn feed_decode_pools(&self, autoscaler: &mut Autoscaler) {
        let Some(t) = &self.transfers else {
            return;
        };
        let mut prefills: HashMap<&str, Vec<u32>> = HashMap::new();
        let mut decode_pools: BTreeSet<(u32, &str)> = BTreeSet::new();
        for (id, setup) in (0u32..).zip(self.setups.iter()) {
            let model = setup.model_name.as_str();
            match t.role(id) {
                InstanceRole::Prefill => prefills.entry(model).or_default().push(id),
                InstanceRole::Decode => {
                    decode_pools.insert((autoscaler.pool_of(id), model));
                }
                InstanceRole::Colocated => {}
            }
        }
        for (pool, model) in decode_pools {
            if let Some(sources) = prefills.get(model) {
                autoscaler.takes_handoffs_from(pool, sources);
            }
        }
    }

    /// In an autoscaled run, makes the control plane's serving instances the ready replicas.
    pub(super) fn refresh_serving(&mut self) {
        if let Some(scaling) = &self.scaling {
            let a = &scaling.autoscaler;
            let serving = &mut self.control.serving;
            serving.clear();
            serving.extend(a.ready());
        }
    }

    /// Replica `id`'s state, when the run is autoscaled.
    pub fn replica_state(&self, id: u32) -> Option<ReplicaState> {
        self.scaling.as_ref().map(|s| s.autoscaler.state(id))
    }

    /// Whether every request of the run has ended and none can still come.
    pub(super) fn work_done(&self) -> bool {
        self.arrivals.exhausted()
            && self.gateway.held.is_empty()
            && self.control.parked() == 0
            && self.ended() == self.arrivals.known()
    }

    /// The autoscaler's tick: every template's policy decides on the instances as the
    /// run's signals show them; the next tick is scheduled while work remains.
    pub(super) fn on_scale_tick(&mut self, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        if self.work_done() {
            return Ok(());
        }
        let (schedulers, instances) = (&mut self.schedulers, &self.instances);
        self.signals.refresh_due(self.now, schedulers, instances);
        let Some(scaling) = &mut self.scaling else {
            return Ok(());
        };
        scaling.evaluated += 1;
        let view = (self.signals).view(Side::Arrival, &self.schedulers, &self.instances);
        scaling.changes.clear();
        scaling
            .autoscaler
            .tick(self.now, &view, &mut scaling.changes);
        self.trace_scaling();
        let Some(scaling) = &mut self.scaling else {
            return Ok(());
        };
        let interval = scaling.autoscaler.config().interval_ns;
        let skipped = self.idle_ticks(interval);
        if skipped > 0 {
            self.skip_ticks(interval, skipped);
        }
        let next = self
            .now
            .saturating_add(interval.saturating_mul(skipped + 1));
        self.queue.push(next, EventKind::ScaleTick);
        self.apply_changes(s)
    }

    /// How many of the next ticks (every `interval` from now) would change nothing and can
    /// be skipped: those before the next pending event, when the autoscaler is steady, the
    /// instances hold no work (nothing steps, nothing waits, no KV in transit), nothing waits
    /// at the gateway or the control plane, and the signals they observe are current. Until that
    /// event nothing moves, so each of those ticks would see what this one saw.
    fn idle_ticks(&self, interval: Nanos) -> u64 {
        let (Some(scaling), Some(event)) = (&self.scaling, self.queue.next_time()) else {
            return 0;
        };
        if !scaling.skip_idle || event <= self.now || interval == 0 || !scaling.autoscaler.steady()
        {
            return 0;
        }
        let idle = self.signals.active().all(|i| {
            let (inst, s) = (&self.instances[i], &self.schedulers[i]);
            !inst.busy
                && inst.stages.as_ref().is_none_or(|st| st.in_flight() == 0)
                && !s.has_work()
                && !s.awaits_kv()
                && s.num_incoming() == 0
        });
        let slo = matches!(scaling.autoscaler.config().policy, AutoscalePolicy::Slo(_));
        let observed: &[Signal] = if slo { &OBSERVED_SLO } else { &OBSERVED };
        let quiet = idle
            && self.ready.is_empty()
            && self.gateway.held.is_empty()
            && self.control.parked() == 0
            && self
                .signals
                .settled(observed, self.now, &self.schedulers, &self.instances);
        if !quiet {
            return 0;
        }
        // Ticks strictly before the event: at (now, event).
        (event - self.now - 1) / interval
    }

    /// Skips the next `count` ticks (every `interval` from now): the autoscaler records them
    /// as repeats of this one and the router's view is read as they would have read it.
    fn skip_ticks(&mut self, interval: Nanos, count: u64) {
        let now = self.now;
        let times = (1..=count).map(move |j| now.saturating_add(interval.saturating_mul(j)));
        self.signals
            .refresh_idle(times, &mut self.schedulers, &self.instances);
        if let Some(scaling) = &mut self.scaling {
            scaling.autoscaler.repeat_last_tick(interval, count);
        }
    }

    /// Schedules the lifecycle events and starts the drains the autoscaler ordered.
    fn apply_changes(&mut self, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        let Some(scaling) = &mut self.scaling else {
            return Ok(());
        };
        let changes = std::mem::take(&mut scaling.changes);
        for change in &changes {
            match *change {
                Change::Due {
                    instance,
                    at,
                    epoch,
                } => {
                    self.signals.activate(instance);
                    self.queue.push(at, EventKind::Replica { instance, epoch });
                }
                Change::Drain { instance } => self.begin_drain(instance, s)?,
            }
        }
        if let Some(scaling) = &mut self.scaling {
            scaling.changes = changes;
        }
        Ok(())
    }

    /// Replica `id`'s lifecycle stage of `epoch` ends now.
    pub(super) fn on_replica(
        &mut self,
        id: u32,
        epoch: u32,
        s: &mut Services<'_, '_>,
    ) -> Result<(), SimError> {
        let Some(scaling) = &mut self.scaling else {
            return Ok(());
        };
        let advanced = scaling.autoscaler.advance(id, epoch, self.now);
        self.trace_scaling();
        match advanced {
            None => {}
            Some(Some(next)) => self.queue.push(
                next,
                EventKind::Replica {
                    instance: id,
                    epoch,
                },
            ),
            // Ready: requests held for want of a ready replica are asked about again, and
            // hand-offs held for want of a ready decode replica are sent.
            Some(None) => {
                self.ask_gateway_again(s);
                self.send_held_handoffs()?;
            }
        }
        Ok(())
    }

    /// Sends the hand-offs that waited for a ready decode replica and can go now.
    fn send_held_handoffs(&mut self) -> Result<(), SimError> {
        let (Some(t), Some(scaling)) = (&mut self.transfers, &self.scaling) else {
            return Ok(());
        };
        let choice = DecodeChoice {
            eligibility: &self.eligibility,
            signals: &mut self.signals,
            instances: &self.instances,
            autoscaler: Some(scaling.autoscaler()),
        };
        t.send_held(self.now, &mut self.schedulers, choice, &mut self.effects)?;
        self.wake_receivers();
        Ok(())
    }

    /// Replica `id` starts draining: with `redirect`, its waiting requests that have not
    /// started go back to the router now.
    fn begin_drain(&mut self, id: u32, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        let Some(scaling) = &mut self.scaling else {
            return Ok(());
        };
        if scaling.keeps_requests() {
            scaling.evicted.clear();
            self.schedulers[id as usize].evict(false, &mut scaling.evicted);
            let n = scaling.evicted.len();
            scaling.autoscaler.redirected(n as u64);
            for k in 0..n {
                let Some(scaling) = &mut self.scaling else {
                    break;
                };
                let rid = scaling.evicted[k].id;
                let Some((request, groups, priority)) = scaling.on_instances.remove(&rid) else {
                    let message = format!("request {rid} redirected from instance {id} is unknown");
                    return Err(SchedulerBug::new(message).into());
                };
                self.dispatch(request, groups, priority, s)?;
            }
        }
        self.settle_drain(id, s)
    }

    /// If replica `id` is draining and has no step in flight: an `immediate` drain drops
    /// what it still has; it is off once it has nothing left, no KV still to send (prefill)
    /// and none on its way to it (decode).
    pub(super) fn settle_drain(
        &mut self,
        id: u32,
        s: &mut Services<'_, '_>,
    ) -> Result<(), SimError> {
        let i = id as usize;
        let Some(scaling) = &mut self.scaling else {
            return Ok(());
        };
        if !scaling.draining(id) {
            return Ok(());
        }
        let inst = &self.instances[i];
        if inst.busy || inst.stages.as_ref().is_some_and(|st| st.in_flight() > 0) {
            return Ok(());
        }
        if scaling.autoscaler.config().drain == DrainMode::Immediate {
            let mut evicted = std::mem::take(&mut scaling.evicted);
            evicted.clear();
            self.schedulers[i].evict(true, &mut evicted);
            scaling.autoscaler.dropped_on_drain(evicted.len() as u64);
            for e in &evicted {
                let kept = self
                    .scaling
                    .as_mut()
                    .and_then(|sc| sc.on_instances.remove(&e.id));
                let request = kept.map_or_else(|| Cow::Owned(request_of(e)), |(r, _, _)| r);
                self.end(Ending::Drained(request), s)?;
            }
            if let Some(scaling) = &mut self.scaling {
                scaling.evicted = evicted;
            }
        }
        // KV still leaving (prefill) or still coming (decode) keeps the replica on.
        let scheduler = &self.schedulers[i];
        if !scheduler.has_work()
            && scheduler.num_handed_off() == 0
            && scheduler.num_incoming() == 0
            && let Some(scaling) = &mut self.scaling
        {
            scaling.autoscaler.retire(id, self.now);
            self.trace_scaling();
        }
        Ok(())
    }

    /// Queues the autoscaler's actions and replica changes noted since the last call as
    /// trace records (nothing is noted unless the run traces).
    fn trace_scaling(&mut self) {
        let Some(scaling) = &mut self.scaling else {
            return;
        };
        for note in scaling.autoscaler.take_notes() {
            let decision = match note {
                ScaleNote::Action(action) => Decision::Scale(action),
                ScaleNote::Replica {
                    t,
                    instance,
                    from,
                    to,
                } => Decision::Replica {
                    t,
                    instance,
                    from,
                    to,
                },
            };
            self.effects.push(Effect::Decision(decision));
        }
    }
}
