//! What the router sees of the instances: per-instance snapshots refreshed by each signal's
//! mode ([`SignalConfig`], see `router/signals.rs`), and the prefix cache as it was at its
//! last refresh.
//!
//! Cost by design. An immediate signal is read live from an instance when the router looks
//! at it, and a periodic one is copied from every instance only at the decisions where it
//! falls due (a handful of counters): a decision costs nothing for the instances its policy
//! does not look at, so round-robin over 10,000 instances pays nothing. The prefix cache is
//! never copied: each pool keeps, only when the prefix signal is stale, the time each
//! indexed block got its hash and a log of the evictions since the router's last refresh
//! (`scheduler/kv.rs`), so "was block `h` cached as the router saw it at `t`" is one hash
//! lookup plus, for an evicted block, a walk along that hash's evictions. A refresh is then
//! one number (the time the router's view is of) and the eviction log's trim. BLIS instead
//! copies every instance's cache map at each refresh.
//!
//! A policy that picks the least of one key over every instance (`LOAD`, `least-loaded`,
//! `always-busiest`) reads a ranking instead of a snapshot of each ([`crate::router::RankTree`]):
//! at each refresh, the instances indexed mutably since the last one ([`Cores::changed`]) get
//! their key again from what the router sees of them (every instance after a stale signal
//! was copied), so a decision costs O(log n) plus the instances that changed. Under P/D the
//! instances that take arrivals and the decode instances are ranked apart, each among its
//! own, as a request's candidates on each side are. Not kept in an autoscaled run, whose
//! refreshes visit only the replicas provisioned.
//!
//! Refresh instants. A periodic signal is re-read at the first routing decision at or after
//! its interval has passed since its last read (BLIS's lazy `Periodic`), and reads the
//! instance as it is at that decision; the prefix cache is refreshed the same way, for all
//! instances at once (as BLIS does). The router's decisions at an instant all come before
//! the steps formed at that instant, so the prefix cache "as seen at `t`" holds the blocks
//! indexed before `t` and not evicted before `t`.

use super::cores::Cores;
use super::instance::InstanceSim;
use crate::Nanos;
use crate::config::InstanceRole;
use crate::metrics::RequestRecord;
use crate::router::{
    ClusterView, InstanceSnapshot, RankTree, Ranking, Refresh, Signal, SignalConfig,
};
use crate::scheduler::Core;
use std::cell::Cell;

/// An instance's recent statistics, updated as its steps end: exponentially weighted means
/// (weight 1/8 to each new sample) of the time to first token, time per output token and
/// queueing delay of the requests it finishes, and of its prefix cache hit rate by step.
/// Integers only, no allocation.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Recent {
    ttft_ns: Option<Nanos>,
    tpot_ns: Option<Nanos>,
    wait_ns: Option<Nanos>,
    /// Decayed sums of prompt tokens looked up and found in the prefix cache.
    looked_up: u64,
    hit: u64,
    /// The scheduler's totals at the last step end.
    last_looked_up: u64,
    last_hit: u64,
}

/// `mean` moved 1/8 of the way to `sample` (the sample itself for the first).
fn ewma(mean: Option<Nanos>, sample: Nanos) -> Option<Nanos> {
    Some(match mean {
        None => sample,
        Some(m) if sample >= m => m + (sample - m) / 8,
        Some(m) => m - (m - sample) / 8,
    })
}

impl Recent {
    /// A request finished on the instance.
    pub(crate) fn request_finished(&mut self, rec: &RequestRecord<'_>) {
        let ttft = rec.first_token_ns.saturating_sub(rec.arrival_ns);
        self.ttft_ns = ewma(self.ttft_ns, ttft);
        if rec.output_toks > 1 {
            let decode = rec.end_ns.saturating_sub(rec.first_token_ns);
            self.tpot_ns = ewma(self.tpot_ns, decode / u64::from(rec.output_toks - 1));
        }
        self.wait_ns = ewma(self.wait_ns, rec.queuing_delay_ns);
    }

    /// A step of the instance ended; `looked_up` and `hit` are its scheduler's prefix-cache
    /// totals now ([`Core::prefix_tokens`]).
    pub(crate) fn step_finished(&mut self, (total_looked_up, total_hit): (u64, u64)) {
        let looked_up = total_looked_up - self.last_looked_up;
        let hit = total_hit - self.last_hit;
        self.last_looked_up = total_looked_up;
        self.last_hit = total_hit;
        if looked_up > 0 {
            self.looked_up = self.looked_up - self.looked_up / 8 + looked_up;
            self.hit = self.hit - self.hit / 8 + hit;
        }
    }

