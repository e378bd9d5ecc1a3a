//! Weighted routing as a sum of named scorers (BLIS's `--routing-scorers`), and the
//! router-side prefix index the `prefix-affinity` scorer keeps.
//!
//! Each scorer gives every candidate a score in [0, 1], higher meaning a better target; the
//! router sums `weight × clamp(score, 0, 1)` with the weights normalised to sum to 1, and picks
//! the highest sum, the lowest instance id on exact ties (BLIS draws among exact ties from its
//! router stream; we keep this project's rule, so that a run does not depend on the draw).
//!
//! The scorers and their normalisation are BLIS's (`sim/routing_scorers.go`,
//! `routing_prefix_scorer.go`, `routing_precise_prefix_scorer.go`):
//! - `prefix-affinity`: leading prompt blocks found in a router-side LRU index of the blocks
//!   of the prompts the router sent to the instance (10,000 blocks per instance), over the
//!   prompt's full blocks. The index learns from the router's own decisions, never from the
//!   instances, so it is as fresh as the router.
//! - `precise-prefix-cache`: leading prompt blocks in the instance's real prefix cache, as the
//!   prefix signal shows it (fresh or delayed, `--cache-signal-delay`), min-max normalised
//!   (most → 1, least → 0, all equal → 1).
//! - `queue-depth`: waiting requests, min-max normalised, fewer is better (all equal → 1).
//! - `kv-utilization`: `1 − used KV blocks / KV blocks`.
//! - `load-balance`: `1 / (1 + effective load)`, effective load = waiting + running +
//!   in flight ([`InstanceSnapshot::effective_load`]).
//! - `running-requests`: running requests, min-max normalised, fewer is better.
//! - `active-requests`: in-flight requests, `(max − n) / max`; 0 in flight scores 1 (all
//!   equal and non-zero → 0, as llm-d's active-request scorer).
//! - `vllm-dp`: vLLM's data-parallel balancer, `4·waiting + running`, inverted min-max.
//! - `load-aware`: llm-d's load-aware scorer, `0.5 · (1 − min(waiting, 128) / 128)`: 0.5 for
//!   an empty queue, 0 from 128 waiting on (its range is [0, 0.5] by design).
//! - `no-hit-lru`: spreads cold requests. A request is warm when some candidate's prefix
//!   cache (through the prefix signal, as `precise-prefix-cache` sees it) holds its first
//!   block: every candidate then scores 0.5 (neutral). A cold request ranks the candidates
//!   the router never sent a cold request to first (in id order), then the others from the
//!   least to the most recently sent one; rank `r` of `n` scores `1 − r / (n − 1)` (a lone
//!   candidate 1). The instance a cold request is routed to becomes the most recent. (BLIS
//!   also forgets instances missing from a request's candidates, which matters only when
//!   instances come and go; here they keep their place.)
//!
//! BLIS has no scorer over the recent statistics its snapshot carries; these four are ours,
//! each reading one signal of the snapshot (so each as stale as `--signal-refresh` makes
//! it), with BLIS's min-max rule:
//! - `recent-ttft`: the instance's recent time to first token, inverted min-max (an instance
//!   that has finished nothing yet reads 0, and so scores as the fastest).
//! - `recent-tpot`: its recent time per output token, likewise.
//! - `estimated-wait`: its estimated wait (recent queueing delay), likewise.
//! - `cache-hit-rate`: its recent prefix-cache hit rate, in [0, 1] as is (higher better).
//!
//! Two more of ours read KV offloading (`--kv-cpu-blocks`), both with the KV signal:
//! - `cpu-kv-utilization`: 1 − the CPU tier's used / all blocks (an instance without the
//!   tier scores 1).
//! - `transfer-queue`: transfers queued or on the instance's GPU-CPU link, inverted min-max.
//! - `pending-offloads`, `pending-reloads`: of those, the offloads and the reloads, likewise.

