//! Per-instance continuous batching with vLLM V1 semantics.
//!
//! Each step ([`Scheduler::schedule`]):
//! 1. **Running requests first**, in admission order: each gets its next prefill chunk or one
//!    decode token, within the step's token budget and the long-prefill threshold. When KV
//!    blocks run out, the most recently admitted running request is preempted (its blocks
//!    freed, its progress dropped: it is recomputed on readmission).
//! 2. **Admission** from the waiting queue in FCFS order, only if nothing was preempted in
//!    this step, while the budget, `max_num_seqs` and free KV blocks allow. A prefix-cache
//!    lookup first skips prompt blocks already cached.
//!
//! [`Scheduler::complete_step`] then applies the step's results at its finish time: first
//! tokens, inter-token gaps, finished requests (which free their blocks).
//!
//! Under async scheduling (`async_scheduling`), vLLM forms each step while the previous one
//! runs: a request arriving during a step, and the place and blocks of a request finishing
//! with one, serve the step after the next (unless nothing else would run).
//!
//! With pipeline parallelism ([`Scheduler::set_pipeline_depth`]) up to `pp` steps are in
//! flight at once and complete in the order they were formed. A request whose token is still
//! in flight has nothing to compute and is skipped (LLMServingSim's and vLLM's `num_new ≤ 0`);
//! a prompt may get its next chunk while the previous one is in flight. Each in-flight step
//! remembers how far it takes each request, so a chunk's completion is judged by its own
//! progress; a request preempted after a step was formed gets nothing from that step.
//!
//! With a lower tier ([`Scheduler::attach_lower_tier`], see [`LowerTier`]) the prefix cache
//! has a second level: indexed blocks are also written down into host or CXL memory, and an
//! admission's prefix hit continues there; the recalled KV is loaded back into device blocks
//! and its load time is reported with the step ([`Scheduler::last_recall_ns`]).
//!
//! Under prefill/decode disaggregation (`pd`), a prefill instance's scheduler hands each
//! request off when its prompt completes, holding its blocks until the KV transfer ends, and
//! a decode instance's scheduler receives requests whose prompt KV arrived.

mod cancel;
mod completions;
mod core;
pub mod itl;
pub mod kv;
pub mod kv_offload;
pub mod lower_tier;
mod pd;
pub mod request;
pub mod sglang;
mod stretch;
mod warm;
mod watch;
pub use warm::WARM_ABOVE;
pub(crate) use warm::line as warm_line;
pub(crate) use warm::value as warm_value;

pub use cancel::Cancelled;
pub use completions::Completions;
pub use core::{Core, Engine};
pub use kv::{
    BlockHashMap, BlockId, BlockPool, PassThroughHasher, block_hashes, block_hashes_with,
    request_block_hashes, request_block_hashes_after,
};
pub use kv_offload::{CpuTierSize, KvOffloadSpec, LinkStats, OffloadLoad, TransferLink};
pub use lower_tier::{LowerPool, LowerTier, SharedLowerPool, TierMemory};
use pd::PullStart;
pub use pd::{Handoff, ReceivedKv};
use std::rc::Rc;
pub use watch::SchedDecision;

use crate::Nanos;
use crate::latency::{BatchItem, DecodeLead};
use crate::workload::Request;
use request::{Phase, RunningRequest};
use serde::Serialize;

/// How an instance orders its waiting queue (`--scheduler`). Ties are broken by arrival
/// time, then request id.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    strum::EnumIter,
    strum::EnumMessage,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum QueueOrder {
    /// First come, first served (vLLM's default; a preempted request goes back to the head).
    #[default]
    Fcfs,
    /// Most urgent first (highest control-plane priority).
    PriorityFcfs,
    /// Shortest prompt first.
    Sjf,
    /// Least urgent first (pathological, for testing).
    ReversePriority,
}

impl crate::choice::Choice for QueueOrder {
    const WHAT: &'static str = "scheduler";
    fn name(&self) -> &'static str {
        self.into()
    }
}

/// Which running request a scheduler preempts when KV blocks run out (`--preemption-policy`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    strum::EnumIter,
    strum::EnumMessage,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum PreemptionOrder {
    /// The most recently admitted (vLLM's default; BLIS's `fcfs`).
    #[default]
    #[strum(to_string = "lifo", serialize = "fcfs")]
    Lifo,
    /// The least urgent (lowest priority), the most recently admitted among equals.
    Priority,
    /// SGLang's retraction: fewest outputs, then longest prompt, first. How SGLang instances
    /// preempt, never a choice of the flags or a bundle (left out of the names).
    #[strum(disabled)]
    Retract,
}

impl crate::choice::Choice for PreemptionOrder {
    const WHAT: &'static str = "preemption policy";
    fn name(&self) -> &'static str {
        self.into()
    }
}

/// Scheduler limits and switches of one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// Most requests running at once; `None` is unlimited.
    pub max_num_seqs: Option<u32>,
    /// Token budget of one step.
    pub max_num_batched_tokens: u32,
    /// Per-request cap on tokens in one step; 0 disables it.
    pub long_prefill_token_threshold: u32,
    /// Split prompts over several steps; when off, a prompt that does not fit the remaining
    /// budget blocks the queue until it does.
    pub enable_chunked_prefill: bool,
    /// Admit a request only if its whole current sequence fits in free KV blocks.
    pub reserve_full_isl: bool,
    /// Reuse cached KV blocks of identical prompt prefixes.
    pub enable_prefix_caching: bool,
    /// Tokens per KV block.
    pub block_size: u32,
    /// vLLM's asynchronous scheduling: the next step is formed while the current one runs,
    /// so a request arriving during a step can join only the step after the next one, and a
    /// request finishing with a step frees its place and blocks for that one too.
    pub async_scheduling: bool,
}

/// Counters of one instance over a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SchedulerStats {
    /// Preemptions.
    pub preemptions: u64,
    /// Tokens computed again after preemption.
    pub recomputed_tokens: u64,
    /// Prompt tokens looked up in the prefix cache (once per request).
    pub prefix_requested_tokens: u64,
    /// Of those, tokens found in the device-side cache.
    pub prefix_hit_tokens: u64,
    /// Of those, tokens found in the lower tier past the device-side hit (once per request).
    pub lower_hit_tokens: u64,
    /// Tokens recalled from the lower tier (on every admission, readmissions included).
    pub recalled_tokens: u64,
    /// Their KV bytes.
    pub recalled_bytes: u64,
    /// Time spent loading them, added to the steps that admitted them, ns.
    pub recall_ns: u64,
    /// Admissions that overtook a strictly more urgent request queued earlier that is still
    /// waiting (counted when anomaly detection is on, [`Scheduler::watch_anomalies`]).
    pub priority_inversions: u64,
    /// Prompt blocks a prefix lookup needed that the device or the lower tier had evicted
    /// within the thrash window (counted when anomaly detection is on).
    pub kv_thrash_blocks: u64,
    /// What the KV offload link carried (`None` unless KV offloading).
    pub kv_offload: Option<LinkStats>,
}

/// A scheduled request of the current step.
#[derive(Debug, Clone, Copy)]
struct Scheduled {
    slot: u32,
    new_tokens: u32,
    /// The request's computed tokens once this step is done.
    upto: u32,
    /// The request's preemption count when the step was formed.
    epoch: u32,
}