    fn hit_rate(&self) -> f64 {
        if self.looked_up == 0 {
            0.0
        } else {
            self.hit as f64 / self.looked_up as f64
        }
    }
}

/// The instance's snapshot as it is now, at `now`.
fn observe(scheduler: &Core, recent: &Recent, now: Nanos) -> InstanceSnapshot {
    let offload = scheduler.offload_load(now);
    InstanceSnapshot {
        cpu_kv_blocks_used: offload.cpu_blocks_used,
        cpu_kv_blocks_total: offload.cpu_blocks_total,
        transfer_queue: offload.transfer_queue,
        pending_offloads: offload.pending_offloads,
        pending_reloads: offload.pending_reloads,
        recent_ttft_ns: recent.ttft_ns.unwrap_or(0),
        recent_tpot_ns: recent.tpot_ns.unwrap_or(0),
        estimated_wait_ns: recent.wait_ns.unwrap_or(0),
        cache_hit_rate: recent.hit_rate(),
        taken_at: now,
        ..InstanceSnapshot::of(scheduler)
    }
}

/// The signals read from an instance's scheduler (the others are the engine's recent
/// statistics, and the prefix cache, read where it is asked).
const SCHEDULER_SIGNALS: [Signal; 3] = [Signal::Queue, Signal::Running, Signal::Kv];

/// The recent statistics of an instance at `now`, what its hit rate and recent latency
/// signals read ([`observe`] without the scheduler: the other fields are left at zero).
fn observe_recent(recent: &Recent, now: Nanos) -> InstanceSnapshot {
    InstanceSnapshot {
        recent_ttft_ns: recent.ttft_ns.unwrap_or(0),
        recent_tpot_ns: recent.tpot_ns.unwrap_or(0),
        estimated_wait_ns: recent.wait_ns.unwrap_or(0),
        cache_hit_rate: recent.hit_rate(),
        taken_at: now,
        ..InstanceSnapshot::default()
    }
}

/// Copies `signal`'s fields from `live` into `held`.
fn copy_signal(signal: Signal, live: &InstanceSnapshot, held: &mut InstanceSnapshot) {
    match signal {
        Signal::Queue => {
            held.waiting = live.waiting;
            held.held_for_decode = live.held_for_decode;
        }
        Signal::Running => held.running = live.running,
        Signal::Kv => {
            held.kv_blocks_used = live.kv_blocks_used;
            held.cpu_kv_blocks_used = live.cpu_kv_blocks_used;
            held.cpu_kv_blocks_total = live.cpu_kv_blocks_total;
            held.transfer_queue = live.transfer_queue;
            held.pending_offloads = live.pending_offloads;
            held.pending_reloads = live.pending_reloads;
        }
        Signal::HitRate => held.cache_hit_rate = live.cache_hit_rate,
        Signal::Ttft => held.recent_ttft_ns = live.recent_ttft_ns,
        Signal::Tpot => held.recent_tpot_ns = live.recent_tpot_ns,
        Signal::Wait => held.estimated_wait_ns = live.estimated_wait_ns,
        Signal::Prefix => {}
    }
}

/// Whether a signal last read at `last` is re-read at a decision at `now`.
fn due(mode: Refresh, last: Nanos, now: Nanos) -> bool {
    match mode {
        Refresh::Immediate => true,
        Refresh::Periodic(interval) => now - last >= interval,
        Refresh::OnDemand => false,
    }
}

/// The instances that may have changed since the run started: in an autoscaled run, the
/// replica slots provisioned so far (a slot never provisioned holds nothing, so what the
/// router holds of it stays what it was at the start).
struct Active {
    ids: Vec<u32>,
    /// By instance id: whether it is in `ids`.
    member: Vec<bool>,
}

/// The ids of the instances `active` names (all `n` when it is `None`).
fn active_ids(active: &Option<Active>, n: usize) -> impl Iterator<Item = usize> + '_ {
    let (all, some) = match active {
        None => (0..n, &[][..]),
        Some(a) => (0..0, &a.ids[..]),
    };
    all.chain(some.iter().map(|&id| id as usize))
}

