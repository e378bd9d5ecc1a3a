//! The cluster router: picks, at a request's arrival, the instance that serves it.
//!
//! Routing is online: it sees each candidate instance's state at the arrival instant (after
//! every step that finished at that instant has been applied, see [`crate::engine`]) through
//! the read-only [`ClusterView`] of [`InstanceSnapshot`]s. Candidates are the instances able to serve the request (its
//! model, its length), in ascending instance id; every policy breaks ties by the lowest id
//! except `LOAD`, whose scan order follows LLMServingSim.
//!
//! Policies ([`RoutingPolicy`]):
//! - `LOAD` (LLMServingSim): scan the candidates starting at `counter % n`; score
//!   `(4·waiting + running) / max_num_seqs` (raw when unlimited); the first strictly lower
//!   score wins; `counter = best + 1`.
//! - `RR`: candidate `counter % n`, then `counter = that + 1`.
//! - `RAND`: a uniform draw from the router's own ChaCha8 stream, seeded from `--seed`.
//! - `least-loaded`: fewest waiting + running, then fewest used KV blocks.
//! - `prefix-affinity`: most prompt tokens already in the instance's prefix cache (the
//!   longest cached leading run of the prompt's block hashes, at most all but the last
//!   prompt token, as admission counts it); least-loaded when no candidate holds any.
//! - `weighted`: highest `Σ weight × signal` ([`RoutingWeights`]); with `--routing-scorers`,
//!   BLIS's weighted sum of named scorers ([`ScorerSet`], see `scorers.rs`).
//! - `always-busiest` (pathological, BLIS's test policy): the highest effective load
//!   (waiting + running + in flight), lowest id on ties.
//!
//! What the router sees, and how stale each signal is, is set per signal ([`SignalConfig`],
//! `signals.rs`); the engine refreshes the snapshots it hands the router accordingly.
//! When every instance is a candidate, `LOAD`, `least-loaded` and `always-busiest` read a
//! ranking of the instances by their key that the view keeps up to date ([`RankTree`],
//! `rank.rs`), with the scan's pick, ties included.

mod explain;
mod policy;
mod rank;
mod scorers;
mod signals;

/// Routing settings' errors are configuration errors: their home is `config`, which the
/// setup layer's `Problem` may name.
pub use crate::config::{RoutingSpecError, WeightBound};
pub use explain::{CandidateScore, Explanation};
pub use policy::{RoutingPolicy, RoutingWeights, Weighting};
pub use rank::{RankTree, Ranking};
pub use scorers::{LruBlocks, PREFIX_INDEX_BLOCKS, ScoreScratch, Scorer, ScorerSet};
pub use signals::{Refresh, Signal, SignalConfig, parse_duration_ns};

use crate::Nanos;
use crate::scheduler::{Core, request_block_hashes};
use crate::workload::Request;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// What routing sees of one instance at the moment it routes: plain numbers, copied out of
/// the instance, so that observing changes nothing. Each signal may be stale by its refresh
/// mode ([`SignalConfig`]); the prefix cache, too large to copy, is asked through
/// [`ClusterView::cached_prefix_blocks`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct InstanceSnapshot {
    /// Requests waiting for admission (including preempted ones and, on a decode instance,
    /// requests whose KV cache is on its way).
    pub waiting: usize,
    /// Requests admitted and not finished.
    pub running: usize,
    /// The instance's `max_num_seqs`; `None` is unlimited.
    pub max_num_seqs: Option<u32>,
    /// KV blocks held by requests.
    pub kv_blocks_used: usize,
    /// KV blocks of the instance.
    pub kv_blocks_total: usize,
    /// Tokens per KV block.
    pub block_size: u32,
    /// Whether the instance caches prefixes.
    pub prefix_caching: bool,
    /// Requests the router sent to the instance that have not finished (the router's own
    /// count: always fresh).
    pub in_flight: usize,
    /// Recent time to first token of the requests the instance finished, ns (0 before any).
    pub recent_ttft_ns: Nanos,
    /// Recent time per output token, ns (0 before any).
    pub recent_tpot_ns: Nanos,
    /// Recent share of looked-up prompt tokens found in the prefix cache, in [0, 1].
    pub cache_hit_rate: f64,
    /// Estimated wait before a new request is scheduled: the recent queueing delay, ns.
    pub estimated_wait_ns: Nanos,
    /// KV offloading (`--kv-cpu-blocks`): KV blocks held by the CPU tier (0 without it; read
    /// with the KV signal).
    pub cpu_kv_blocks_used: usize,
    /// KV blocks the CPU tier has room for (0 without KV offloading).
    pub cpu_kv_blocks_total: usize,
    /// Transfers (offloads and reloads alike) queued or on the instance's GPU-CPU link (0
    /// without KV offloading; read with the KV signal).
    pub transfer_queue: usize,
    /// Of those, the offloads and the reloads (read with the KV signal).
    pub pending_offloads: usize,
    pub pending_reloads: usize,
    /// When the stalest of its signals was read from the instance, ns.
    pub taken_at: Nanos,
    /// On a prefill instance of an autoscaled run: requests it handed off that wait for a
    /// ready decode replica, their KV kept here (read with the queue signal).
    pub held_for_decode: usize,
}