/// The tokens one completed step computed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepTokens {
    /// Prompt tokens computed (prefill chunks, and recomputation after a preemption).
    pub prompt: u64,
    /// Tokens generated (one per request whose next token the step produced).
    pub generated: u64,
}

/// A step in flight while later ones are formed (pipeline parallelism).
#[derive(Debug, Default)]
struct InFlight {
    step: Vec<Scheduled>,
    items: Vec<BatchItem>,
}

/// The scheduler of one instance.
///
/// Its fields are laid out by when a step reads them (`repr(C)`, from a cache line's start):
/// with hundreds of instances taking turns, an instance's state is cold at each of its steps,
/// and every line a step touches is a miss of its own. First what the warming and every step
/// read (the stretch, the step, the slots, the step times, the counters and switches of the
/// step being formed, the pool's stack: `HOT_BYTES`), then what steps that finish requests
/// read, then admissions, then what only some runs or calls read (pipelines, P/D, counters).
#[derive(Debug)]
#[repr(C, align(64))]
pub struct Scheduler {
    // Read by the warming and by every step.
    /// The current decode stretch (see `stretch.rs`).
    stretch: stretch::Stretch,
    step_items: Vec<BatchItem>,
    step: Vec<Scheduled>,
    slots: Vec<Option<RunningRequest>>,
    /// The finish time of every completed step, in completion order: a request's token
    /// times are indices into it ([`RunningRequest::note_token`]).
    step_finish_ns: itl::StepTimes,
    /// Steps formed so far.
    formed: u64,
    /// Most steps in flight at once (the pipeline depth, `pp`; 1 without pipelining).
    depth: usize,
    config: SchedulerConfig,
    running: Vec<u32>,
    waiting: std::collections::VecDeque<u32>,
    /// KV tokens a prefill instance sends in the last formed step (see
    /// [`Scheduler::last_kv_send_tokens`]).
    step_kv_send_tokens: u64,
    /// Tokens recalled from the lower tier by the step being formed, and their load time.
    step_recall_tokens: u64,
    step_recall_ns: Nanos,
    /// What the step completed last computed: prompt tokens (prefill and recompute work) and
    /// generated tokens.
    last_step_tokens: StepTokens,
    /// Under async scheduling: what the step completed last freed, still held while the next
    /// step is formed.
    freed_late: FreedLate,
    /// Anomaly detection, when on.
    watch: Option<Box<watch::Watch>>,
    /// The lower tier of the prefix cache, if any.
    lower: Option<Box<LowerTier>>,
    /// Slots of cancelled requests still included in a step in flight (see `cancel.rs`).
    cancelled: Vec<u32>,
    /// Requests routed here whose KV cache is still on its way.
    incoming: usize,
    /// vLLM's P/D flow: slots of requests whose prompt KV is being pulled here, and the ids
    /// of those whose pull the step being formed starts (collected by
    /// [`Scheduler::pop_pull_start`]).
    pulling: Vec<u32>,
    /// [`SchedulerStats::prefix_requested_tokens`] and [`SchedulerStats::prefix_hit_tokens`],
    /// which the engine reads at every step end: kept here, among what a step reads, and
    /// put into the counters by [`Scheduler::stats`].
    prefix_requested_tokens: u64,
    prefix_hit_tokens: u64,
    /// Tokens of the last prefix lookup found in the lower tier (past the device hits).
    lower_hit: u32,
    /// Blocks the last prefix lookup found evicted within the thrash window.
    thrash_pending: u32,
    /// A formed step has not completed yet.
    in_flight: bool,
    /// Whether decode-only steps may run as stretches.
    stretches: bool,
    /// A prefill instance: requests leave at the end of their prefill.
    hand_off: bool,
    /// Whether finished requests' records list their inter-token latencies.
    itl_values: bool,
    /// Whether finished requests' records carry their block hashes
    /// ([`Scheduler::hand_on_hashes`]).
    hand_on_hashes: bool,
    /// Waiting-queue order and preemption victim choice.
    order: QueueOrder,
    preemption: PreemptionOrder,
    /// Where [`Core`]'s discriminant goes (see [`Niche`]).
    niche: Niche,
    /// The KV blocks (what a step reads of it first: its stack and free count).
    pool: BlockPool,
    // Read by steps that finish requests.
    /// Scratch of [`Scheduler::complete_step`]: the slots of requests leaving the running set,
    /// and by slot whether it is one of them (the running set is then compacted with one look
    /// per request, not a search of the list).
    leaving: Vec<u32>,
    is_leaving: Vec<bool>,
    /// The emptied block lists of finished requests, for the next admissions (a list grows
    /// with its request, so a reused one rarely grows again).
    spare_blocks: Vec<Vec<BlockId>>,
    free_slots: Vec<u32>,
    /// The inter-token gaps of the requests finished here, pooled by step (see `itl.rs`).
    itl: itl::ItlTally,
    /// The same per SLO group, when the run's report takes them from here.
    itl_cells: Option<Box<itl::ItlCells>>,
    // Read by admissions.
    hit_scratch: Vec<BlockId>,
    /// The decisions of the steps formed since the last [`Scheduler::take_decisions`], when
    /// they are traced.
    decisions: Option<Vec<SchedDecision>>,
    /// Counters (the prefix cache's two are kept among the step's fields, above).
    stats: SchedulerStats,
    // Read by pipelined and P/D runs only.
    /// Slots of requests handed off and not yet collected by [`Scheduler::pop_handoff`].
    handoffs: std::collections::VecDeque<u32>,
    /// Requests handed off whose blocks are still held (KV transfer not finished).
    handed_off: usize,
    /// Pulls started here so far (vLLM's flow): each pull's start order.
    pulls_started: u64,
    pull_starts: std::collections::VecDeque<u64>,
    /// KV blocks the pulls started here will take when their KV lands: a pull starts only
    /// when its prompt's blocks are free beside these (vLLM allocates them as the pull
    /// starts).
    pulled_blocks: usize,
    /// Handed-off requests waiting for a ready decode replica (autoscaled P/D runs).
    held_for_decode: usize,
    /// With `depth > 1`: the steps in flight, oldest first.
    pipeline: std::collections::VecDeque<InFlight>,
    /// With `depth > 1`: the step completed last; buffers of completed steps for reuse.
    completed: InFlight,
    spare: Vec<InFlight>,
}

/// A field of one value in eight bytes: the struct's largest niche, so [`Core`]'s discriminant
/// (read by every call on a core) is stored in it, among the fields every step reads, and not
/// in a line of its own (the counters' `Option`, whose niche it was, sit in a line a step
/// hardly reads; each step at 256 instances paid a miss for it).
#[derive(Debug, Clone, Copy)]
#[repr(u64)]
enum Niche {
    Only = 0,
}

/// The bytes at the start of a [`Scheduler`] that a step reads whatever it does (the fields
/// up to the pool, and the pool's first line).
const HOT_BYTES: usize = std::mem::offset_of!(Scheduler, pool) + 64;

// The step's fields fit in the first eleven cache lines (a field added among them that breaks
// this costs every instance a miss a step at scale).
const _: () = assert!(HOT_BYTES <= 11 * 64);

/// Under async scheduling, vLLM forms a step while the previous one runs: requests that finish
/// with step `k` still hold their places (`max_num_seqs`) and KV blocks when step `k + 1` is
/// formed, and what they free serves step `k + 2` on. The scheduler here forms `k + 1` when
/// `k` completes, so it keeps them until `k + 1` is formed (or found empty).
#[derive(Debug, Default)]
struct FreedLate {
    /// How many requests finished with it.
    requests: usize,
    /// Their KV blocks, each request's last block first.
    blocks: Vec<BlockId>,
}