/// Whether the schedulers of a run under `config` keep their prefix cache's history: when
/// the prefix signal is stale.
pub(crate) fn keeps_cache_history(config: &SignalConfig) -> bool {
    config.mode(Signal::Prefix) != Refresh::Immediate
}

/// The router's view of every instance, refreshed by each signal's mode.
///
/// Every instance's signal is re-read at the same instants (the decisions at which its mode
/// makes it due), so when each signal was last read is one time for all instances. An
/// immediate signal is read live when the router looks at an instance, never copied; the
/// others are copied for every instance only at the instants they fall due. A decision thus
/// costs nothing for the instances its policy does not look at (round-robin looks at none).
pub(crate) struct Signals {
    config: SignalConfig,
    /// Per instance: what the router holds of its non-immediate signals.
    held: Vec<InstanceSnapshot>,
    /// Per signal: when it was last read (the same for every instance).
    read_at: [Nanos; 8],
    /// The signals that are read live.
    immediate: [bool; 8],
    /// Whether some signal is not immediate (else nothing is ever copied).
    copies: bool,
    /// The time of the last refresh: the decision the view is for.
    now: Nanos,
    /// The time the prefix cache signal is of (`None`: live).
    prefix_at: Option<Nanos>,
    /// The instances a refresh visits (`None`: all).
    active: Option<Active>,
    /// The run's router's ranking of the instances, when it picks by one and every instance
    /// may change (no autoscaler).
    rank: Option<Rank>,
    /// How many instance snapshots were taken ([`Signals::snapshots_taken`]).
    taken: Cell<u64>,
}

/// Every instance ranked by a policy's key of what the router sees of it (`router/rank.rs`),
/// kept up to date at each refresh: the instances indexed mutably since the last one
/// ([`Cores::changed`]) get their key again, or all of them after a stale signal was copied.
struct Rank {
    by: Ranking,
    /// One ranking per [`Side`] that has instances, each over that side's instances in id
    /// order.
    sides: [Option<RankTree>; 2],
    /// Per instance: its side and its place in that side's ranking.
    place: Vec<(Side, u32)>,
    /// Whether every key must be taken again (at the start, and after a copy).
    stale: bool,
}

/// The instances a request's candidates are drawn from at one routing decision: those that
/// take arrivals (all of them without P/D), or the decode instances a prefilled request is
/// handed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Arrival = 0,
    Decode = 1,
}

impl Rank {
    /// Ranking `by` over instances of `roles`, every key to be taken.
    fn new(by: Ranking, roles: &[InstanceRole]) -> Rank {
        let mut counts = [0u32; 2];
        let place = (roles.iter())
            .map(|&role| {
                let side = match role {
                    InstanceRole::Decode => Side::Decode,
                    _ => Side::Arrival,
                };
                counts[side as usize] += 1;
                (side, counts[side as usize] - 1)
            })
            .collect();
        Rank {
            by,
            sides: counts.map(|n| (n > 0).then(|| RankTree::new(n as usize))),
            place,
            stale: true,
        }
    }

    /// Sets instance `i`'s key.
    fn set(&mut self, i: usize, key: u128) {
        let (side, at) = self.place[i];
        if let Some(tree) = &mut self.sides[side as usize] {
            tree.set(at as usize, key);
        }
    }
}

impl Signals {
    /// The view of `schedulers` at the start of a run under `config` (whose schedulers keep
    /// their cache history when [`keeps_cache_history`] says so).
    pub(crate) fn new(config: SignalConfig, schedulers: &Cores<'_>) -> Signals {
        let recent = Recent::default();
        let held = schedulers.iter().map(|s| observe(s, &recent, 0)).collect();
        let prefix_at = keeps_cache_history(&config).then_some(0);
        let immediate = Signal::ALL.map(|s| config.mode(s) == Refresh::Immediate);
        Signals {
            config,
            held,
            read_at: [0; 8],
            immediate,
            copies: Signal::ALL[..7].iter().any(|s| !immediate[s.index()]),
            now: 0,
            prefix_at,
            active: None,
            rank: None,
            taken: Cell::new(schedulers.len() as u64),
        }
    }

    /// How many instance snapshots were taken so far, at the start included.
    pub(crate) fn snapshots_taken(&self) -> u64 {
        self.taken.get()
    }

