//! The replicas of an autoscaled run and their lives: [`Autoscaler`] owns every replica
//! slot's [`ReplicaState`], evaluates the policy of each template at every tick, applies the
//! bounds, stabilization windows and cooldown, counts actions and oscillations, and accounts
//! the time every replica spends in every state.

use super::config::{AutoscaleConfig, AutoscalePolicy, SloParams};
use super::notes::{ScaleAction, ScaleNote};
use super::policy::{Observation, Policy};
use super::report::{AutoscaleReport, PoolCost, ScaleSample, StateChange};
use crate::Nanos;
use crate::choice::Choice;
use crate::metrics::RequestRecord;
use crate::router::ClusterView;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use std::collections::VecDeque;

/// Where a replica slot is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ReplicaState {
    /// Not provisioned: no GPU held, nothing billed.
    Off,
    /// Asked for, waiting for its machine (the provisioning delay).
    Pending,
    /// Reading its weights (weight bytes per GPU / the load bandwidth).
    Loading,
    /// Capturing CUDA graphs and compiling (the warm-up).
    WarmingUp,
    /// Serving: the router may send it requests.
    Ready,
    /// Leaving: no new requests; its work is finished, handed back or dropped by the drain
    /// mode.
    Draining,
}

impl ReplicaState {
    /// Every state, in life order.
    pub const ALL: [ReplicaState; 6] = [
        ReplicaState::Off,
        ReplicaState::Pending,
        ReplicaState::Loading,
        ReplicaState::WarmingUp,
        ReplicaState::Ready,
        ReplicaState::Draining,
    ];

    /// Position in [`ReplicaState::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Name, as reported.
    pub fn name(self) -> &'static str {
        match self {
            ReplicaState::Off => "off",
            ReplicaState::Pending => "pending",
            ReplicaState::Loading => "loading",
            ReplicaState::WarmingUp => "warming_up",
            ReplicaState::Ready => "ready",
            ReplicaState::Draining => "draining",
        }
    }

    /// Whether the replica is on its way up.
    fn starting(self) -> bool {
        matches!(
            self,
            ReplicaState::Pending | ReplicaState::Loading | ReplicaState::WarmingUp
        )
    }
}

/// What the autoscaler needs to know of one replica slot.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaTemplate {
    /// The template (pool) it belongs to: an index into the pool names.
    pub pool: u32,
    /// GPUs it holds.
    pub gpus: u32,
    /// Price of one of its GPU-hours.
    pub price_per_gpu_hour: f64,
    /// Time to load its weights.
    pub load_ns: Nanos,
}

/// What a tick or a lifecycle event asks the engine to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Call [`Autoscaler::advance`] for `instance` with `epoch` at `at`.
    Due {
        instance: u32,
        at: Nanos,
        epoch: u32,
    },
    /// `instance` starts draining: it takes no new request; the engine settles its work by
    /// the drain mode and calls [`Autoscaler::retire`] when it is empty.
    Drain { instance: u32 },
}

#[derive(Debug, Clone, Copy)]
struct Replica {
    state: ReplicaState,
    since: Nanos,
    /// Bumped at every start and cancel: a lifecycle event of an older epoch is stale.
    epoch: u32,
    pool: u32,
    /// Whether it was ever on (ready at the start, or provisioned since): a slot never on
    /// has held nothing.
    ever_on: bool,
}

/// One template's replicas and its policy.
#[derive(Debug)]
struct Pool {
    name: String,
    members: Vec<u32>,
    policy: Policy,
    /// Recent recommendations `(tick, replicas)`, oldest first.
    recommendations: VecDeque<(Nanos, u32)>,
    /// The last action: when, and whether it was up.
    last: Option<(Nanos, bool)>,
    /// Whether the policy wanted, at the last tick, the replicas the pool had.
    content: bool,
    /// What the policy wanted at the last tick, within the bounds.
    desired: u32,
    cost: PoolCost,
    /// For a decode pool: the prefill instances whose hand-offs it takes, ascending; those
    /// held there for want of a ready replica are demand for it.
    handoff_sources: Vec<u32>,
    /// Under an `slo` policy with an attainment window: the requests finished on the pool's
    /// replicas, `(end, met every target)`, oldest first, and how many of them met.
    window: VecDeque<(Nanos, bool)>,
    window_met: u32,
}