/// An internal inconsistency: always a bug, never a user error.
#[derive(Debug, thiserror::Error)]
#[error("scheduler invariant broken: {0}")]
pub struct SchedulerBug(String);

impl SchedulerBug {
    /// An invariant broken elsewhere in the simulation, described by `message`.
    pub fn new(message: String) -> SchedulerBug {
        SchedulerBug(message)
    }
}

/// The invariant an audit found broken, described by the message.
impl From<String> for SchedulerBug {
    fn from(message: String) -> SchedulerBug {
        SchedulerBug(message)
    }
}

impl Scheduled {
    fn new(slot: u32, new_tokens: u32) -> Scheduled {
        Scheduled {
            slot,
            new_tokens,
            upto: 0,
            epoch: 0,
        }
    }
}

impl std::ops::AddAssign for SchedulerStats {
    /// Sums the counters (of several instances).
    fn add_assign(&mut self, other: SchedulerStats) {
        self.preemptions += other.preemptions;
        self.recomputed_tokens += other.recomputed_tokens;
        self.prefix_requested_tokens += other.prefix_requested_tokens;
        self.prefix_hit_tokens += other.prefix_hit_tokens;
        self.lower_hit_tokens += other.lower_hit_tokens;
        self.recalled_tokens += other.recalled_tokens;
        self.recalled_bytes += other.recalled_bytes;
        self.recall_ns += other.recall_ns;
        self.priority_inversions += other.priority_inversions;
        self.kv_thrash_blocks += other.kv_thrash_blocks;
        self.kv_offload = match (self.kv_offload, other.kv_offload) {
            (Some(a), Some(b)) => Some(a.merged(b)),
            (a, b) => a.or(b),
        };
    }
}

/// A request taken out of an instance by [`Scheduler::evict`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evicted {
    pub id: u64,
    pub arrival_ns: Nanos,
    pub input_toks: u32,
    pub output_toks: u32,
}

impl Scheduler {
    /// A scheduler over `num_blocks` KV blocks.
    pub fn new(config: SchedulerConfig, num_blocks: u32) -> Scheduler {
        Scheduler {
            config,
            pool: BlockPool::new(num_blocks),
            slots: Vec::new(),
            free_slots: Vec::new(),
            waiting: std::collections::VecDeque::new(),
            running: Vec::new(),
            step: Vec::new(),
            step_items: Vec::new(),
            step_kv_send_tokens: 0,
            hit_scratch: Vec::new(),
            step_finish_ns: itl::StepTimes::default(),
            last_step_tokens: StepTokens::default(),
            prefix_requested_tokens: 0,
            prefix_hit_tokens: 0,
            lower_hit: 0,
            lower: None,
            step_recall_tokens: 0,
            step_recall_ns: 0,
            stats: SchedulerStats::default(),
            niche: Niche::Only,
            hand_off: false,
            handoffs: std::collections::VecDeque::new(),
            handed_off: 0,
            incoming: 0,
            pulling: Vec::new(),
            pulls_started: 0,
            pull_starts: std::collections::VecDeque::new(),
            pulled_blocks: 0,
            held_for_decode: 0,
            formed: 0,
            in_flight: false,
            freed_late: FreedLate::default(),
            depth: 1,
            pipeline: std::collections::VecDeque::new(),
            completed: InFlight::default(),
            spare: Vec::new(),
            order: QueueOrder::Fcfs,
            preemption: PreemptionOrder::Lifo,
            watch: None,
            thrash_pending: 0,
            decisions: None,
            cancelled: Vec::new(),
            itl: itl::ItlTally::default(),
            itl_cells: None,
            itl_values: true,
            hand_on_hashes: false,
            stretches: true,
            stretch: stretch::Stretch::default(),
            leaving: Vec::new(),
            is_leaving: Vec::new(),
            spare_blocks: Vec::new(),
        }
    }

    /// Whether the records of finished requests list their inter-token latencies (on by
    /// default). Off, they are left empty and only pooled ([`Scheduler::take_itl_counts`]): no
    /// work per generated token.
    pub fn keep_itl_values(&mut self, on: bool) {
        self.itl_values = on;
    }

    /// Makes the records of finished requests carry their block hashes
    /// ([`Completions::hashes`]), for the requests they release to start from (off by
    /// default: a copy per finished request no one reads).
    pub fn hand_on_hashes(&mut self) {
        self.hand_on_hashes = true;
    }

    /// Lets go of step finish times no live request names once `steps` are held (1,024
    /// unless set; see `itl.rs`): the inter-token gaps pooled are the same whatever it is.
    pub fn retire_steps_after(&mut self, steps: usize) {
        self.step_finish_ns.retire_after(steps);
    }