    /// The instance's snapshot as it is now, at `now`, counted.
    fn take_snapshot(&self, scheduler: &Core, recent: &Recent, now: Nanos) -> InstanceSnapshot {
        self.taken.set(self.taken.get() + 1);
        observe(scheduler, recent, now)
    }

    /// Whether the ranking kept, if any, takes its keys from requests waiting and running
    /// alone (`LOAD`'s): a change to an instance that leaves both as they were leaves its
    /// key as it was.
    pub(crate) fn keys_read_queues_only(&self) -> bool {
        self.rank.as_ref().is_none_or(|r| r.by == Ranking::Load)
    }

    /// Keeps the instances (of these `roles`, by id) ranked by `ranking` (the run's
    /// router's, if any) from now on, listing the instances that change in `schedulers`.
    pub(crate) fn rank_by(
        &mut self,
        ranking: Option<Ranking>,
        roles: &[InstanceRole],
        schedulers: &mut Cores<'_>,
    ) {
        self.rank = (ranking.filter(|_| self.active.is_none())).map(|by| Rank::new(by, roles));
        schedulers.track_changes(self.rank.is_some());
    }

    /// From now on, refreshes visit only the instances `ids` and those named to
    /// [`Signals::activate`]: the others must not change.
    pub(crate) fn only_active(&mut self, ids: &[u32]) {
        // Refreshes visit only the active instances: a ranking of all would visit every one.
        self.rank = None;
        let mut member = vec![false; self.held.len()];
        for &id in ids {
            member[id as usize] = true;
        }
        self.active = Some(Active {
            ids: ids.to_vec(),
            member,
        });
    }

    /// Instance `id` may change from now on (a replica slot being provisioned).
    pub(crate) fn activate(&mut self, id: u32) {
        if let Some(a) = &mut self.active
            && !a.member[id as usize]
        {
            a.member[id as usize] = true;
            a.ids.push(id);
        }
    }