use super::{ClusterView, InstanceSnapshot, PrefixScratch};
use crate::config::{RoutingSpecError, WeightBound};
use crate::workload::Request;
use hashbrown::HashTable;
use hashbrown::hash_table::Entry;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// One scorer of weighted routing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scorer {
    /// Router-side LRU index of the prompt blocks it routed (synchronous).
    PrefixAffinity,
    /// The instance's real prefix cache, through the prefix signal.
    PrecisePrefixCache,
    /// Waiting requests, min-max normalised.
    QueueDepth,
    /// `1 − KV utilisation`.
    KvUtilization,
    /// `1 / (1 + effective load)`.
    LoadBalance,
    /// Running requests, min-max normalised.
    RunningRequests,
    /// In-flight requests, max normalised.
    ActiveRequests,
    /// vLLM's DP balancer: `4·waiting + running`, inverted min-max.
    VllmDp,
    /// llm-d's load-aware scorer: `0.5 · (1 − min(waiting, 128) / 128)`.
    LoadAware,
    /// Cold requests to the least recently used instances; warm requests neutral.
    NoHitLru,
    /// Recent time to first token, inverted min-max.
    RecentTtft,
    /// Recent time per output token, inverted min-max.
    RecentTpot,
    /// Estimated wait (recent queueing delay), inverted min-max.
    EstimatedWait,
    /// Recent prefix-cache hit rate, as is.
    CacheHitRate,
    /// 1 − the CPU tier's KV utilisation (KV offloading).
    CpuKvUtilization,
    /// Transfers on the GPU-CPU link (KV offloading), inverted min-max.
    TransferQueue,
    /// Offloads pending on that link, inverted min-max.
    PendingOffloads,
    /// Reloads pending on that link, inverted min-max.
    PendingReloads,
}

impl Scorer {
    /// Every scorer, in the order their names are listed.
    pub const ALL: [Scorer; 18] = [
        Scorer::PrefixAffinity,
        Scorer::PrecisePrefixCache,
        Scorer::QueueDepth,
        Scorer::KvUtilization,
        Scorer::LoadBalance,
        Scorer::RunningRequests,
        Scorer::ActiveRequests,
        Scorer::VllmDp,
        Scorer::LoadAware,
        Scorer::NoHitLru,
        Scorer::RecentTtft,
        Scorer::RecentTpot,
        Scorer::EstimatedWait,
        Scorer::CacheHitRate,
        Scorer::CpuKvUtilization,
        Scorer::TransferQueue,
        Scorer::PendingOffloads,
        Scorer::PendingReloads,
    ];

    /// The scorer's name, as `--routing-scorers` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Scorer::PrefixAffinity => "prefix-affinity",
            Scorer::PrecisePrefixCache => "precise-prefix-cache",
            Scorer::QueueDepth => "queue-depth",
            Scorer::KvUtilization => "kv-utilization",
            Scorer::LoadBalance => "load-balance",
            Scorer::RunningRequests => "running-requests",
            Scorer::ActiveRequests => "active-requests",
            Scorer::VllmDp => "vllm-dp",
            Scorer::LoadAware => "load-aware",
            Scorer::NoHitLru => "no-hit-lru",
            Scorer::RecentTtft => "recent-ttft",
            Scorer::RecentTpot => "recent-tpot",
            Scorer::EstimatedWait => "estimated-wait",
            Scorer::CacheHitRate => "cache-hit-rate",
            Scorer::CpuKvUtilization => "cpu-kv-utilization",
            Scorer::TransferQueue => "transfer-queue",
            Scorer::PendingOffloads => "pending-offloads",
            Scorer::PendingReloads => "pending-reloads",
        }
    }
}

impl FromStr for Scorer {
    type Err = RoutingSpecError;

    fn from_str(s: &str) -> Result<Scorer, RoutingSpecError> {
        Scorer::ALL
            .into_iter()
            .find(|sc| sc.name() == s)
            .ok_or_else(|| {
                let names = Scorer::ALL.iter().map(|s| s.name()).collect();
                RoutingSpecError::unknown("scorer", s, names)
            })
    }
}