impl InstanceSnapshot {
    /// The snapshot of `scheduler` as it is now (load signals only; the recent statistics
    /// are the engine's, see `engine::signals`).
    pub fn of(scheduler: &Core) -> InstanceSnapshot {
        let waiting = scheduler.num_waiting() + scheduler.num_incoming();
        let running = scheduler.num_running();
        InstanceSnapshot {
            waiting,
            running,
            max_num_seqs: scheduler.config().max_num_seqs,
            kv_blocks_used: scheduler.kv_blocks_used(),
            kv_blocks_total: scheduler.kv_blocks(),
            block_size: scheduler.config().block_size,
            prefix_caching: scheduler.config().enable_prefix_caching,
            in_flight: waiting + running,
            held_for_decode: scheduler.num_held_for_decode(),
            ..InstanceSnapshot::default()
        }
    }

    /// Share of the CPU tier's KV blocks in use, in [0, 1] (0 without KV offloading).
    pub fn cpu_kv_utilization(&self) -> f64 {
        self.cpu_kv_blocks_used as f64 / self.cpu_kv_blocks_total.max(1) as f64
    }

    /// Share of the KV blocks in use, in [0, 1].
    pub fn kv_utilization(&self) -> f64 {
        self.kv_blocks_used as f64 / self.kv_blocks_total.max(1) as f64
    }

    /// KV blocks nobody holds.
    pub fn free_kv_blocks(&self) -> usize {
        self.kv_blocks_total.saturating_sub(self.kv_blocks_used)
    }

    /// BLIS's effective load: waiting + running (as observed) + in flight (always fresh).
    pub fn effective_load(&self) -> usize {
        self.waiting + self.running + self.in_flight
    }
}

/// What routing may observe of the cluster's instances, by instance id. Read-only.
pub trait ClusterView {
    /// The snapshot of instance `id`.
    fn snapshot(&self, id: u32) -> InstanceSnapshot;
    /// How many leading blocks of the hash chain `hashes` instance `id`'s prefix cache holds.
    fn cached_prefix_blocks(&self, id: u32, hashes: &[u64]) -> usize;
    /// The instances this decision's candidates are drawn from (every instance; under P/D,
    /// those that take arrivals or the decode instances), ids ascending, ranked by
    /// `ranking`'s key of their snapshots, when the view keeps such a ranking up to date
    /// (`rank.rs`); `None` asks the policy to read each snapshot.
    fn ranked(&self, ranking: Ranking) -> Option<&RankTree> {
        let _ = ranking;
        None
    }
}

/// The immediate view of a cluster: its instances' schedulers as they are.
impl ClusterView for [Core] {
    fn snapshot(&self, id: u32) -> InstanceSnapshot {
        InstanceSnapshot::of(&self[id as usize])
    }