    /// The finish times of the completed steps finished requests' records may name.
    pub fn step_times(&self) -> crate::metrics::StepWindow<'_> {
        self.step_finish_ns.window()
    }

    /// Moves the inter-token gaps of every request finished here so far to `out`, leaving
    /// none here.
    pub fn take_itl_counts(&mut self, out: &mut crate::metrics::IntegerCounts) {
        self.itl.drain_into(&self.step_finish_ns, out);
    }

    /// Pools the gaps of the requests finished here per pair of SLO class and tenant of
    /// `classes` too ([`itl::ItlCells`]), for [`Scheduler::take_itl_cells`].
    pub fn pool_itl_by_cell(&mut self, classes: Rc<crate::workload::RequestClasses>) {
        self.itl_cells = Some(Box::new(itl::ItlCells::new(classes)));
    }

    /// Moves the gaps pooled per cell ([`Scheduler::pool_itl_by_cell`]) to `out`, one entry
    /// a cell; none without.
    pub fn take_itl_cells(&mut self, out: &mut [crate::metrics::IntegerCounts]) {
        if let Some(cells) = &mut self.itl_cells {
            cells.drain_into(&self.step_finish_ns, out);
        }
    }

    /// Turns anomaly detection on: priority inversions among admissions, and prefix blocks
    /// needed again within `thrash_window_ns` of their eviction from the device or from the
    /// lower tier (see [`SchedulerStats`]; call it after [`Scheduler::attach_lower_tier`]).
    pub fn watch_anomalies(&mut self, thrash_window_ns: Nanos) {
        self.watch = Some(Box::default());
        self.pool.watch_thrashing(thrash_window_ns);
        if let Some(tier) = &self.lower {
            tier.watch_thrashing(thrash_window_ns);
        }
    }

    /// Turns the noting of admissions and preemptions on, for the decision trace.
    pub fn trace_decisions(&mut self) {
        self.decisions = Some(Vec::new());
    }

    /// The admissions and preemptions noted since the last call, in the order they were
    /// decided (empty unless [`Scheduler::trace_decisions`]).
    pub fn take_decisions(&mut self) -> impl Iterator<Item = SchedDecision> + '_ {
        self.decisions.iter_mut().flat_map(|d| d.drain(..))
    }

    /// Sets how the waiting queue is ordered and which request is preempted first (before
    /// any request is queued).
    pub fn set_policies(&mut self, order: QueueOrder, preemption: PreemptionOrder) {
        self.order = order;
        self.preemption = preemption;
    }

    /// Lets up to `depth` steps be in flight at once (pipeline parallelism with `depth`
    /// stages; 1, the default, is one step at a time). Set before the first step.
    pub fn set_pipeline_depth(&mut self, depth: usize) {
        self.depth = depth.max(1);
        self.pipeline = std::collections::VecDeque::with_capacity(self.depth);
        self.spare = (0..self.depth).map(|_| InFlight::default()).collect();
    }

    /// Steps formed and not completed yet.
    pub fn steps_in_flight(&self) -> usize {
        if self.depth > 1 {
            self.pipeline.len()
        } else {
            usize::from(self.in_flight)
        }
    }

    /// Whether another step may be formed now: fewer than the pipeline depth are in flight.
    pub fn can_form_step(&self) -> bool {
        self.steps_in_flight() < self.depth
    }

    /// The batch of the step completed by the last [`Scheduler::complete_step`], every item
    /// written (see [`Scheduler::written_batch`]).
    pub fn completed_batch(&mut self) -> &[BatchItem] {
        if self.depth > 1 {
            &self.completed.items
        } else {
            self.written_batch()
        }
    }

    /// Gives the prefix cache a lower tier in `pool`, this instance's KV being KV space
    /// `space` there with `kv_bytes_per_token` bytes per token (every layer, head and TP rank).
    /// Instances that share a pool and may hit each other's blocks must use the same space;
    /// others, distinct ones.
    pub fn attach_lower_tier(
        &mut self,
        pool: SharedLowerPool,
        space: u32,
        kv_bytes_per_token: u64,
    ) {
        let block = self.config.block_size;
        self.lower = Some(Box::new(LowerTier::new(
            pool,
            space,
            kv_bytes_per_token,
            block,
        )));
    }

    /// Gives the prefix cache the CPU tier of KV offloading (`spec`) in its private `pool`,
    /// with `kv_bytes_per_token` KV bytes per token (see `kv_offload.rs`).
    pub fn attach_kv_offload(
        &mut self,
        pool: SharedLowerPool,
        kv_bytes_per_token: u64,
        spec: KvOffloadSpec,
    ) {
        let block = self.config.block_size;
        self.lower = Some(Box::new(LowerTier::offload(
            pool,
            kv_bytes_per_token,
            block,
            spec,
        )));
    }

    /// The KV offload link's counters (`None` unless KV offloading).
    pub fn offload_link_stats(&self) -> Option<LinkStats> {
        self.lower.as_deref().and_then(LowerTier::link_stats)
    }

    /// KV offloading's CPU tier occupancy and link queue at `now` (`None` unless KV
    /// offloading); observing changes nothing.
    pub fn offload_load(&self, now: Nanos) -> Option<OffloadLoad> {
        self.lower.as_ref().and_then(|t| t.offload_load(now))
    }

    /// Transfers queued or on the KV offload link at `now` (0 unless KV offloading).
    pub fn transfer_queue_depth(&mut self, now: Nanos) -> usize {
        self.lower
            .as_mut()
            .map_or(0, |t| t.transfer_queue_depth(now))
    }

    /// Time to load what the last [`Scheduler::schedule`] recalled from the lower tier, ns (0
    /// when it recalled nothing): the step takes this much longer than its compute.
    pub fn last_recall_ns(&self) -> Nanos {
        self.step_recall_ns
    }

    /// The configuration.
    pub fn config(&self) -> &SchedulerConfig {
        &self.config
    }

    /// The KV block pool.
    pub fn pool(&self) -> &BlockPool {
        &self.pool
    }

    /// Counters so far.
    pub fn stats(&self) -> SchedulerStats {
        SchedulerStats {
            kv_offload: self.offload_link_stats(),
            prefix_requested_tokens: self.prefix_requested_tokens,
            prefix_hit_tokens: self.prefix_hit_tokens,
            ..self.stats
        }
    }

    /// [`SchedulerStats::prefix_requested_tokens`] and [`SchedulerStats::prefix_hit_tokens`].
    pub fn prefix_tokens(&self) -> (u64, u64) {
        (self.prefix_requested_tokens, self.prefix_hit_tokens)
    }

    /// The batch formed by the last [`Scheduler::schedule`], or by [`Scheduler::form_step`]
    /// once [`Scheduler::written_batch`] wrote it.
    ///
    /// # Panics
    ///
    /// If the stretch members' items of a step formed by [`Scheduler::form_step`] were not
    /// written: a bug of the caller, never a stale batch.
    pub fn last_batch(&self) -> &[BatchItem] {
        assert!(
            self.stretch.items_written(),
            "a batch formed by form_step is read through written_batch"
        );
        &self.step_items
    }

    /// How many items the batch formed last has (written or not).
    pub fn formed_len(&self) -> usize {
        self.step_items.len()
    }

    /// The batch formed last, the stretch members' items written first where they lag
    /// (see `stretch.rs`): what single steps would have formed.
    pub fn written_batch(&mut self) -> &[BatchItem] {
        self.write_member_items();
        &self.step_items
    }

    /// What is known of the last formed batch's first items without reading them (its
    /// stretch members, see [`DecodeLead`]).
    pub fn last_lead(&self) -> DecodeLead {
        self.stretch.formed_lead()
    }

    /// The KV tokens of the last formed batch that the decode side needs, had this instance
    /// been a prefill instance: every token it computes, plus the prefix-cache hit (context)
    /// of each request admitted by that step (LLMServingSim's `pd_kv_send_tokens`).
    pub fn last_kv_send_tokens(&self) -> u64 {
        self.step_kv_send_tokens
    }

    /// The tokens the step completed last computed.
    pub fn last_step_tokens(&self) -> StepTokens {
        self.last_step_tokens
    }

    /// Requests waiting for admission.
    pub fn num_waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Requests admitted and not finished.
    pub fn num_running(&self) -> usize {
        self.running.len()
    }

    /// How many leading blocks of the chain `hashes` the prefix cache holds now (resident, in
    /// use or free), stopping at the first miss. Read-only: eviction order and reference
    /// counts are untouched.
    pub fn cached_prefix_blocks(&self, hashes: &[u64]) -> usize {
        self.pool.cached_prefix(hashes, |_| {})
    }

    /// How many leading blocks of the chain `hashes` the prefix cache held as a router saw
    /// it at `t` (see [`BlockPool::held_after`]; needs [`Scheduler::keep_cache_history`],
    /// else the cache as it is now).
    pub fn cached_prefix_blocks_at(&self, hashes: &[u64], t: Nanos) -> usize {
        let mut parent = None;
        (hashes.iter())
            .take_while(|&&h| {
                let held;
                (held, parent) = self.pool.held_after(parent, h, t);
                held
            })
            .count()
    }

    /// Keeps the prefix cache's history from now on, for routers that see it late.
    pub fn keep_cache_history(&mut self) {
        self.pool.keep_history();
    }

    /// Forgets the prefix cache's history before `t`.
    pub fn forget_cache_history_before(&mut self, t: Nanos) {
        self.pool.forget_before(t);
    }

    /// Whether any request is waiting or running.
    pub fn has_work(&self) -> bool {
        !self.waiting.is_empty() || !self.running.is_empty()
    }

    /// Takes requests out of an instance with no step in flight (a replica leaving the
    /// cluster, `crate::autoscale`): every waiting request that has computed nothing and was
    /// never preempted, and with `all` every other waiting and running request too. Their KV
    /// blocks are released; what each was is appended to `out`, waiting ones first, in queue
    /// order.
    pub fn evict(&mut self, all: bool, out: &mut Vec<Evicted>) {
        self.settle_stretch();
        let mut k = 0;
        while k < self.waiting.len() {
            let slot = self.waiting[k];
            let req = self.slots[slot as usize].as_ref();
            let fresh =
                req.is_some_and(|r| r.computed == 0 && !r.was_preempted && r.blocks.is_empty());
            // A request whose KV a prefill instance holds for it stays until it is pulled.
            let remote = req.is_some_and(|r| {
                matches!(
                    r.pull,
                    request::KvPull::Pending | request::KvPull::Pulling(_)
                )
            });
            if (all || fresh) && !remote {
                self.waiting.remove(k);
                self.evict_slot(slot, out);
            } else {
                k += 1;
            }
        }
        if all {
            let mut running = std::mem::take(&mut self.running);
            for &slot in &running {
                self.evict_slot(slot, out);
            }
            running.clear();
            self.running = running;
        }
    }

    /// Frees `slot` and its blocks, recording what its request was.
    fn evict_slot(&mut self, slot: u32, out: &mut Vec<Evicted>) {
        let Some(req) = self.slots[slot as usize].take() else {
            return;
        };
        self.pool.release_all(req.blocks.iter().rev().copied());
        out.push(Evicted {
            id: req.id,
            arrival_ns: req.arrival_ns,
            input_toks: req.input_toks,
            output_toks: req.target - req.input_toks,
        });
        self.free_slots.push(slot);
    }

    /// Queues an arrived request at the back of the waiting queue. Under async scheduling a
    /// request arriving while a step runs waits out the step already formed behind it. With
    /// pipeline parallelism the flag changes nothing: vLLM's engine then keeps `pp` steps in
    /// flight whether or not it schedules asynchronously (its V1 model runner's
    /// `max_concurrent_batches`), and, as here, never gives a request a step while its token
    /// is in flight.
    pub fn enqueue(&mut self, request: &Request) {
        self.enqueue_with_priority(request, 0);
    }

    /// [`Scheduler::enqueue`] with the control plane's `priority` (higher is more urgent),
    /// which places the request in a priority-ordered waiting queue.
    pub fn enqueue_with_priority(&mut self, request: &Request, priority: i32) {
        self.enqueue_ranked(request, priority, priority);
    }

    /// [`Scheduler::enqueue_with_priority`], with the request's `nominal` urgency (its own
    /// or its class's priority, whatever the run's policy made of it), which priority
    /// inversions are judged by.
    pub fn enqueue_ranked(&mut self, request: &Request, priority: i32, nominal: i32) {
        self.enqueue_hashed(request, priority, nominal, &[]);
    }

    /// [`Scheduler::enqueue_ranked`] given `known`, the chained hashes of the request's
    /// leading full blocks at this scheduler's block size that the router computed already.
    pub fn enqueue_hashed(&mut self, req: &Request, priority: i32, nominal: i32, known: &[u64]) {
        let mut state = RunningRequest::with_hashes(req, &self.config, known);
        state.priority = priority;
        state.nominal = nominal;
        if let Some(w) = &mut self.watch {
            state.seq = w.next_seq();
        }
        state.eligible_step = self.first_step_for_arrival();
        self.push_waiting(state);
    }

    /// The first step a request queued now may join: under asynchronous scheduling with a
    /// step in flight, the step after the next (that one was formed already); else any.
    fn first_step_for_arrival(&self) -> u64 {
        match self.config.async_scheduling && self.depth == 1 && self.in_flight {
            true => self.formed + 2,
            false => 0,
        }
    }

    /// Gives `state` a slot and queues it at the back of the waiting queue.
    fn push_waiting(&mut self, state: RunningRequest) {
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(state);
                s
            }
            None => {
                self.slots.push(Some(state));
                (self.slots.len() - 1) as u32
            }
        };
        self.queue_waiting(slot, false);
    }

    /// Puts `slot` in the waiting queue: at the back (or, `preempted`, the front) under
    /// FCFS, else at its place in the queue's order (after its equals).
    fn queue_waiting(&mut self, slot: u32, preempted: bool) {
        if self.order == QueueOrder::Fcfs {
            if preempted {
                self.waiting.push_front(slot);
            } else {
                self.waiting.push_back(slot);
            }
            return;
        }
        let key = self.wait_key(slot);
        let at = self.waiting.partition_point(|&s| self.wait_key(s) <= key);
        self.waiting.insert(at, slot);
    }

    /// The waiting-queue key of `slot` under a non-FCFS order (smaller first).
    fn wait_key(&self, slot: u32) -> (i64, Nanos, u64) {
        let r = self.slots[slot as usize].as_ref().expect("waiting slot");
        let first = match self.order {
            QueueOrder::Fcfs => 0,
            QueueOrder::PriorityFcfs => -i64::from(r.priority),
            QueueOrder::Sjf => i64::from(r.input_toks),
            QueueOrder::ReversePriority => i64::from(r.priority),
        };
        (first, r.arrival_ns, r.id)
    }

    /// Position in `running` of the request to preempt.
    fn victim_position(&self) -> usize {
        let last = self.running.len() - 1;
        match self.preemption {
            PreemptionOrder::Lifo | PreemptionOrder::Retract => last,
            PreemptionOrder::Priority => {
                let priority = |pos: usize| {
                    let slot = self.running[pos];
                    self.slots[slot as usize].as_ref().map_or(0, |r| r.priority)
                };
                // Lowest priority; the latest admitted among equals.
                (0..=last)
                    .rev()
                    .min_by_key(|&p| priority(p))
                    .unwrap_or(last)
            }
        }
    }

    /// Forms the next step's batch at time `now`. Returns `None` when nothing can run.
    pub fn schedule(&mut self, now: Nanos) -> Result<Option<&[BatchItem]>, SchedulerBug> {
        Ok(match self.form_step(now)? {
            true => Some(self.written_batch()),
            false => None,
        })
    }

    /// Forms the next step at time `now`, as [`Scheduler::schedule`] does, without writing
    /// the stretch members' batch items (see `stretch.rs`): what is known of them is
    /// [`Scheduler::last_lead`], and [`Scheduler::written_batch`] writes them. Returns
    /// whether a step was formed.
    pub fn form_step(&mut self, now: Nanos) -> Result<bool, SchedulerBug> {
        // Requests stepped in bulk lead the step (see `stretch.rs`), one token each.
        let members = self.advance_stretch(now);
        self.pool.set_clock(now);
        if let Some(tier) = self.lower.as_ref().filter(|_| self.watch.is_some()) {
            tier.set_clock(now);
        }
        self.step.truncate(members);
        self.step_items.truncate(members);
        self.step_kv_send_tokens = members as u64;
        self.step_recall_tokens = 0;
        self.step_recall_ns = 0;
        let mut budget = self.config.max_num_batched_tokens - members as u32;
        let preempted = self.schedule_running(&mut budget, members)?;
        // Requests from here on in `step` were admitted by this step.
        let admitted_from = self.step.len();
        if !preempted {
            self.admit_waiting(&mut budget, now, self.formed + 1);
        }
        // Nothing else to run: vLLM would have formed no step ahead, and forms this one once
        // the step in flight is done, with what it freed and the requests held by async
        // scheduling.
        if self.step.is_empty() && self.config.async_scheduling {
            self.release_freed_late();
            self.admit_waiting(&mut budget, now, u64::MAX);
        }
        self.release_freed_late();
        if self.step.is_empty() {
            return Ok(false);
        }
        self.count_inversions(admitted_from);
        self.formed += 1;
        self.in_flight = true;
        if let Some(tier) = &mut self.lower {
            self.step_recall_ns = tier.finish_step(now, self.step_recall_tokens);
            self.stats.recall_ns += self.step_recall_ns;
        }
        for (k, s) in self.step.iter_mut().enumerate().skip(members) {
            let req = self.slots[s.slot as usize]
                .as_mut()
                .expect("scheduled slot");
            self.step_kv_send_tokens += u64::from(s.new_tokens);
            if k >= admitted_from {
                // Admitted now: its context is a prefix-cache hit the decode side needs too.
                self.step_kv_send_tokens += u64::from(req.computed);
            }
            // A request received from a prefill instance keeps the delay it queued there.
            if req.phase == Phase::Prefill && req.pd.is_none() {
                req.queuing_delay_ns = now - req.arrival_ns;
            }
            self.step_items.push(BatchItem {
                new_tokens: s.new_tokens,
                context_tokens: req.computed,
            });
            req.computed += s.new_tokens;
            s.upto = req.computed;
            s.epoch = req.preemptions;
        }
        self.join_stretch();
        self.stretch.note_formed();
        if self.depth > 1 {
            let mut f = self.spare.pop().unwrap_or_default();
            f.step.clear();
            f.step.extend_from_slice(&self.step);
            f.items.clear();
            f.items.extend_from_slice(self.written_batch());
            self.pipeline.push_back(f);
        }
        Ok(true)
    }

    /// Counts the admissions of this step (`step[admitted_from..]`) that overtook a strictly
    /// more urgent request queued earlier on this instance and still waiting.
    fn count_inversions(&mut self, admitted_from: usize) {
        let Some(w) = &mut self.watch else { return };
        if admitted_from == self.step.len() {
            return;
        }
        w.clear_waiting();
        for &slot in &self.waiting {
            let r = self.slots[slot as usize].as_ref().expect("waiting slot");
            w.note_waiting(r.nominal, r.seq);
        }
        for s in &self.step[admitted_from..] {
            let r = self.slots[s.slot as usize].as_ref().expect("admitted slot");
            if w.overtook(r.nominal, r.seq) {
                self.stats.priority_inversions += 1;
            }
        }
    }

    /// Phase A: running requests in admission order, from the `from`-th (those before it
    /// are stepped in bulk). Returns whether anything was preempted.
    fn schedule_running(&mut self, budget: &mut u32, from: usize) -> Result<bool, SchedulerBug> {
        let mut preempted = false;
        let mut i = from;
        'running: while i < self.running.len() && *budget > 0 {
            let slot = self.running[i];
            let req = self.slots[slot as usize].as_ref().expect("running slot");
            let new_tokens = self.cap(req.reached - req.computed, *budget);
            // Its token is still in flight in an earlier step of the pipeline.
            if new_tokens == 0 && self.depth > 1 {
                i += 1;
                continue;
            }
            if new_tokens == 0 {
                return Err(SchedulerBug(format!(
                    "running request {} has nothing to compute",
                    req.id
                )));
            }
            loop {
                if self.grow(slot, new_tokens) {
                    self.step.push(Scheduled::new(slot, new_tokens));
                    *budget -= new_tokens;
                    break;
                }
                if self.running.is_empty() {
                    return Err(SchedulerBug("nothing left to preempt".into()));
                }
                let pos = self.victim_position();
                let victim = self.running.remove(pos);
                if pos < i {
                    // Scheduled earlier in this step: it gives its tokens back.
                    i -= 1;
                    if let Some(k) = self.step.iter().position(|s| s.slot == victim) {
                        *budget += self.step.remove(k).new_tokens;
                    }
                }
                self.preempt(victim);
                preempted = true;
                if victim == slot {
                    // LIFO: it was the last running request. Under priority preemption the
                    // requests after it still get their share (rather than an empty step).
                    if i >= self.running.len() {
                        return Ok(true);
                    }
                    continue 'running;
                }
            }
            i += 1;
        }
        Ok(preempted)
    }

    /// Phase B: admission from the waiting queue in FCFS order, into step number `step`
    /// (requests held for a later step stop it).
    fn admit_waiting(&mut self, budget: &mut u32, now: Nanos, step: u64) {
        let block = self.config.block_size;
        while let Some(&slot) = self.waiting.front() {
            if *budget == 0 {
                break;
            }
            if self.slots[slot as usize]
                .as_ref()
                .is_some_and(|r| r.eligible_step > step)
            {
                break;
            }
            if let Some(max) = self.config.max_num_seqs
                && self.running.len() + self.freed_late.requests >= max as usize
            {
                break;
            }
            match self.start_pull(slot) {
                PullStart::Local => {}
                PullStart::Started => continue,
                PullStart::NoRoom => break,
            }
            let ready_tokens = self.lookup_prefix(slot);
            let req = self.slots[slot as usize].as_ref().expect("waiting slot");
            let remaining = self.cap(req.reached - ready_tokens, u32::MAX);
            if !self.config.enable_chunked_prefill && remaining > *budget {
                break;
            }
            let new_tokens = remaining.min(*budget);
            if new_tokens == 0 {
                break;
            }
            if self.config.reserve_full_isl {
                let full = req.reached.max(ready_tokens).div_ceil(block) as usize;
                if full > self.pool.num_free() {
                    break;
                }
            }
            if !self.admit(slot, ready_tokens, new_tokens, now) {
                break;
            }
            self.note_admission(slot, ready_tokens, new_tokens, now);
            self.waiting.pop_front();
            self.running.push(slot);
            self.step.push(Scheduled::new(slot, new_tokens));
            *budget -= new_tokens;
        }
    }

    /// Notes the admission of `slot` for the decision trace, if it is kept.
    fn note_admission(&mut self, slot: u32, cached_tokens: u32, new_tokens: u32, now: Nanos) {
        let Some(log) = &mut self.decisions else {
            return;
        };
        let r = self.slots[slot as usize].as_ref().expect("admitted slot");
        log.push(SchedDecision::Admit {
            request: r.id,
            priority: r.priority,
            cached_tokens,
            new_tokens,
            waited_ns: now.saturating_sub(r.arrival_ns),
            readmitted: r.was_preempted,
        });
    }

    /// Gives the places and KV blocks of the requests that finished with the last completed
    /// step back.
    fn release_freed_late(&mut self) {
        self.freed_late.requests = 0;
        // Most steps free nothing: the pool (a cache miss on a large cluster) is left alone.
        if !self.freed_late.blocks.is_empty() {
            self.pool
                .release_all(self.freed_late.blocks.iter().copied());
            self.freed_late.blocks.clear();
        }
    }

    /// Caps a request's tokens for this step by the long-prefill threshold and `limit`.
    fn cap(&self, tokens: u32, limit: u32) -> u32 {
        let threshold = self.config.long_prefill_token_threshold;
        let capped = if threshold > 0 {
            tokens.min(threshold)
        } else {
            tokens
        };
        capped.min(limit)
    }

    /// Finds the cached full prompt blocks of a waiting request; leaves their ids in
    /// `hit_scratch`, and in `lower_hit` the tokens past them found in the lower tier, and
    /// returns the tokens whose KV needs no computing: the hits of both tiers, or the received
    /// prompt of a request a prefill instance handed over (its `computed`), whichever is more.
    /// At least one token is always left to compute.
    fn lookup_prefix(&mut self, slot: u32) -> u32 {
        self.hit_scratch.clear();
        self.lower_hit = 0;
        let req = self.slots[slot as usize].as_ref().expect("waiting slot");
        if !self.config.enable_prefix_caching {
            return req.computed;
        }
        let max_blocks = ((req.reached - 1) / self.config.block_size) as usize;
        let hashes = &req.hashes[..max_blocks.min(req.hashes.len())];
        self.pool
            .cached_prefix(hashes, |b| self.hit_scratch.push(b));
        if self.watch.is_some() {
            let (pool, lower, hashes) = (&self.pool, self.lower.as_ref(), &req.hashes);
            let thrashed = |&(i, h): &(usize, &u64)| {
                pool.evicted_lately(*h) || lower.is_some_and(|t| t.evicted_lately(hashes, i))
            };
            let missed = hashes.iter().enumerate().take(max_blocks);
            let missed = missed.skip(self.hit_scratch.len());
            self.thrash_pending = missed.take_while(thrashed).count() as u32;
        }
        let npu_hit = self.hit_scratch.len() as u32 * self.config.block_size;
        // A received prompt's KV is here already: nothing to recall for it.
        if let Some(tier) = &self.lower
            && req.computed == 0
        {
            self.lower_hit = tier.extend_hit(&req.hashes, npu_hit, req.reached);
        }
        (npu_hit + self.lower_hit).max(req.computed)
    }

    /// Allocates blocks for a waiting request (reusing the hits in `hit_scratch`, and fresh
    /// blocks for the `lower_hit` tokens recalled from the lower tier) whose first
    /// `hit_tokens` need no computing, and marks it admitted at `now`. Returns false, changing
    /// nothing, when blocks are short.
    fn admit(&mut self, slot: u32, hit_tokens: u32, new_tokens: u32, now: Nanos) -> bool {
        let block = self.config.block_size;
        let hits = &self.hit_scratch;
        let reused_free = hits
            .iter()
            .filter(|&&b| self.pool.ref_count(b) == 0)
            .count();
        let fresh = ((hit_tokens + new_tokens).div_ceil(block) as usize).saturating_sub(hits.len());
        if fresh + reused_free > self.pool.num_free() {
            return false;
        }
        let req = self.slots[slot as usize].as_mut().expect("waiting slot");
        if req.blocks.capacity() == 0
            && let Some(spare) = self.spare_blocks.pop()
        {
            req.blocks = spare;
        }
        // Room for the blocks of its whole sequence (no request holds more than the pool), so
        // that its list never grows by copying while it runs.
        let whole = (req.target.div_ceil(block) as usize).min(self.pool.num_blocks());
        req.blocks
            .reserve_exact(whole.saturating_sub(req.blocks.len()));
        for &b in hits {
            self.pool.touch(b);
            req.blocks.push(b);
        }
        req.cached_blocks = hits.len();
        self.pool.expect_allocations(fresh);
        for _ in 0..fresh {
            req.blocks
                .push(self.pool.allocate().expect("checked free blocks"));
        }
        if req.was_preempted {
            self.stats.recomputed_tokens += u64::from(req.reached - hit_tokens);
        }
        // A waiting request has computed nothing, unless it was received with its prompt's KV
        // and this is its first admission (preemption resets `computed`).
        if req.computed > 0
            && let Some(pd) = req.pd.as_mut()
        {
            pd.decode_admitted_ns = now;
        }
        req.pull = request::KvPull::Local;
        let recalled = self.lower_hit;
        if let Some(tier) = &self.lower
            && recalled > 0
        {
            let tokens = u64::from(recalled);
            self.step_recall_tokens += tokens;
            self.stats.recalled_tokens += tokens;
            self.stats.recalled_bytes += tier.bytes(tokens);
        }
        if !req.prefix_recorded && self.config.enable_prefix_caching {
            req.prefix_recorded = true;
            self.prefix_requested_tokens += u64::from(req.input_toks);
            self.prefix_hit_tokens += u64::from(hit_tokens - recalled);
            self.stats.lower_hit_tokens += u64::from(recalled);
        }
        req.computed = hit_tokens;
        self.stats.kv_thrash_blocks += u64::from(std::mem::take(&mut self.thrash_pending));
        Self::index_full_blocks(
            &mut self.pool,
            self.lower.as_deref_mut(),
            req,
            new_tokens,
            block,
        );
        true
    }

    /// Allocates the blocks a running request needs for `new_tokens` more tokens. Returns
    /// false, changing nothing, when blocks are short.
    fn grow(&mut self, slot: u32, new_tokens: u32) -> bool {
        let block = self.config.block_size;
        let req = self.slots[slot as usize].as_mut().expect("running slot");
        let need =
            ((req.computed + new_tokens).div_ceil(block) as usize).saturating_sub(req.blocks.len());
        if need > self.pool.num_free() {
            return false;
        }
        self.pool.expect_allocations(need);
        for _ in 0..need {
            req.blocks
                .push(self.pool.allocate().expect("checked free blocks"));
        }
        Self::index_full_blocks(
            &mut self.pool,
            self.lower.as_deref_mut(),
            req,
            new_tokens,
            block,
        );
        true
    }

    /// Indexes the request's blocks that are full once this step's tokens are in (up to the
    /// tokens it has actually reached), so later requests can hit them, and writes the coarse
    /// blocks they complete down to the lower tier.
    fn index_full_blocks(
        pool: &mut BlockPool,
        lower: Option<&mut LowerTier>,
        req: &mut RunningRequest,
        new_tokens: u32,
        block: u32,
    ) {
        let full = ((req.computed + new_tokens).min(req.reached) / block) as usize;
        let upto = full.min(req.hashes.len());
        let from = req.cached_blocks;
        if from < upto {
            let parent = pool.chain_parent(&req.blocks, &req.hashes, from);
            pool.cache_run(parent, &req.blocks[from..upto], &req.hashes[from..upto]);
            req.cached_blocks = upto;
        }
        if let Some(tier) = lower
            && from < upto
        {
            let used = pool.num_blocks() - pool.num_free();
            let utilisation = used as f64 / pool.num_blocks().max(1) as f64;
            tier.write_down(&req.hashes, from, upto, utilisation);
        }
    }

    /// Frees a request's blocks (last block first) and sends it back to the head of the
    /// waiting queue to be recomputed.
    fn preempt(&mut self, slot: u32) {
        let req = self.slots[slot as usize].as_mut().expect("running slot");
        if let Some(log) = &mut self.decisions {
            log.push(SchedDecision::Preempt {
                request: req.id,
                priority: req.priority,
                policy: self.preemption,
                freed_blocks: req.blocks.len(),
            });
        }
        self.pool.release_all(req.blocks.iter().rev().copied());
        req.blocks.clear();
        req.cached_blocks = 0;
        req.computed = 0;
        req.was_preempted = true;
        req.preemptions += 1;
        self.stats.preemptions += 1;
        self.queue_waiting(slot, true);
    }

    /// Applies the results of the step formed by the last [`Scheduler::schedule`], which
    /// finished at `finish` on instance `instance_id`: first tokens, inter-token gaps, and
    /// every request that completed appended to `finished` (its KV blocks freed). On a
    /// prefill instance, requests whose prompt completed (and that want more than one token)
    /// are handed off instead (see [`Scheduler::pop_handoff`]).
    pub fn complete_step(&mut self, finish: Nanos, instance_id: u32, finished: &mut Completions) {
        let len = if self.depth > 1 {
            let Some(done) = self.pipeline.pop_front() else {
                // Completing a step that was never formed is the engine's bug; nothing to do.
                return;
            };
            let previous = std::mem::replace(&mut self.completed, done);
            self.spare.push(previous);
            self.in_flight = !self.pipeline.is_empty();
            self.completed.step.len()
        } else {
            self.in_flight = false;
            self.step.len()
        };
        // The next step's admissions read the waiting head first: fetched while this one
        // completes (a hint, see `warm.rs`).
        if let Some(&slot) = self.waiting.front()
            && let Some(request) = self.slots.get(slot as usize)
        {
            warm::value(request);
        }
        let step_index = self.step_finish_ns.count();
        self.step_finish_ns.push(finish);
        self.last_step_tokens = StepTokens::default();
        let members = self.stretch.members_in_flight();
        let mut finished_any =
            members > 0 && self.complete_members(step_index, finish, instance_id, finished);
        for k in members..len {
            let s = if self.depth > 1 {
                self.completed.step[k]
            } else {
                self.step[k]
            };
            finished_any |= self.complete_entry(s, step_index, finish, instance_id, finished);
        }
        if !self.cancelled.is_empty() {
            self.free_cancelled_slots();
        }
        if finished_any {
            self.drop_leaving();
        }
        if self.running.is_empty() && self.waiting.is_empty() {
            // Nothing runs next: no step was formed ahead, so what finished is free now.
            self.release_freed_late();
        }
        if self.step_finish_ns.due(self.slots.len()) {
            self.retire_steps(finished.first_step_on(instance_id));
        }
    }

    /// Takes the requests that left with the step just completed (`leaving`) out of the
    /// running set, freeing the slots of those that finished. When they are all stretch
    /// members, whose places lead the running set, the set moves down past them run by run;
    /// else it is passed through once, one look per request.
    fn drop_leaving(&mut self) {
        let made = self.slots.len();
        let (slots, free_slots) = (&mut self.slots, &mut self.free_slots);
        let spare = &mut self.spare_blocks;
        if let Some(left) = self.stretch.left_members(self.leaving.len()) {
            let kept = self.running.len() - left.len();
            for (run, to) in stretch::runs_kept(left, self.running.len()) {
                let slot = self.running[run.start - 1];
                debug_assert!(
                    self.is_leaving[slot as usize],
                    "a member that left is leaving"
                );
                free_finished_slot(slots, free_slots, spare, slot);
                self.running.copy_within(run, to);
            }
            self.running.truncate(kept);
        } else {
            // Slots made since the last requests left are in the running set too.
            self.is_leaving.resize(made, false);
            let is_leaving = &self.is_leaving;
            self.running.retain(|&slot| {
                !is_leaving[slot as usize] || {
                    free_finished_slot(slots, free_slots, spare, slot);
                    false
                }
            });
        }
        for &slot in &self.leaving {
            self.is_leaving[slot as usize] = false;
        }
        self.leaving.clear();
    }

    /// Finds the oldest step a live request or a record not read yet (naming steps from
    /// `unread` on) names: records are read from it on, and when a retirement is due the
    /// inter-token gaps no live request can still add to are pooled and the step finish
    /// times before it let go (see `itl.rs`).
    fn retire_steps(&mut self, unread: Option<u64>) {
        let live = self.slots.iter().flatten();
        let starts = live.filter_map(RunningRequest::first_token_step);
        let floor = starts
            .chain(self.stretch.first_unsettled())
            .chain(unread)
            .fold(self.step_finish_ns.count(), u64::min);
        if self
            .step_finish_ns
            .note_floor(floor, self.slots.len(), self.itl_values)
        {
            if let Some(cells) = &mut self.itl_cells {
                cells.count_upto(floor, &self.step_finish_ns);
            }
            self.itl.retire(floor, &mut self.step_finish_ns);
        }
    }

    /// Applies scheduled entry `s` of the step completed as the `step_index`-th, which
    /// finished at `finish`: its first token, its token, its completion (appended to
    /// `finished`, its KV blocks freed) or its hand-off. Returns whether it leaves the
    /// running set (listed in `leaving`).
    fn complete_entry(
        &mut self,
        s: Scheduled,
        step_index: u64,
        finish: Nanos,
        instance_id: u32,
        finished: &mut Completions,
    ) -> bool {
        let req = self.slots[s.slot as usize]
            .as_mut()
            .expect("scheduled slot");
        // Preempted or cancelled since the step was formed: its work here is lost.
        if req.preemptions != s.epoch || req.phase == Phase::Cancelled {
            return false;
        }
        let tokens = &mut self.last_step_tokens;
        if req.phase == Phase::Prefill {
            tokens.prompt += u64::from(s.new_tokens);
        }
        let mut first_token = false;
        if req.phase == Phase::Prefill && s.upto >= req.input_toks {
            req.phase = Phase::Decode;
            req.first_token_ns = finish;
            first_token = true;
        }
        if s.upto >= req.reached {
            tokens.generated += 1;
            req.reached += 1;
            req.note_token(step_index);
        }
        if req.reached >= req.target {
            // What finishing reads that is long cold: fetched while the record is written.
            self.itl.warm(req, &self.step_finish_ns);
            warm::slice(&req.blocks);
            finished.push(req, instance_id, finish, self.itl_values);
            if self.hand_on_hashes {
                finished.keep_hashes(&req.hashes, self.config.block_size);
            }
            self.itl.add(req, &self.step_finish_ns);
            if let Some(cells) = &mut self.itl_cells {
                cells.add(req, &self.step_finish_ns);
            }
            // vLLM formed the next step while this one ran (async scheduling, no pipeline).
            if self.config.async_scheduling && self.depth == 1 {
                self.freed_late.requests += 1;
                self.freed_late.blocks.extend(req.blocks.iter().rev());
            } else {
                self.pool.release_all(req.blocks.iter().rev().copied());
            }
            req.phase = Phase::Finished;
        } else if first_token && self.hand_off {
            req.phase = Phase::HandedOff;
            self.handoffs.push_back(s.slot);
            self.handed_off += 1;
        } else {
            return false;
        }
        self.leaving.push(s.slot);
        if self.is_leaving.len() <= s.slot as usize {
            self.is_leaving.resize(self.slots.len(), false);
        }
        self.is_leaving[s.slot as usize] = true;
        true
    }
}

/// Frees the slot of a request leaving the running set, if it finished (its block list kept
/// for reuse in `spare`). A handed-off request leaves the running set too, but its slot and
/// blocks stay until the transfer ends. Called for leaving requests only, so that the running
/// set's pass tests the rest inline.
#[inline(never)]
fn free_finished_slot(
    slots: &mut [Option<RunningRequest>],
    free_slots: &mut Vec<u32>,
    spare: &mut Vec<Vec<BlockId>>,
    slot: u32,
) {
    let entry = &mut slots[slot as usize];
    if entry.as_ref().is_some_and(|r| r.phase == Phase::Finished) {
        let mut blocks = entry.take().map(|r| r.blocks).unwrap_or_default();
        blocks.clear();
        spare.push(blocks);
        free_slots.push(slot);
    }
}