/// The scorers of weighted routing and their weights, as given (`name:weight,...`); the
/// weights are normalised to sum to 1 when scoring. A bundle writes them BLIS's way, a list
/// of `{name, weight}` (also `{name: weight}` or the flag's text); they are written as that
/// list.
#[derive(Debug, Clone, PartialEq)]
pub struct ScorerSet {
    scorers: Vec<(Scorer, f64)>,
}

/// One scorer of a bundle's list, BLIS's `{name, weight}`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScorerEntry {
    name: String,
    weight: f64,
}

impl Serialize for ScorerSet {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let entries: Vec<ScorerEntry> = (self.scorers.iter())
            .map(|&(s, weight)| ScorerEntry {
                name: s.name().to_owned(),
                weight,
            })
            .collect();
        entries.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ScorerSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ScorerSet, D::Error> {
        d.deserialize_any(ScorerSetVisitor)
    }
}

struct ScorerSetVisitor;

impl<'de> serde::de::Visitor<'de> for ScorerSetVisitor {
    type Value = ScorerSet;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("scorers: a list of {name, weight}, a mapping name: weight, or name:weight,...")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ScorerSet, E> {
        v.parse().map_err(E::custom)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<ScorerSet, A::Error> {
        let mut pairs = Vec::new();
        while let Some(e) = seq.next_element::<ScorerEntry>()? {
            pairs.push((e.name, e.weight));
        }
        ScorerSet::from_pairs(pairs).map_err(serde::de::Error::custom)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<ScorerSet, A::Error> {
        let mut pairs = Vec::new();
        while let Some((name, weight)) = map.next_entry::<String, f64>()? {
            pairs.push((name, weight));
        }
        ScorerSet::from_pairs(pairs).map_err(serde::de::Error::custom)
    }
}

impl ScorerSet {
    /// BLIS's default profile (llm-d's): `precise-prefix-cache:2,queue-depth:1,kv-utilization:1`.
    pub fn blis_default() -> ScorerSet {
        ScorerSet {
            scorers: vec![
                (Scorer::PrecisePrefixCache, 2.0),
                (Scorer::QueueDepth, 1.0),
                (Scorer::KvUtilization, 1.0),
            ],
        }
    }

    /// The scorers and their weights as given.
    pub fn scorers(&self) -> &[(Scorer, f64)] {
        &self.scorers
    }

    /// Whether `scorer` is in the set.
    pub fn has(&self, scorer: Scorer) -> bool {
        self.scorers.iter().any(|&(s, _)| s == scorer)
    }
}

impl fmt::Display for ScorerSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, (s, w)) in self.scorers.iter().enumerate() {
            if k > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}:{w}", s.name())?;
        }
        Ok(())
    }
}

/// Parses `name:weight,...`: known names, each at most once, weights finite and positive.
impl FromStr for ScorerSet {
    type Err = RoutingSpecError;

    fn from_str(s: &str) -> Result<ScorerSet, RoutingSpecError> {
        let mut pairs = Vec::new();
        for part in s.split(',').map(str::trim) {
            if part.is_empty() {
                return Err(RoutingSpecError::EmptyEntry {
                    text: s.to_owned(),
                    form: "name:weight",
                });
            }
            let (name, weight) = part
                .split_once(':')
                .ok_or_else(|| RoutingSpecError::NotPair {
                    entry: part.to_owned(),
                    form: "name:weight",
                })?;
            let (name, weight) = (name.trim(), weight.trim());
            let weight: f64 = weight.parse().map_err(|_| RoutingSpecError::NotNumber {
                name: name.to_owned(),
                value: weight.to_owned(),
            })?;
            pairs.push((name.to_owned(), weight));
        }
        ScorerSet::from_pairs(pairs)
    }
}