    fn cached_prefix_blocks(&self, id: u32, hashes: &[u64]) -> usize {
        self[id as usize].cached_prefix_blocks(hashes)
    }
}

impl ClusterView for Vec<Core> {
    fn snapshot(&self, id: u32) -> InstanceSnapshot {
        self[..].snapshot(id)
    }

    fn cached_prefix_blocks(&self, id: u32, hashes: &[u64]) -> usize {
        self[..].cached_prefix_blocks(id, hashes)
    }
}

/// What the router decided for an arriving request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteDecision {
    /// Queue it on this instance (one of the candidates).
    To(u32),
    /// Hold it at the gateway; the engine asks again, in arrival order, at every later
    /// instant at which a step or a KV transfer ended.
    Queue,
    /// Refuse it: the request ends, rejected, at its arrival.
    Reject,
}

/// Decides where arriving requests go. [`Router`] is the policy-driven implementation; the
/// control plane wraps it.
pub trait Routing {
    /// The decision for `request` among `candidates` (instance ids that can serve it,
    /// ascending, not empty), seeing the instances through `view`.
    fn decide(
        &mut self,
        request: &Request,
        candidates: &[u32],
        view: &dyn ClusterView,
    ) -> RouteDecision;

    /// Why the last decision was taken, when the router explains its decisions.
    fn explanation(&self) -> Option<&Explanation> {
        None
    }

    /// The key by which the router picks among every instance, for the view to keep them
    /// ranked by ([`ClusterView::ranked`]); `None` when it reads the snapshots otherwise.
    fn ranking(&self) -> Option<Ranking> {
        None
    }

    /// The chained hashes of `request`'s leading full blocks at `block_size` that the last
    /// decision computed (a prefix of the list [`crate::scheduler::request_block_hashes`]
    /// gives), for the instance it queues on to copy instead of hashing them again; empty
    /// when it computed none.
    fn prompt_hashes(&self, request: &Request, block_size: u32) -> &[u64] {
        let _ = (request, block_size);
        &[]
    }
}

impl Routing for Router {
    fn decide(
        &mut self,
        request: &Request,
        candidates: &[u32],
        view: &dyn ClusterView,
    ) -> RouteDecision {
        RouteDecision::To(self.route(request, candidates, view))
    }

    fn explanation(&self) -> Option<&Explanation> {
        self.explain.as_ref()
    }

    fn ranking(&self) -> Option<Ranking> {
        self.policy.ranking()
    }

    /// The longer of the lists the prefix policies' and the prefix-affinity scorer's
    /// scratches hold for `request` at `block_size`.
    fn prompt_hashes(&self, request: &Request, block_size: u32) -> &[u64] {
        let policy = self.prefix.hashes_of(request, block_size);
        let scorer = self.scores.hashes_of(request, block_size);
        if scorer.len() > policy.len() {
            scorer
        } else {
            policy
        }
    }
}

/// Which request a scratch's hashes were computed for: its id, arrival and prompt length.
pub(crate) type HashedFor = (u64, crate::Nanos, u32);

/// The [`HashedFor`] of `request`.
pub(crate) fn hashed_for(request: &Request) -> HashedFor {
    (request.id, request.arrival_ns, request.input_toks)
}

/// Seed of a router's random stream: `--seed` hashed with the stream's name, so that the
/// router's draws are independent of every other stream of the run.
fn stream_seed(seed: u64, stream: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(stream, seed)
}

/// The router of one run, with the state its policy keeps between requests.
#[derive(Debug)]
pub struct Router {
    policy: RoutingPolicy,
    /// `LOAD` and `RR` rotation.
    counter: usize,
    rng: ChaCha8Rng,
    prefix: PrefixScratch,
    scores: scorers::ScoreScratch,
    /// Why the last request went where it did, when asked (`--trace-level`).
    explain: Option<Explanation>,
}