/// Counters of a run's scaling.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScaleCounts {
    /// Scaling actions up and down (one action may add or remove several replicas).
    pub scale_ups: u64,
    pub scale_downs: u64,
    /// Replicas asked for and replicas removed (cancelled or drained).
    pub replicas_added: u64,
    pub replicas_removed: u64,
    /// Actions opposite to the template's previous one within the oscillation window.
    pub oscillations: u64,
    /// Requests dropped by `immediate` drains and handed back by `redirect` drains.
    pub dropped_on_drain: u64,
    pub redirected: u64,
}

/// The autoscaler of a run: the replica slots' states, the pools' policies, the counters.
///
/// A tick, a routing decision and a scale-down cost the replicas that are on (not
/// [`ReplicaState::Off`]), not the slots: the slots on are kept in a list of their own, and
/// the count of slots in each state is kept as states change.
#[derive(Debug)]
pub struct Autoscaler {
    config: AutoscaleConfig,
    replicas: Vec<Replica>,
    /// The slots not off, ascending.
    on: Vec<u32>,
    /// The slots ever on, in the order they first were.
    ever_on: Vec<u32>,
    /// Slots in each state, by [`ReplicaState::index`].
    in_state: [u32; 6],
    pools: Vec<Pool>,
    rng: ChaCha8Rng,
    counts: ScaleCounts,
    series: Vec<ScaleSample>,
    /// Every slot's state at time 0, and every change of state since, in time order.
    initial: Vec<ReplicaState>,
    state_changes: Vec<StateChange>,
    /// Requests routed since the last tick.
    arrivals: u64,
    last_tick: Nanos,
    /// The decisions since the last [`Autoscaler::take_notes`], when they are traced.
    notes: Option<Vec<ScaleNote>>,
}

impl Autoscaler {
    /// The autoscaler of slots `templates` (by instance id; each names its pool in
    /// `pool_names`): `initial_replicas` slots of each pool ready at time 0, the rest off.
    /// Provisioning delays are drawn from a ChaCha8 stream of `seed` of their own.
    pub fn new(
        config: AutoscaleConfig,
        templates: &[ReplicaTemplate],
        pool_names: Vec<String>,
        seed: u64,
    ) -> Autoscaler {
        let mut pools: Vec<Pool> = pool_names
            .into_iter()
            .map(|name| Pool {
                name,
                members: Vec::new(),
                policy: Policy::new(config.policy.clone()),
                recommendations: VecDeque::new(),
                last: None,
                content: false,
                desired: 0,
                cost: PoolCost::default(),
                handoff_sources: Vec::new(),
                window: VecDeque::new(),
                window_met: 0,
            })
            .collect();
        let mut replicas = Vec::with_capacity(templates.len());
        for (id, t) in templates.iter().enumerate() {
            let pool = &mut pools[t.pool as usize];
            let state = if (pool.members.len() as u32) < config.initial_replicas {
                ReplicaState::Ready
            } else {
                ReplicaState::Off
            };
            pool.members.push(id as u32);
            pool.cost.name.clone_from(&pool.name);
            pool.cost.gpus = t.gpus;
            pool.cost.price_per_gpu_hour = t.price_per_gpu_hour;
            pool.cost.load_ns = t.load_ns;
            replicas.push(Replica {
                state,
                since: 0,
                epoch: 0,
                pool: t.pool,
                ever_on: state != ReplicaState::Off,
            });
        }
        let stream = xxhash_rust::xxh3::xxh3_64_with_seed(b"autoscale-provisioning", seed);
        let initial: Vec<ReplicaState> = replicas.iter().map(|r| r.state).collect();
        let mut in_state = [0u32; 6];
        for state in &initial {
            in_state[state.index()] += 1;
        }
        let on: Vec<u32> = (0..replicas.len() as u32)
            .filter(|&id| initial[id as usize] != ReplicaState::Off)
            .collect();
        Autoscaler {
            config,
            replicas,
            ever_on: on.clone(),
            on,
            in_state,
            pools,
            rng: ChaCha8Rng::seed_from_u64(stream),
            counts: ScaleCounts::default(),
            series: Vec::new(),
            initial,
            state_changes: Vec::new(),
            arrivals: 0,
            last_tick: 0,
            notes: None,
        }
    }

    /// Turns the noting of scaling actions and replica state changes on, for the trace.
    pub fn trace_decisions(&mut self) {
        self.notes = Some(Vec::new());
    }