impl ScorerSet {
    /// The set of `(name, weight)` pairs: known names, each at most once, weights finite
    /// and positive, at least one.
    pub fn from_pairs(pairs: Vec<(String, f64)>) -> Result<ScorerSet, RoutingSpecError> {
        if pairs.is_empty() {
            return Err(RoutingSpecError::NoScorer);
        }
        let mut scorers: Vec<(Scorer, f64)> = Vec::new();
        for (name, weight) in pairs {
            let scorer: Scorer = name.parse()?;
            if !(weight.is_finite() && weight > 0.0) {
                return Err(RoutingSpecError::BadWeight {
                    name,
                    value: weight,
                    bound: WeightBound::Positive,
                });
            }
            if scorers.iter().any(|&(s, _)| s == scorer) {
                return Err(RoutingSpecError::Twice {
                    kind: "scorer",
                    name,
                });
            }
            scorers.push((scorer, weight));
        }
        Ok(ScorerSet { scorers })
    }
}

/// Blocks the router-side prefix index remembers per instance (BLIS's default).
pub const PREFIX_INDEX_BLOCKS: usize = 10_000;

/// Waiting requests at which `load-aware` scores 0 (llm-d's default queue threshold).
pub const LOAD_AWARE_QUEUE_THRESHOLD: usize = 128;

/// What weighted scoring reuses from one request to the next, so that routing allocates
/// nothing once warm.
#[derive(Debug, Default)]
pub struct ScoreScratch {
    snaps: Vec<InstanceSnapshot>,
    raw: Vec<f64>,
    total: Vec<f64>,
    /// Router-side prefix index, per instance id (grown on first use).
    index: Vec<LruBlocks>,
    hashes: Vec<u64>,
    /// The block size `hashes` were computed at for the request being routed.
    hashed_at: Option<u32>,
    /// The request `hashes` are of (kept past its decision, for the instance it goes to).
    hashed_for: Option<super::HashedFor>,
    bytes: Vec<u8>,
    /// Whether [`ScoreScratch::pick`] keeps each scorer's contributions (decision traces).
    pub(super) explain: bool,
    /// Each scorer's weighted contribution to each candidate's score, scorer after scorer.
    pub(super) contributions: Vec<f64>,
    /// `no-hit-lru`: the instances cold requests were sent to, most recent first.
    cold_order: Vec<u32>,
    /// `no-hit-lru`: whether the request being routed is cold.
    cold: bool,
}

/// `load-aware`'s score of an instance with `waiting` requests waiting.
fn load_aware(waiting: usize) -> f64 {
    let clamped = waiting.min(LOAD_AWARE_QUEUE_THRESHOLD);
    0.5 * (1.0 - clamped as f64 / LOAD_AWARE_QUEUE_THRESHOLD as f64)
}

/// Min-max normalisation of `raw` in place: `lower_better` maps the least to 1 and the most
/// to 0, otherwise the most to 1; all equal → 1.
fn min_max(raw: &mut [f64], lower_better: bool) {
    let min = raw.iter().copied().fold(f64::INFINITY, f64::min);
    let max = raw.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    for x in raw.iter_mut() {
        *x = if max == min {
            1.0
        } else if lower_better {
            (max - *x) / (max - min)
        } else {
            (*x - min) / (max - min)
        };
    }
}

impl ScoreScratch {
    /// The position among `candidates` of the best target for `request` under `set`.
    pub(super) fn pick<V: ClusterView + ?Sized>(
        &mut self,
        set: &ScorerSet,
        request: &Request,
        candidates: &[u32],
        view: &V,
        prefix: &mut PrefixScratch,
    ) -> usize {
        let n = candidates.len();
        self.snaps.clear();
        self.snaps
            .extend(candidates.iter().map(|&id| view.snapshot(id)));
        self.total.clear();
        self.total.resize(n, 0.0);
        let sum: f64 = set.scorers.iter().map(|&(_, w)| w).sum();
        prefix.start();
        self.hashed_at = None;
        self.contributions.clear();
        for &(scorer, weight) in &set.scorers {
            self.raw_scores(scorer, request, candidates, view, prefix);
            for (t, &s) in self.total.iter_mut().zip(&self.raw) {
                let part = weight / sum * s.clamp(0.0, 1.0);
                *t += part;
                if self.explain {
                    self.contributions.push(part);
                }
            }
        }
        let mut best = 0;
        for pos in 1..n {
            if self.total[pos] > self.total[best] {
                best = pos;
            }
        }
        if set.has(Scorer::PrefixAffinity) {
            self.record_prefix(request, candidates[best], self.snaps[best].block_size);
        }
        if set.has(Scorer::NoHitLru) && self.cold {
            self.note_cold_target(candidates[best]);
        }
        best
    }