impl Router {
    /// A router applying `policy`; `seed` seeds the `RAND` stream.
    pub fn new(policy: RoutingPolicy, seed: u64) -> Router {
        Router::with_stream(policy, seed, b"router")
    }

    /// A router applying `policy` whose `RAND` stream is seeded by `seed` hashed with
    /// `stream`, so that two routers of a run (arrivals, and hand-offs to decode instances)
    /// draw independently. Its `LOAD` and `RR` rotation is its own too.
    pub fn with_stream(policy: RoutingPolicy, seed: u64, stream: &[u8]) -> Router {
        Router {
            policy,
            counter: 0,
            rng: ChaCha8Rng::seed_from_u64(stream_seed(seed, stream)),
            prefix: PrefixScratch::default(),
            scores: scorers::ScoreScratch::default(),
            explain: None,
        }
    }

    /// What weighted scoring keeps between requests, to score candidates one scorer at a time.
    pub fn scores_mut(&mut self) -> &mut ScoreScratch {
        &mut self.scores
    }

    /// Makes the router explain each decision, listing the `k` best candidates
    /// ([`Routing::explanation`]).
    pub fn explain_top(&mut self, k: usize) {
        self.explain = Some(Explanation::new(k));
        self.scores.explain = true;
    }

    /// The policy.
    pub fn policy(&self) -> &RoutingPolicy {
        &self.policy
    }

    /// Picks the instance for `request` among `candidates` (instance ids, ascending, not
    /// empty), seeing them through `view`.
    pub fn route<V: ClusterView + ?Sized>(
        &mut self,
        request: &Request,
        candidates: &[u32],
        view: &V,
    ) -> u32 {
        assert!(!candidates.is_empty(), "routing needs a candidate");
        let at = |pos: usize| view.snapshot(candidates[pos]);
        let n = candidates.len();
        // Every instance ranked is a candidate (the candidates are drawn from them, ids
        // ascending, and are as many): a ranking the view keeps gives the scan's pick.
        let ranked = |r| view.ranked(r).filter(|t| t.len() == n);
        let pos = match &self.policy {
            RoutingPolicy::Load => {
                let start = self.counter % n;
                let best = match ranked(Ranking::Load) {
                    Some(tree) => tree.least_from(start),
                    None => load_scan(start, n, at),
                };
                self.counter = (best + 1) % n;
                best
            }
            RoutingPolicy::RoundRobin => {
                let pos = self.counter % n;
                self.counter = pos + 1;
                pos
            }
            RoutingPolicy::Random => self.rng.random_range(0..n),
            RoutingPolicy::LeastLoaded => match ranked(Ranking::LeastLoaded) {
                Some(tree) => tree.least(),
                None => least_loaded(candidates, view),
            },
            RoutingPolicy::PrefixAffinity => {
                self.prefix.start();
                let mut best = 0;
                let mut best_tokens = 0;
                for (pos, &id) in candidates.iter().enumerate() {
                    let tokens = self.prefix.cached_tokens(request, id, view);
                    if tokens > best_tokens {
                        best = pos;
                        best_tokens = tokens;
                    }
                }
                if best_tokens == 0 {
                    least_loaded(candidates, view)
                } else {
                    best
                }
            }
            RoutingPolicy::AlwaysBusiest => match ranked(Ranking::Busiest) {
                Some(tree) => tree.least(),
                None => busiest(candidates, view),
            },
            RoutingPolicy::Weighted(Weighting::Scorers(set)) => {
                self.scores
                    .pick(set, request, candidates, view, &mut self.prefix)
            }
            RoutingPolicy::Weighted(Weighting::Signals(w)) => {
                let w = *w;
                self.weighted(w, request, candidates, view)
            }
        };
        self.explain_decision(request, candidates, view, pos);
        candidates[pos]
    }