    /// The actions and state changes noted since the last call, in the order they happened
    /// (empty unless [`Autoscaler::trace_decisions`]).
    pub fn take_notes(&mut self) -> impl Iterator<Item = ScaleNote> + '_ {
        self.notes.iter_mut().flat_map(|n| n.drain(..))
    }

    /// The configuration.
    pub fn config(&self) -> &AutoscaleConfig {
        &self.config
    }

    /// Replica `id`'s state.
    pub fn state(&self, id: u32) -> ReplicaState {
        self.replicas[id as usize].state
    }

    /// The pool (template) replica `id` belongs to.
    pub fn pool_of(&self, id: u32) -> u32 {
        self.replicas[id as usize].pool
    }

    /// The replicas of pool `pool` (decode) take the hand-offs of the prefill instances
    /// `prefills`: those held there for want of a ready decode replica count as its demand.
    pub fn takes_handoffs_from(&mut self, pool: u32, prefills: &[u32]) {
        let sources = &mut self.pools[pool as usize].handoff_sources;
        sources.extend_from_slice(prefills);
        sources.sort_unstable();
        sources.dedup();
    }

    /// Whether the router may send replica `id` requests.
    pub fn is_ready(&self, id: u32) -> bool {
        self.state(id) == ReplicaState::Ready
    }

    /// The slots that are not off, ascending.
    pub fn on(&self) -> &[u32] {
        &self.on
    }

    /// The ready replicas, ascending.
    pub fn ready(&self) -> impl Iterator<Item = u32> + '_ {
        self.on.iter().copied().filter(|&id| self.is_ready(id))
    }

    /// How many replicas are ready.
    pub fn num_ready(&self) -> usize {
        self.in_state[ReplicaState::Ready.index()] as usize
    }

    /// The counters so far.
    pub fn counts(&self) -> ScaleCounts {
        self.counts
    }

    /// A request was routed (for the load column of the time series).
    pub fn request_arrived(&mut self) {
        self.arrivals += 1;
    }

    /// `n` requests were dropped by an `immediate` drain.
    pub fn dropped_on_drain(&mut self, n: u64) {
        self.counts.dropped_on_drain += n;
    }

    /// `n` requests were handed back to the router by a `redirect` drain.
    pub fn redirected(&mut self, n: u64) {
        self.counts.redirected += n;
    }

    /// Moves replica `id` to `state` at `now`, accounting the time spent in the old one.
    fn set_state(&mut self, id: u32, state: ReplicaState, now: Nanos) {
        let r = &mut self.replicas[id as usize];
        let spent = u128::from(now - r.since);
        self.pools[r.pool as usize].cost.replica_ns[r.state.index()] += spent;
        if let Some(notes) = &mut self.notes {
            notes.push(ScaleNote::Replica {
                t: now,
                instance: id,
                from: r.state,
                to: state,
            });
        }
        self.in_state[r.state.index()] -= 1;
        self.in_state[state.index()] += 1;
        match (r.state == ReplicaState::Off, state == ReplicaState::Off) {
            (true, false) => {
                let at = self.on.partition_point(|&on| on < id);
                self.on.insert(at, id);
                if !r.ever_on {
                    r.ever_on = true;
                    self.ever_on.push(id);
                }
            }
            (false, true) => {
                let at = self.on.partition_point(|&on| on < id);
                self.on.remove(at);
            }
            _ => {}
        }
        r.state = state;
        r.since = now;
        self.state_changes.push(StateChange {
            t_ns: now,
            instance: id,
            state,
        });
    }

    /// The request of `record` finished on instance `id`: under an `slo` policy with an
    /// attainment window, its pool notes when and whether it met every target (TTFT from its
    /// arrival to its first token; TPOT over its tokens after the first, when it has them).
    pub fn request_finished(&mut self, id: u32, record: &RequestRecord<'_>) {
        let AutoscalePolicy::Slo(p) = &self.config.policy else {
            return;
        };
        let Some(replica) = self.replicas.get(id as usize) else {
            return;
        };
        if p.window_ms <= 0.0 {
            return;
        }
        let met = meets_targets(p, record);
        let pool = &mut self.pools[replica.pool as usize];
        pool.window.push_back((record.end_ns, met));
        pool.window_met += u32::from(met);
    }

    /// Drops from pool `p`'s attainment window the requests finished `window_ms` or more
    /// before `now`.
    fn slide_window(&mut self, p: usize, now: Nanos) {
        let AutoscalePolicy::Slo(params) = &self.config.policy else {
            return;
        };
        let width = (params.window_ms * 1e6).round() as Nanos;
        let pool = &mut self.pools[p];
        while let Some(&(end, met)) = pool.window.front() {
            if now.saturating_sub(end) < width {
                break;
            }
            pool.window.pop_front();
            pool.window_met -= u32::from(met);
        }
    }

    /// The tick at `now`: every pool's policy decides on what `view` shows of its ready
    /// replicas; the starts and drains it orders are appended to `changes`.
    pub fn tick(&mut self, now: Nanos, view: &dyn ClusterView, changes: &mut Vec<Change>) {
        for p in 0..self.pools.len() {
            self.slide_window(p, now);
            let observation = self.observe(p, view);
            let target = self.target(p, now, &observation);
            let current = observation.current();
            let before = (self.counts, self.notes.as_ref().map_or(0, Vec::len));
            if target > current {
                self.scale_up(p, target - current, now, changes);
            } else if target < current {
                self.scale_down(p, current - target, now, changes);
            }
            self.note_action(p, now, before, &observation);
        }
        self.sample(now, view);
    }

    /// Notes pool `p`'s action at `now`, if it took one since the counts and notes were
    /// `before`: ahead of the replica changes it made.
    fn note_action(&mut self, p: usize, now: Nanos, before: (ScaleCounts, usize), o: &Observation) {
        let (before, at) = before;
        let Some(notes) = &mut self.notes else { return };
        let added = self.counts.replicas_added - before.replicas_added;
        let removed = self.counts.replicas_removed - before.replicas_removed;
        if added == 0 && removed == 0 {
            return;
        }
        let from = o.current();
        notes.insert(
            at,
            ScaleNote::Action(ScaleAction {
                t: now,
                pool: p as u32,
                up: added > 0,
                from,
                to: (from + added as u32).saturating_sub(removed as u32),
                desired: self.pools[p].desired,
                signals: *o,
            }),
        );
    }

    /// What pool `p`'s policy sees.
    fn observe(&self, p: usize, view: &dyn ClusterView) -> Observation {
        let mut o = Observation::default();
        let pool = &self.pools[p];
        let members = self
            .on
            .iter()
            .filter(|&&id| self.replicas[id as usize].pool == p as u32);
        for &id in members {
            match self.state(id) {
                ReplicaState::Ready => o.add(&view.snapshot(id)),
                s if s.starting() => o.starting += 1,
                _ => {}
            }
        }
        if !pool.handoff_sources.is_empty() {
            o.size(&view.snapshot(pool.members[0]));
            o.held_handoffs = self.held_handoffs(&pool.handoff_sources, view);
        }
        o.finish();
        o.window_finished = pool.window.len() as u32;
        o.window_met = pool.window_met;
        o
    }

    /// The hand-offs held for want of a ready decode replica on the prefill instances
    /// `sources` (ascending). Only the slots ever on are looked at (a slot never on has held
    /// none), so a tick costs the replicas provisioned, not every slot. The counts are whole
    /// numbers, so their sum does not depend on the order they are added in.
    fn held_handoffs(&self, sources: &[u32], view: &dyn ClusterView) -> f64 {
        let held = |f: u32| view.snapshot(f).held_for_decode as f64;
        if self.ever_on.len() < sources.len() {
            let ever_on = self.ever_on.iter().copied();
            let sources = ever_on.filter(|f| sources.binary_search(f).is_ok());
            sources.map(held).fold(0.0, |sum, n| sum + n)
        } else {
            let sources = sources.iter().copied();
            let ever_on = sources.filter(|&f| self.replicas[f as usize].ever_on);
            ever_on.map(held).fold(0.0, |sum, n| sum + n)
        }
    }

    /// The replica count pool `p` moves to at `now`: the policy's wish within the bounds,
    /// stabilized over the windows; the current count during the cooldown.
    fn target(&mut self, p: usize, now: Nanos, o: &Observation) -> u32 {
        let c = &self.config;
        let (min, max) = (c.min_replicas, c.max_replicas);
        let (up_window, down_window, cooldown) = (c.up_window_ns, c.down_window_ns, c.cooldown_ns);
        let pool = &mut self.pools[p];
        let desired = pool.policy.desired(o).clamp(min, max);
        pool.content = desired == o.current();
        pool.desired = desired;
        let keep = up_window.max(down_window);
        while pool
            .recommendations
            .front()
            .is_some_and(|&(t, _)| now - t > keep)
        {
            pool.recommendations.pop_front();
        }
        pool.recommendations.push_back((now, desired));
        let within = |window: Nanos| {
            pool.recommendations
                .iter()
                .filter(move |&&(t, _)| now - t <= window)
                .map(|&(_, n)| n)
        };
        let up = within(up_window).min().unwrap_or(desired);
        let down = within(down_window).max().unwrap_or(desired);
        let current = o.current();
        // The pathological oscillator ignores the cooldown: that is its pathology.
        let bound = !matches!(c.policy, AutoscalePolicy::Oscillator);
        let cooling = bound && pool.last.is_some_and(|(t, _)| now - t < cooldown);
        if cooling {
            current
        } else if up > current {
            up
        } else if down < current {
            down
        } else {
            current
        }
    }

    /// Records an action of pool `p` at `now` and whether it reverses the previous one
    /// within the oscillation window.
    fn record_action(&mut self, p: usize, up: bool, now: Nanos) {
        let window = self.config.oscillation_window_ns;
        let pool = &mut self.pools[p];
        if let Some((t, was_up)) = pool.last
            && was_up != up
            && now - t < window
        {
            self.counts.oscillations += 1;
        }
        pool.last = Some((now, up));
        if up {
            self.counts.scale_ups += 1;
        } else {
            self.counts.scale_downs += 1;
        }
    }

    /// Starts up to `n` off replicas of pool `p` (lowest ids first; a draining one is not
    /// free yet); an action only if one started.
    fn scale_up(&mut self, p: usize, n: u32, now: Nanos, changes: &mut Vec<Change>) {
        let mut started = 0;
        for k in 0..self.pools[p].members.len() {
            if started == n {
                break;
            }
            let id = self.pools[p].members[k];
            if self.state(id) == ReplicaState::Off {
                let at = now.saturating_add(self.provisioning_delay());
                self.set_state(id, ReplicaState::Pending, now);
                let r = &mut self.replicas[id as usize];
                r.epoch += 1;
                changes.push(Change::Due {
                    instance: id,
                    at,
                    epoch: r.epoch,
                });
                self.counts.replicas_added += 1;
                started += 1;
            }
        }
        if started > 0 {
            self.record_action(p, true, now);
        }
    }

    /// Removes `n` replicas of pool `p`: the starting ones first (cancelled), then ready
    /// ones (drained), highest ids first (`n` never takes it below the minimum).
    fn scale_down(&mut self, p: usize, n: u32, now: Nanos, changes: &mut Vec<Change>) {
        let mut left = n;
        for ready in [false, true] {
            // The pool's slots on, highest first (a slot turned off leaves `on`).
            let members: Vec<u32> = (self.on.iter().rev())
                .copied()
                .filter(|&id| self.replicas[id as usize].pool == p as u32)
                .collect();
            for id in members {
                let state = self.state(id);
                if left == 0 {
                    break;
                }
                if !ready && state.starting() {
                    self.set_state(id, ReplicaState::Off, now);
                    self.replicas[id as usize].epoch += 1;
                } else if ready && state == ReplicaState::Ready {
                    self.set_state(id, ReplicaState::Draining, now);
                    changes.push(Change::Drain { instance: id });
                } else {
                    continue;
                }
                left -= 1;
                self.counts.replicas_removed += 1;
            }
        }
        if left < n {
            self.record_action(p, false, now);
        }
    }

    /// A provisioning delay: normal around the configured mean, cut at 0, whole ns.
    fn provisioning_delay(&mut self) -> Nanos {
        let (mean, sd) = (
            self.config.provisioning_mean_ns as f64,
            self.config.provisioning_stddev_ns as f64,
        );
        if sd == 0.0 {
            return self.config.provisioning_mean_ns;
        }
        let normal = Normal::new(mean, sd).expect("a finite, non-negative deviation");
        normal.sample(&mut self.rng).round().max(0.0) as Nanos
    }

    /// The lifecycle event of replica `id` of epoch `epoch`, due at `now`: pending → loading
    /// → warming up → ready. Returns `None` for a stale event (the replica was cancelled or
    /// restarted since), else when its next event is due (`None` once it is ready).
    pub fn advance(&mut self, id: u32, epoch: u32, now: Nanos) -> Option<Option<Nanos>> {
        let r = self.replicas[id as usize];
        if r.epoch != epoch {
            return None;
        }
        let pool = r.pool as usize;
        let (next, due) = match r.state {
            ReplicaState::Pending => (ReplicaState::Loading, Some(self.pools[pool].cost.load_ns)),
            ReplicaState::Loading => (ReplicaState::WarmingUp, Some(self.config.warmup_ns)),
            ReplicaState::WarmingUp => (ReplicaState::Ready, None),
            _ => return None,
        };
        self.set_state(id, next, now);
        Some(due.map(|ns| now.saturating_add(ns)))
    }

    /// Draining replica `id` has no work left: it is off from `now`.
    pub fn retire(&mut self, id: u32, now: Nanos) {
        if self.state(id) == ReplicaState::Draining {
            self.set_state(id, ReplicaState::Off, now);
        }
    }

    /// Whether another tick seeing what the last one saw would change nothing: every pool's
    /// policy wanted the replicas it has (then no stabilization window or cooldown can make
    /// it act), and the policy keeps no state between ticks (the oscillator alternates).
    pub fn steady(&self) -> bool {
        !matches!(self.config.policy, AutoscalePolicy::Oscillator)
            && !self.series.is_empty()
            && self.pools.iter().all(|p| p.content)
    }

    /// Records `count` ticks every `interval` after the last one as they would have been
    /// with nothing changed since it ([`Autoscaler::steady`], no request routed): the same
    /// replicas and utilization, no arrivals, the same recommendation of every pool.
    pub fn repeat_last_tick(&mut self, interval: Nanos, count: u64) {
        let Some(&last) = self.series.last() else {
            return;
        };
        self.series.reserve(count as usize);
        let mut t = last.t_ns;
        for _ in 0..count {
            t = t.saturating_add(interval);
            self.series.push(ScaleSample {
                t_ns: t,
                arrival_rate: 0.0,
                ..last
            });
        }
        // Every pool's recommendation at each of those ticks was its count; within any
        // window only the latest of them matters.
        let keep = self.config.up_window_ns.max(self.config.down_window_ns);
        for pool in &mut self.pools {
            let wanted = pool.recommendations.back().map(|&(_, n)| n);
            while pool
                .recommendations
                .front()
                .is_some_and(|&(at, _)| t - at > keep)
            {
                pool.recommendations.pop_front();
            }
            if let Some(n) = wanted {
                pool.recommendations.push_back((t, n));
            }
        }
        self.last_tick = t;
    }

    /// Appends the time-series row of the tick at `now`.
    fn sample(&mut self, now: Nanos, view: &dyn ClusterView) {
        let mut observed = Observation::default();
        for id in self.ready() {
            observed.add(&view.snapshot(id));
        }
        observed.finish();
        let replicas = self.in_state;
        let span = (now - self.last_tick).max(1) as f64 / 1e9;
        self.series.push(ScaleSample {
            t_ns: now,
            replicas,
            arrival_rate: self.arrivals as f64 / span,
            utilization: observed.utilization,
        });
        self.arrivals = 0;
        self.last_tick = now;
    }

    /// The report of the run ended at `now` (the time in each state counted up to `now`).
    pub fn report(&self, now: Nanos) -> AutoscaleReport {
        let mut pools: Vec<PoolCost> = self.pools.iter().map(|p| p.cost.clone()).collect();
        for r in &self.replicas {
            pools[r.pool as usize].replica_ns[r.state.index()] += u128::from(now - r.since);
        }
        AutoscaleReport {
            policy: self.config.policy.name(),
            drain: self.config.drain.name(),
            min_replicas: self.config.min_replicas,
            max_replicas: self.config.max_replicas,
            counts: self.counts,
            pools,
            series: self.series.clone(),
            slot_pools: self.replicas.iter().map(|r| r.pool).collect(),
            initial: self.initial.clone(),
            state_changes: self.state_changes.clone(),
        }
    }
}

/// Whether the request of `record` met `p`'s targets (a target of 0 is none): its TTFT, from
/// arrival to first token, and its TPOT, over the tokens after the first (when it has any).
fn meets_targets(p: &SloParams, record: &RequestRecord<'_>) -> bool {
    let ms = |ns: Nanos| ns as f64 / 1e6;
    let ttft = ms(record.first_token_ns.saturating_sub(record.arrival_ns));
    let ttft_met = p.ttft_target_ms <= 0.0 || ttft <= p.ttft_target_ms;
    let tpot_met = p.tpot_target_ms <= 0.0
        || record.output_toks <= 1
        || ms(record.end_ns.saturating_sub(record.first_token_ns))
            / f64::from(record.output_toks - 1)
            <= p.tpot_target_ms;
    ttft_met && tpot_met
}