    /// `scorer`'s normalised score of each candidate (for tests).
    pub fn scores_of<V: ClusterView + ?Sized>(
        &mut self,
        scorer: Scorer,
        request: &Request,
        candidates: &[u32],
        view: &V,
    ) -> Vec<f64> {
        self.snaps.clear();
        self.snaps
            .extend(candidates.iter().map(|&id| view.snapshot(id)));
        self.hashed_at = None;
        let mut prefix = PrefixScratch::default();
        prefix.start();
        self.raw_scores(scorer, request, candidates, view, &mut prefix);
        self.raw.clone()
    }

    /// Fills `self.raw` with `scorer`'s normalised score of each candidate.
    fn raw_scores<V: ClusterView + ?Sized>(
        &mut self,
        scorer: Scorer,
        request: &Request,
        candidates: &[u32],
        view: &V,
        prefix: &mut PrefixScratch,
    ) {
        self.raw.clear();
        let (snaps, raw) = (&self.snaps, &mut self.raw);
        match scorer {
            Scorer::PrefixAffinity => {
                for (pos, &id) in candidates.iter().enumerate() {
                    let s = self.affinity(request, id, self.snaps[pos].block_size);
                    self.raw.push(s);
                }
            }
            Scorer::PrecisePrefixCache => {
                for &id in candidates {
                    raw.push(f64::from(prefix.cached_tokens(request, id, view)));
                }
                min_max(raw, false);
            }
            Scorer::QueueDepth => {
                raw.extend(snaps.iter().map(|s| s.waiting as f64));
                min_max(raw, true);
            }
            Scorer::KvUtilization => {
                raw.extend(snaps.iter().map(|s| 1.0 - s.kv_utilization()));
            }
            Scorer::LoadBalance => {
                raw.extend(
                    snaps
                        .iter()
                        .map(|s| 1.0 / (1.0 + s.effective_load() as f64)),
                );
            }
            Scorer::RunningRequests => {
                raw.extend(snaps.iter().map(|s| s.running as f64));
                min_max(raw, true);
            }
            Scorer::ActiveRequests => {
                let max = snaps.iter().map(|s| s.in_flight).max().unwrap_or(0);
                raw.extend(snaps.iter().map(|s| {
                    if s.in_flight == 0 || max == 0 {
                        1.0
                    } else {
                        (max - s.in_flight) as f64 / max as f64
                    }
                }));
            }
            Scorer::VllmDp => {
                raw.extend(snaps.iter().map(|s| (4 * s.waiting + s.running) as f64));
                min_max(raw, true);
            }
            Scorer::LoadAware => raw.extend(snaps.iter().map(|s| load_aware(s.waiting))),
            Scorer::NoHitLru => self.no_hit_lru(request, candidates, view, prefix),
            Scorer::RecentTtft => {
                raw.extend(snaps.iter().map(|s| s.recent_ttft_ns as f64));
                min_max(raw, true);
            }
            Scorer::RecentTpot => {
                raw.extend(snaps.iter().map(|s| s.recent_tpot_ns as f64));
                min_max(raw, true);
            }
            Scorer::EstimatedWait => {
                raw.extend(snaps.iter().map(|s| s.estimated_wait_ns as f64));
                min_max(raw, true);
            }
            Scorer::CacheHitRate => raw.extend(snaps.iter().map(|s| s.cache_hit_rate)),
            Scorer::CpuKvUtilization => {
                raw.extend(snaps.iter().map(|s| 1.0 - s.cpu_kv_utilization()));
            }
            Scorer::TransferQueue => {
                raw.extend(snaps.iter().map(|s| s.transfer_queue as f64));
                min_max(raw, true);
            }
            Scorer::PendingOffloads => {
                raw.extend(snaps.iter().map(|s| s.pending_offloads as f64));
                min_max(raw, true);
            }
            Scorer::PendingReloads => {
                raw.extend(snaps.iter().map(|s| s.pending_reloads as f64));
                min_max(raw, true);
            }
        }
    }