    /// The `weighted` policy's pick: the highest `Σ weight × signal` (first on ties).
    fn weighted<V: ClusterView + ?Sized>(
        &mut self,
        w: RoutingWeights,
        request: &Request,
        candidates: &[u32],
        view: &V,
    ) -> usize {
        let n = candidates.len();
        let at = |pos: usize| view.snapshot(candidates[pos]);
        let max_waiting = (0..n).map(|p| at(p).waiting).max().unwrap_or(0);
        let max_running = (0..n).map(|p| at(p).running).max().unwrap_or(0);
        let inverse = |x: usize, max: usize| {
            if max == 0 {
                1.0
            } else {
                1.0 - x as f64 / max as f64
            }
        };
        self.prefix.start();
        let mut best = 0;
        let mut best_score = f64::NEG_INFINITY;
        for (pos, &id) in candidates.iter().enumerate() {
            let s = view.snapshot(id);
            let kv_free = 1.0 - s.kv_blocks_used as f64 / s.kv_blocks_total.max(1) as f64;
            let prefix = if w.prefix > 0.0 {
                f64::from(self.prefix.cached_tokens(request, id, view))
                    / f64::from(request.input_toks.max(1))
            } else {
                0.0
            };
            let parts = [
                w.queue * inverse(s.waiting, max_waiting),
                w.running * inverse(s.running, max_running),
                w.kv * kv_free,
                w.prefix * prefix,
            ];
            let score = parts[0] + parts[1] + parts[2] + parts[3];
            if let Some(ex) = &mut self.explain {
                if pos == 0 {
                    ex.start(WEIGHTED_PARTS);
                }
                ex.push(id, parts);
            }
            if score > best_score {
                best = pos;
                best_score = score;
            }
        }
        best
    }

    /// Fills the explanation of the decision that picked `candidates[chosen]`, if asked.
    fn explain_decision<V: ClusterView + ?Sized>(
        &mut self,
        request: &Request,
        candidates: &[u32],
        view: &V,
        chosen: usize,
    ) {
        let Some(ex) = &mut self.explain else { return };
        let load = |id: u32| {
            let s = view.snapshot(id);
            -((s.waiting + s.running) as f64)
        };
        match &self.policy {
            RoutingPolicy::Weighted(Weighting::Signals(_)) => {}
            RoutingPolicy::Weighted(Weighting::Scorers(set)) => {
                ex.start(set.scorers().iter().map(|(s, _)| s.name()));
                let (n, parts) = (candidates.len(), &self.scores.contributions);
                for (pos, &id) in candidates.iter().enumerate() {
                    ex.push(id, parts.iter().skip(pos).step_by(n).copied());
                }
            }
            RoutingPolicy::Load => {
                ex.start(["load-score"]);
                for &id in candidates {
                    ex.push(id, [-load_score(&view.snapshot(id))]);
                }
            }
            RoutingPolicy::LeastLoaded => {
                ex.start(["load"]);
                for &id in candidates {
                    ex.push(id, [load(id)]);
                }
            }
            RoutingPolicy::PrefixAffinity => {
                self.prefix.start();
                ex.start(["cached-tokens"]);
                for &id in candidates {
                    let tokens = self.prefix.cached_tokens(request, id, view);
                    ex.push(id, [f64::from(tokens)]);
                }
                // The policy falls back to the least loaded when no instance caches any of
                // the prompt (the ranking is made only by `finish`, below).
                if ex.top_score() <= 0.0 {
                    ex.start(["load"]);
                    for &id in candidates {
                        ex.push(id, [load(id)]);
                    }
                }
            }
            RoutingPolicy::RoundRobin | RoutingPolicy::Random | RoutingPolicy::AlwaysBusiest => {
                ex.start(["effective-load"]);
                for &id in candidates {
                    ex.push(id, [-(view.snapshot(id).effective_load() as f64)]);
                }
            }
        }
        ex.finish(chosen);
    }
}

/// The parts of the `weighted` policy's score.
const WEIGHTED_PARTS: [&str; 4] = ["queue", "running", "kv", "prefix"];