    /// The instances that may have changed since the run started.
    pub(crate) fn active(&self) -> impl Iterator<Item = usize> + '_ {
        active_ids(&self.active, self.held.len())
    }

    /// Before a routing decision at `now`: re-reads the signals due.
    pub(crate) fn refresh_due(
        &mut self,
        now: Nanos,
        schedulers: &mut Cores<'_>,
        instances: &[InstanceSim<'_>],
    ) {
        self.refresh(now, schedulers, instances, |mode, last| {
            due(mode, last, now)
        });
    }

    /// Re-reads every signal of every instance now, whatever its mode (an explicit probe).
    pub(crate) fn refresh_all(
        &mut self,
        now: Nanos,
        schedulers: &mut Cores<'_>,
        instances: &[InstanceSim<'_>],
    ) {
        self.refresh(now, schedulers, instances, |_, _| true);
    }

    fn refresh(
        &mut self,
        now: Nanos,
        schedulers: &mut Cores<'_>,
        instances: &[InstanceSim<'_>],
        due: impl Fn(Refresh, Nanos) -> bool,
    ) {
        self.reread(now, schedulers, instances, due);
        self.rerank(schedulers);
    }

    /// Re-reads the signals `due` says, at `now`.
    fn reread(
        &mut self,
        now: Nanos,
        schedulers: &mut Cores<'_>,
        instances: &[InstanceSim<'_>],
        due: impl Fn(Refresh, Nanos) -> bool,
    ) {
        self.now = now;
        let config = self.config;
        let mut copy = [false; 8];
        for signal in &Signal::ALL[..7] {
            let k = signal.index();
            if due(config.mode(*signal), self.read_at[k]) {
                self.read_at[k] = now;
                copy[k] = !self.immediate[k];
            }
        }
        if self.copies && copy.contains(&true) {
            self.rank_all_again(&copy);
            self.copy_held(&copy, schedulers, instances, now);
        }
        if self.prefix_at.is_none() {
            return;
        }
        let k = Signal::Prefix.index();
        if due(config.mode(Signal::Prefix), self.read_at[k]) {
            self.prefix_at = Some(now);
            self.read_at[k] = now;
            for i in active_ids(&self.active, schedulers.len()) {
                schedulers[i].forget_cache_history_before(now);
            }
        }
    }

    /// Whether re-reading `signals` of the instances now would change nothing: an immediate
    /// signal is read live anyway and an on-demand one never changes without a probe, so only
    /// the periodic ones are compared with their live values.
    pub(crate) fn settled(
        &self,
        signals: &[Signal],
        now: Nanos,
        schedulers: &Cores<'_>,
        instances: &[InstanceSim<'_>],
    ) -> bool {
        let config = self.config;
        let periodic = |s: &&Signal| matches!(config.mode(**s), Refresh::Periodic(_));
        if !signals.iter().any(|s| periodic(&s)) {
            return true;
        }
        self.active().all(|i| {
            let live = self.take_snapshot(&schedulers[i], &instances[i].recent, now);
            let mut read = self.held[i];
            for signal in signals.iter().filter(periodic) {
                copy_signal(*signal, &live, &mut read);
            }
            read == self.held[i]
        })
    }

    /// Does what [`Signals::refresh_due`] at each of `times` (ascending, after every read
    /// so far) would do while the instances do not change: every signal and the prefix
    /// cache are read at the last of them it falls due at, a copied signal then taking its
    /// live value. One pass over the instances, whatever the number of times.
    pub(crate) fn refresh_idle(
        &mut self,
        times: impl Iterator<Item = Nanos> + Clone,
        schedulers: &mut Cores<'_>,
        instances: &[InstanceSim<'_>],
    ) {
        let Some(last) = times.clone().last() else {
            return;
        };
        let config = self.config;
        let first = self.read_at;
        for signal in Signal::ALL {
            // The prefix cache's read time moves only when it is stale (`refresh`).
            if signal == Signal::Prefix && self.prefix_at.is_none() {
                continue;
            }
            let (k, mode) = (signal.index(), config.mode(signal));
            for t in times.clone() {
                if due(mode, self.read_at[k], t) {
                    self.read_at[k] = t;
                }
            }
        }
        self.now = last;
        let copy: [bool; 8] =
            std::array::from_fn(|k| k < 7 && !self.immediate[k] && self.read_at[k] != first[k]);
        if self.copies && copy.contains(&true) {
            self.rank_all_again(&copy);
            self.copy_held(&copy, schedulers, instances, last);
        }
        let prefix = Signal::Prefix.index();
        if self.read_at[prefix] != first[prefix] {
            self.prefix_at = Some(self.read_at[prefix]);
            for i in active_ids(&self.active, schedulers.len()) {
                schedulers[i].forget_cache_history_before(self.read_at[prefix]);
            }
        }
        self.rerank(schedulers);
    }

    /// Copies the signals `copy` of every active instance, as they are at `now`, into what
    /// the router holds. The scheduler is read only when a copied signal is its own (queue,
    /// running, KV); the hit rate and the recent latencies are the engine's (`Recent`).
    fn copy_held(
        &mut self,
        copy: &[bool; 8],
        schedulers: &Cores<'_>,
        instances: &[InstanceSim<'_>],
        now: Nanos,
    ) {
        let reads_scheduler = SCHEDULER_SIGNALS.iter().any(|s| copy[s.index()]);
        for i in active_ids(&self.active, schedulers.len()) {
            let recent = &instances[i].recent;
            let live = if reads_scheduler {
                self.take_snapshot(&schedulers[i], recent, now)
            } else {
                observe_recent(recent, now)
            };
            for signal in &Signal::ALL[..7] {
                if copy[signal.index()] {
                    copy_signal(*signal, &live, &mut self.held[i]);
                }
            }
        }
    }

    /// After the stale signals `copied` were copied: every instance's key is taken again if
    /// a key reads one of them. A key reads requests waiting and running and KV blocks used
    /// ([`Ranking::key`]; the in-flight count is always live), so copying only the hit rate
    /// or the recent latencies (periodic by default, the hit rate every 10 ms) changes no key.
    fn rank_all_again(&mut self, copied: &[bool; 8]) {
        if !SCHEDULER_SIGNALS.iter().any(|s| copied[s.index()]) {
            return;
        }
        if let Some(rank) = &mut self.rank {
            rank.stale = true;
        }
    }

    /// Brings the ranking up to date: the key of every instance that changed since the last
    /// refresh (of every one after a copy), from what the router sees of it now.
    fn rerank(&mut self, schedulers: &mut Cores<'_>) {
        let Some(mut rank) = self.rank.take() else {
            schedulers.track_changes(false);
            return;
        };
        let by = rank.by;
        if rank.stale {
            for i in 0..self.held.len() {
                rank.set(i, self.key(by, i, schedulers));
            }
            rank.stale = false;
        } else {
            for &id in schedulers.changed() {
                let i = id as usize;
                rank.set(i, self.key(by, i, schedulers));
            }
        }
        schedulers.clear_changes();
        self.rank = Some(rank);
    }

    /// What the router sees of instance `i`: the held snapshot with the immediate signals
    /// read live, for the decision of the last refresh.
    fn seen(
        &self,
        i: usize,
        schedulers: &Cores<'_>,
        instances: &[InstanceSim<'_>],
    ) -> InstanceSnapshot {
        self.seen_with(
            i,
            self.take_snapshot(&schedulers[i], &instances[i].recent, self.now),
        )
    }

    /// What the router sees of instance `i` with its immediate signals read as `live`.
    fn seen_with(&self, i: usize, live: InstanceSnapshot) -> InstanceSnapshot {
        let mut held = self.held[i];
        for signal in &Signal::ALL[..7] {
            if self.immediate[signal.index()] {
                copy_signal(*signal, &live, &mut held);
            }
        }
        held.in_flight = live.in_flight;
        held.taken_at = self.read_at[..7].iter().copied().min().unwrap_or(self.now);
        held
    }

    /// Instance `i`'s key in `by`'s ranking: that of what the router sees of it, the
    /// instance read only for the load signals a key depends on (requests waiting and
    /// running, KV blocks used, in flight).
    fn key(&self, by: Ranking, i: usize, schedulers: &Cores<'_>) -> u128 {
        if by == Ranking::Load {
            return by.key(&self.seen_for_load(i, &schedulers[i]));
        }
        by.key(&self.seen_with(i, InstanceSnapshot::of(&schedulers[i])))
    }

    /// What `LOAD`'s key reads of what the router sees of instance `i` (requests waiting
    /// and running, `max_num_seqs`), the instance read for nothing else: the KV pool and
    /// the rest of the snapshot are not touched (a key is taken after most steps).
    fn seen_for_load(&self, i: usize, core: &Core) -> InstanceSnapshot {
        let held = &self.held[i];
        let waiting = if self.immediate[Signal::Queue.index()] {
            core.num_waiting() + core.num_incoming()
        } else {
            held.waiting
        };
        let running = if self.immediate[Signal::Running.index()] {
            core.num_running()
        } else {
            held.running
        };
        InstanceSnapshot {
            waiting,
            running,
            max_num_seqs: held.max_num_seqs,
            ..InstanceSnapshot::default()
        }
    }

    /// The view over `schedulers` and `instances` (the live prefix caches, asked at the
    /// signal's time), for the decision of the last refresh among candidates of `side`.
    pub(crate) fn view<'a>(
        &'a self,
        side: Side,
        schedulers: &'a Cores<'a>,
        instances: &'a [InstanceSim<'a>],
    ) -> SignalView<'a> {
        SignalView {
            signals: self,
            side,
            schedulers,
            instances,
        }
    }
}

/// What the router sees: the held snapshots with the immediate signals read live, and the
/// prefix caches as of their signal's time.
pub(crate) struct SignalView<'a> {
    signals: &'a Signals,
    /// Where the decision's candidates are drawn from: the ranking it reads.
    side: Side,
    schedulers: &'a Cores<'a>,
    instances: &'a [InstanceSim<'a>],
}

impl ClusterView for SignalView<'_> {
    fn snapshot(&self, id: u32) -> InstanceSnapshot {
        self.signals
            .seen(id as usize, self.schedulers, self.instances)
    }

    fn ranked(&self, ranking: Ranking) -> Option<&RankTree> {
        let rank = self.signals.rank.as_ref()?;
        let current = !rank.stale && self.schedulers.changed().is_empty();
        let tree = rank.sides[self.side as usize].as_ref();
        tree.filter(|_| rank.by == ranking && current)
    }

    fn cached_prefix_blocks(&self, id: u32, hashes: &[u64]) -> usize {
        let scheduler = &self.schedulers[id as usize];
        match self.signals.prefix_at {
            None => scheduler.cached_prefix_blocks(hashes),
            Some(t) => scheduler.cached_prefix_blocks_at(hashes, t),
        }
    }
}