    /// Fills `self.raw` with `no-hit-lru`'s scores (see the module docs) and notes whether
    /// the request is cold.
    fn no_hit_lru<V: ClusterView + ?Sized>(
        &mut self,
        request: &Request,
        candidates: &[u32],
        view: &V,
        prefix: &mut PrefixScratch,
    ) {
        self.cold = !candidates
            .iter()
            .any(|&id| prefix.cached_tokens(request, id, view) > 0);
        let n = candidates.len();
        if !self.cold || n == 1 {
            let score = if self.cold { 1.0 } else { 0.5 };
            self.raw.extend(std::iter::repeat_n(score, n));
            return;
        }
        let order = &self.cold_order;
        let recency = |id: u32| order.iter().position(|&o| o == id);
        let never = candidates
            .iter()
            .filter(|&&id| recency(id).is_none())
            .count();
        for (pos, &id) in candidates.iter().enumerate() {
            let rank = match recency(id) {
                None => candidates[..pos]
                    .iter()
                    .filter(|&&c| recency(c).is_none())
                    .count(),
                Some(r) => {
                    let older = candidates
                        .iter()
                        .filter(|&&c| recency(c).is_some_and(|rc| rc > r));
                    never + older.count()
                }
            };
            self.raw.push(1.0 - rank as f64 / (n - 1) as f64);
        }
    }

    /// `no-hit-lru`: a cold request went to `id`, now the most recently used.
    fn note_cold_target(&mut self, id: u32) {
        if let Some(k) = self.cold_order.iter().position(|&o| o == id) {
            self.cold_order.remove(k);
        }
        self.cold_order.insert(0, id);
    }

    /// Hashes of the full blocks of `request`'s prompt at `block_size` into `self.hashes`.
    fn prompt_hashes(&mut self, request: &Request, block_size: u32) {
        if self.hashed_at == Some(block_size) {
            return;
        }
        self.hashed_at = Some(block_size);
        self.hashed_for = Some(super::hashed_for(request));
        self.hashes.clear();
        if !request.has_token_ids() || block_size == 0 {
            return;
        }
        let end = request.input_toks as usize;
        crate::scheduler::request_block_hashes(
            request,
            block_size,
            end,
            &mut self.hashes,
            &mut self.bytes,
        );
    }

    /// The hashes [`ScoreScratch::prompt_hashes`] computed for `request` at `block_size`, if
    /// any (else empty).
    pub(super) fn hashes_of(&self, request: &Request, block_size: u32) -> &[u64] {
        let mine = self.hashed_at == Some(block_size)
            && self.hashed_for == Some(super::hashed_for(request));
        if mine { &self.hashes } else { &[] }
    }

    /// `prefix-affinity`'s score of instance `id`: leading prompt blocks in its router-side
    /// index over the prompt's full blocks (0 for a prompt without a full block).
    fn affinity(&mut self, request: &Request, id: u32, block_size: u32) -> f64 {
        self.prompt_hashes(request, block_size);
        if self.hashes.is_empty() {
            return 0.0;
        }
        let Some(lru) = self.index.get(id as usize) else {
            return 0.0;
        };
        let matched = self.hashes.iter().take_while(|h| lru.contains(**h)).count();
        matched as f64 / self.hashes.len() as f64
    }

    /// Records in the router-side index that `id` now holds the prompt's blocks.
    fn record_prefix(&mut self, request: &Request, id: u32, block_size: u32) {
        self.prompt_hashes(request, block_size);
        let i = id as usize;
        if self.index.len() <= i {
            self.index
                .resize_with(i + 1, || LruBlocks::new(PREFIX_INDEX_BLOCKS));
        }
        for k in 0..self.hashes.len() {
            let h = self.hashes[k];
            self.index[i].touch(h);
        }
    }
}