/// LLMServingSim's `LOAD` score: `(4·waiting + running) / max_num_seqs`, raw when unlimited.
fn load_score(s: &InstanceSnapshot) -> f64 {
    let raw = (4 * s.waiting + s.running) as f64;
    match s.max_num_seqs {
        Some(m) if m > 0 => raw / f64::from(m),
        _ => raw,
    }
}

/// `LOAD`'s scan of `n` candidates (`at` gives the snapshot at a position) from position
/// `start`: the first strictly lower score wins.
fn load_scan(start: usize, n: usize, at: impl Fn(usize) -> InstanceSnapshot) -> usize {
    let mut best = start;
    let mut best_score = load_score(&at(start));
    for k in 1..n {
        let pos = (start + k) % n;
        let score = load_score(&at(pos));
        if score < best_score {
            best = pos;
            best_score = score;
        }
    }
    best
}

/// Position of the candidate with the fewest waiting + running requests, then the fewest
/// used KV blocks, then the lowest id.
fn least_loaded<V: ClusterView + ?Sized>(candidates: &[u32], view: &V) -> usize {
    let key = |pos: usize| {
        let s = view.snapshot(candidates[pos]);
        (s.waiting + s.running, s.kv_blocks_used)
    };
    (0..candidates.len())
        .min_by_key(|&pos| key(pos))
        .expect("candidates are not empty")
}

/// Position of the candidate with the highest effective load, the first (lowest id) on ties.
fn busiest<V: ClusterView + ?Sized>(candidates: &[u32], view: &V) -> usize {
    let mut best = 0;
    let mut best_load = view.snapshot(candidates[0]).effective_load();
    for (pos, &id) in candidates.iter().enumerate().skip(1) {
        let load = view.snapshot(id).effective_load();
        if load > best_load {
            best = pos;
            best_load = load;
        }
    }
    best
}

/// The prompt's block hashes for each block size met while routing one request, computed
/// once per request and size into reused buffers.
#[derive(Debug, Default)]
struct PrefixScratch {
    /// Routing call the entries were filled for.
    call: u64,
    entries: Vec<HashEntry>,
    bytes: Vec<u8>,
}

#[derive(Debug)]
struct HashEntry {
    block_size: u32,
    call: u64,
    /// The request `hashes` are of.
    of: HashedFor,
    hashes: Vec<u64>,
}

impl PrefixScratch {
    /// Starts a new request: hashes of the previous one are stale.
    fn start(&mut self) {
        self.call += 1;
    }

    /// The hashes computed for `request` at `block_size`, if any (else empty).
    fn hashes_of(&self, request: &Request, block_size: u32) -> &[u64] {
        let of = hashed_for(request);
        let entry = self.entries.iter().find(|e| e.block_size == block_size);
        entry.filter(|e| e.of == of).map_or(&[], |e| &e.hashes)
    }

    /// Prompt tokens of `request` the instance's prefix cache holds: the longest cached run
    /// of leading prompt blocks, leaving at least the last prompt token to compute.
    fn cached_tokens<V: ClusterView + ?Sized>(
        &mut self,
        request: &Request,
        id: u32,
        view: &V,
    ) -> u32 {
        let s = view.snapshot(id);
        if !s.prefix_caching || !request.has_token_ids() {
            return 0;
        }
        let bs = s.block_size;
        let max_blocks = (request.input_toks.saturating_sub(1) / bs) as usize;
        if max_blocks == 0 {
            return 0;
        }
        let call = self.call;
        let index = match self.entries.iter().position(|e| e.block_size == bs) {
            Some(i) => i,
            None => {
                self.entries.push(HashEntry {
                    block_size: bs,
                    call: 0,
                    of: hashed_for(request),
                    hashes: Vec::new(),
                });
                self.entries.len() - 1
            }
        };
        let entry = &mut self.entries[index];
        if entry.call != call {
            let end = max_blocks * bs as usize;
            request_block_hashes(request, bs, end, &mut entry.hashes, &mut self.bytes);
            (entry.call, entry.of) = (call, hashed_for(request));
        }
        view.cached_prefix_blocks(id, &entry.hashes) as u32 * bs
    }
}