const NIL: u32 = u32::MAX;

/// A fixed-capacity LRU set of block hashes: a table of node ids, found by the hash their node
/// carries, into an arena of doubly linked nodes (most recent at the head). Allocates only
/// while growing to its capacity. A node remembers its table bucket, so that the least recent
/// leaves the table without a probe; and a touch probes the table once, whether it finds the
/// hash or adds it.
#[derive(Debug)]
pub struct LruBlocks {
    capacity: usize,
    lookup: HashTable<u32>,
    nodes: Vec<LruNode>,
    head: u32,
    tail: u32,
}

#[derive(Debug, Clone, Copy)]
struct LruNode {
    hash: u64,
    prev: u32,
    next: u32,
    /// The table bucket holding the node's id.
    bucket: u32,
}

impl LruBlocks {
    /// An empty set remembering at most `capacity` hashes.
    pub fn new(capacity: usize) -> LruBlocks {
        assert!(capacity > 0, "an LRU set needs room");
        LruBlocks {
            capacity,
            lookup: HashTable::new(),
            nodes: Vec::new(),
            head: NIL,
            tail: NIL,
        }
    }

    /// Whether `hash` is in the set (recency unchanged).
    pub fn contains(&self, hash: u64) -> bool {
        let nodes = &self.nodes;
        (self.lookup)
            .find(hash, |&n| nodes[n as usize].hash == hash)
            .is_some()
    }

    /// Hashes in the set.
    pub fn len(&self) -> usize {
        self.lookup.len()
    }

    /// Whether the set holds no hash.
    pub fn is_empty(&self) -> bool {
        self.lookup.is_empty()
    }

    /// Adds `hash` or makes it the most recent, evicting the least recent at capacity.
    pub fn touch(&mut self, hash: u64) {
        self.reserve_entry();
        let nodes = &self.nodes;
        let entry = self.lookup.entry(
            hash,
            |&n| nodes[n as usize].hash == hash,
            |&n| nodes[n as usize].hash,
        );
        let vacant = match entry {
            Entry::Occupied(found) => {
                let node = *found.get();
                self.unlink(node);
                self.push_head(node);
                return;
            }
            Entry::Vacant(vacant) => vacant,
        };
        let full = self.nodes.len() >= self.capacity;
        let node = if full {
            self.tail
        } else {
            self.nodes.len() as u32
        };
        // At capacity the least recent node takes the hash: its id sits in two buckets until
        // its old one is emptied, which moves no entry.
        let bucket = vacant.insert(node).bucket_index() as u32;
        if full {
            let old = self.nodes[node as usize].bucket as usize;
            if let Ok(entry) = self.lookup.get_bucket_entry(old) {
                entry.remove();
            }
            self.unlink(node);
            let n = &mut self.nodes[node as usize];
            (n.hash, n.bucket) = (hash, bucket);
        } else {
            self.nodes.push(LruNode {
                hash,
                prev: NIL,
                next: NIL,
                bucket,
            });
        }
        self.push_head(node);
    }

    /// Makes room in the table for one more entry beside those it holds. A table that has to
    /// grow (or rehash in place) moves its entries, so every node's bucket is read back.
    fn reserve_entry(&mut self) {
        crate::scheduler::kv::reserve_one(
            &mut self.lookup,
            &mut self.nodes,
            |node| node.hash,
            |node, bucket| node.bucket = bucket,
        );
    }

    fn unlink(&mut self, node: u32) {
        let LruNode { prev, next, .. } = self.nodes[node as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.nodes[next as usize].prev = prev;
        }
    }

    fn push_head(&mut self, node: u32) {
        let head = self.head;
        let n = &mut self.nodes[node as usize];
        n.prev = NIL;
        n.next = head;
        if head == NIL {
            self.tail = node;
        } else {
            self.nodes[head as usize].prev = node;
        }
        self.head = node;
    }
}
