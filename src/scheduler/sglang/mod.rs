//! An instance's scheduler with SGLang's semantics (pinned: SGLang 0.5.23, its
//! `managers/scheduler.py`, `schedule_policy.py`, `schedule_batch.py`,
//! `mem_cache/radix_cache.py`), behind the same seam as vLLM's ([`super::Core`]).
//!
//! Each pass ([`SglangScheduler::schedule`], SGLang's `get_next_batch_to_run`):
//! 1. **Prefill first** (`admit.rs`, `get_new_batch_prefill` and its `PrefillAdder`): the
//!    waiting queue is ordered by `--schedule-policy` (`policy.rs`), then requests are
//!    admitted while the pass's budgets allow: `--chunked-prefill-size` tokens of compute
//!    (paged), `max_prefill_tokens` of input, `--max-running-requests` places, and KV: a
//!    request needs its uncached prompt plus its whole remaining output (clipped at 4096)
//!    plus a page, against the free and evictable pages less what the running requests are
//!    expected to still decode: their remaining outputs times the **new-token ratio**. A
//!    prompt larger than the chunk budget is cut at a page boundary; only one request is
//!    chunked at a time, and its next chunk goes first in the next prefill pass.
//! 2. If a prefill batch formed, the pass runs it alone: the running requests' decodes
//!    **pause** (unless `--enable-mixed-chunk`, which runs them in the same pass when their
//!    next tokens fit).
//! 3. Otherwise the running requests **decode** one token each (`decode.rs`,
//!    `update_running_batch`). When the next tokens' new pages do not fit in the free and
//!    evictable pages, requests are **retracted** (fewest outputs, then longest prompt,
//!    first; at least one kept) until they do: their KV is freed, unlocked paths evicted for
//!    the survivors' next 20 tokens, and they go back to the end of the waiting queue to be
//!    recomputed; the ratio is then re-estimated from the survivors. A decode pass without
//!    retraction lowers the ratio by its decay step, down to its floor; an idle pass resets
//!    it (`NewTokenRatioTracker`).
//!
//! The KV cache is a radix tree over page keys (`radix.rs`): admission matches the prompt
//! (its full pages, all tokens but the last), locks the matched path; finished prefills and
//! requests insert their pages, unlocked ones are evicted LRU leaf first.
//!
//! With the **overlap scheduler** (on unless `--disable-overlap-schedule`) SGLang forms
//! pass k+1 while pass k runs, before k's results are processed: a request finishing with
//! pass k still holds its KV and place while k+1 is formed, and a request arriving during
//! pass k joins pass k+2 at the earliest (as vLLM's async scheduling in [`super::Scheduler`]);
//! the host model prices the CPU side the same way.
//!
//! Requests stop at their output length; the scheduler sees that length as their
//! `max_new_tokens` and estimates decode room with the ratio (as for requests that may stop
//! at an end-of-sequence token).

mod admit;
mod decode;
pub mod keys;
pub mod policy;
pub mod radix;
mod step;

pub use policy::SchedulePolicy;

use super::request::{Phase, RunningRequest};
use super::{
    Cancelled, Evicted, Handoff, QueueOrder, ReceivedKv, SchedDecision, SchedulerBug,
    SchedulerConfig, SchedulerStats, StepTokens,
};
use crate::latency::BatchItem;
use crate::workload::Request;
use keys::PageKeys;
use radix::{NodeId, ROOT, RadixCache};
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::SeedableRng;

/// SGLang's `SGLANG_INIT_NEW_TOKEN_RATIO`: the new-token ratio's initial value, before
/// `--schedule-conservativeness` scales it.
pub const INIT_NEW_TOKEN_RATIO: f64 = 0.7;
/// `SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR`: the floor, as a fraction of the initial value.
pub const MIN_NEW_TOKEN_RATIO_FACTOR: f64 = 0.14;
/// `SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS`: decode passes from the initial value to the floor.
pub const NEW_TOKEN_RATIO_DECAY_STEPS: f64 = 600.0;
/// `SGLANG_RETRACT_DECODE_STEPS`: decode steps of room a retraction makes per survivor.
pub const RETRACT_DECODE_STEPS: u32 = 20;
/// `SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION`: remaining outputs are clipped here for admission.
pub const CLIP_MAX_NEW_TOKENS: u32 = 4096;
/// SGLang's `--max-prefill-tokens` default.
pub const MAX_PREFILL_TOKENS: u32 = 16384;

/// The resolved settings of an SGLang instance (SGLang's names; see
/// `setup`'s SGLang options for how defaults follow the GPU).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SglangConfig {
    /// `--max-running-requests`.
    pub max_running_requests: u32,
    /// `--chunked-prefill-size`; `None`: chunked prefill off (SGLang's -1).
    pub chunked_prefill_size: Option<u32>,
    /// `--max-prefill-tokens`.
    pub max_prefill_tokens: u32,
    /// `--schedule-policy`.
    pub schedule_policy: SchedulePolicy,
    /// `--schedule-conservativeness`: scales the new-token ratio.
    pub schedule_conservativeness: f64,
    /// `--enable-mixed-chunk`.
    pub enable_mixed_chunk: bool,
    /// `--disable-radix-cache`.
    pub disable_radix_cache: bool,
    /// `--page-size`: tokens per KV page (the radix cache's granularity).
    pub page_size: u32,
    /// `--cuda-graph-max-bs`: largest decode batch replayed from a CUDA graph.
    pub cuda_graph_max_bs: u32,
    /// `--disable-overlap-schedule`.
    pub disable_overlap_schedule: bool,
    /// `--mem-fraction-static`: device memory for weights and the KV pool.
    pub mem_fraction_static: f64,
}

use serde::Serialize;

impl SglangConfig {
    /// The engine-neutral view of these settings that the engine, the router and the
    /// outputs read ([`SchedulerConfig`]): places, token budget, page size, caching.
    pub fn view(&self, max_model_len: u32) -> SchedulerConfig {
        let budget = self.chunked_prefill_size.unwrap_or(max_model_len);
        SchedulerConfig {
            max_num_seqs: Some(self.max_running_requests),
            max_num_batched_tokens: budget.max(1),
            long_prefill_token_threshold: 0,
            enable_chunked_prefill: true,
            reserve_full_isl: false,
            enable_prefix_caching: !self.disable_radix_cache,
            block_size: self.page_size,
            async_scheduling: !self.disable_overlap_schedule,
        }
    }

    /// The new-token ratio's (initial value, floor, decay per decode pass).
    pub fn ratio_schedule(&self) -> (f64, f64, f64) {
        let init = (INIT_NEW_TOKEN_RATIO * self.schedule_conservativeness).min(1.0);
        let floor = (init * MIN_NEW_TOKEN_RATIO_FACTOR).min(1.0);
        (init, floor, (init - floor) / NEW_TOKEN_RATIO_DECAY_STEPS)
    }
}

/// One request on an SGLang instance: the shared request state plus its KV in the tree.
#[derive(Debug)]
pub(super) struct SgRequest {
    pub r: RunningRequest,
    /// The tree node its locked path ends at ([`ROOT`]: none).
    pub node: NodeId,
    /// Pages of its KV it holds through that path.
    pub tree_pages: u32,
    /// Pages it holds outside the tree.
    pub own_pages: u32,
    /// Its last prefix match (by the queue policy or at admission): pages and node.
    pub matched_pages: u32,
    pub match_node: NodeId,
    /// Received with its prompt's KV from a prefill instance, not admitted yet.
    pub received: bool,
    /// Its radix keys, made as far as needed.
    pub keys: PageKeys,
}

/// What a pass runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PassKind {
    #[default]
    Decode,
    Prefill,
    /// A prefill batch with the running requests' decodes in it (`--enable-mixed-chunk`).
    Mixed,
}

/// A request in the pass being formed or in flight.
#[derive(Debug, Clone, Copy)]
struct Scheduled {
    slot: u32,
    new_tokens: u32,
    /// Its computed tokens once the pass is done.
    upto: u32,
    /// Its retraction count when the pass was formed.
    epoch: u32,
    /// A decode of a request in the running batch (else a prefill or a chunk).
    decode: bool,
}

/// The scheduler of one SGLang instance (see the module docs).
#[derive(Debug)]
pub struct SglangScheduler {
    config: SglangConfig,
    view: SchedulerConfig,
    /// The view a request's shared state is made with: without prefix caching, since its
    /// radix keys are made here, lazily ([`PageKeys`]), not all at once.
    request_view: SchedulerConfig,
    tree: RadixCache,
    slots: Vec<Option<SgRequest>>,
    free_slots: Vec<u32>,
    /// SGLang's waiting queue (a list it sorts in place).
    waiting: Vec<u32>,
    /// The running batch, in merge order.
    running: Vec<u32>,
    /// The request being prefilled in chunks, between its chunks.
    chunked: Option<u32>,
    /// Received prompts (P/D decode side) waiting for room.
    received: std::collections::VecDeque<u32>,
    /// The new-token ratio (`new_token_ratio_tracker.current`).
    ratio: f64,
    /// Set when no more requests fit; cleared when one leaves (SGLang's `batch_is_full`).
    batch_is_full: bool,
    kind: PassKind,
    step: Vec<Scheduled>,
    step_items: Vec<BatchItem>,
    step_kv_send_tokens: u64,
    in_flight: bool,
    formed: u64,
    step_finish_ns: super::itl::StepTimes,
    /// The inter-token gaps of every request finished here, pooled by step.
    itl: super::itl::ItlTally,
    /// Whether finished requests' records list their inter-token gaps.
    itl_values: bool,
    last_step_tokens: StepTokens,
    /// Under the overlap scheduler: requests that finished with the last pass, their KV
    /// released only once the next pass is formed.
    freed_late: Vec<u32>,
    stats: SchedulerStats,
    /// Waiting-queue order by the control plane's priority (its `--scheduler priority-fcfs`,
    /// SGLang's `--enable-priority-scheduling`).
    by_priority: bool,
    rng: ChaCha8Rng,
    hand_off: bool,
    handoffs: std::collections::VecDeque<u32>,
    handed_off: usize,
    incoming: usize,
    held_for_decode: usize,
    decisions: Option<Vec<SchedDecision>>,
    /// Slots of cancelled requests still in the pass in flight.
    cancelled: Vec<u32>,
    /// Scratch bytes for hashing pages.
    hash_bytes: Vec<u8>,
}

impl SglangScheduler {
    /// A scheduler over a pool of `total_pages` KV pages; `seed` seeds the `random` policy.
    pub fn new(config: SglangConfig, total_pages: u32, max_model_len: u32, seed: u64) -> Self {
        let (init, _, _) = config.ratio_schedule();
        let view = config.view(max_model_len);
        SglangScheduler {
            request_view: SchedulerConfig {
                enable_prefix_caching: false,
                ..view.clone()
            },
            view,
            tree: RadixCache::new(u64::from(total_pages), config.disable_radix_cache)
                .with_token_keys(config.page_size == 1),
            config,
            slots: Vec::new(),
            free_slots: Vec::new(),
            waiting: Vec::new(),
            running: Vec::new(),
            chunked: None,
            received: std::collections::VecDeque::new(),
            ratio: init,
            batch_is_full: false,
            kind: PassKind::Decode,
            step: Vec::new(),
            step_items: Vec::new(),
            step_kv_send_tokens: 0,
            in_flight: false,
            formed: 0,
            step_finish_ns: super::itl::StepTimes::default(),
            itl: Default::default(),
            itl_values: true,
            last_step_tokens: StepTokens::default(),
            freed_late: Vec::new(),
            stats: SchedulerStats::default(),
            by_priority: false,
            rng: ChaCha8Rng::seed_from_u64(seed),
            hand_off: false,
            handoffs: std::collections::VecDeque::new(),
            handed_off: 0,
            incoming: 0,
            held_for_decode: 0,
            decisions: None,
            cancelled: Vec::new(),
            hash_bytes: Vec::new(),
        }
    }

    /// The SGLang settings.
    pub fn sglang_config(&self) -> &SglangConfig {
        &self.config
    }

    /// What the pass formed last runs.
    pub fn pass_kind(&self) -> PassKind {
        self.kind
    }

    /// The pass formed last: each request's id and new tokens, in batch order.
    pub fn formed_pass(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        (self.step.iter()).map(|x| (self.req(x.slot).r.id, x.new_tokens))
    }

    /// The radix cache.
    pub fn tree(&self) -> &RadixCache {
        &self.tree
    }

    /// The engine-neutral view of the settings.
    pub fn config(&self) -> &SchedulerConfig {
        &self.view
    }

    /// The current new-token ratio.
    pub fn new_token_ratio(&self) -> f64 {
        self.ratio
    }

    /// Orders the waiting queue by control-plane priority (before FCFS) when `order` asks
    /// for it; other orders keep `--schedule-policy`.
    pub fn set_queue_order(&mut self, order: QueueOrder) {
        self.by_priority = order == QueueOrder::PriorityFcfs;
    }

    /// Turns the noting of admissions and retractions on, for the decision trace.
    pub fn trace_decisions(&mut self) {
        self.decisions = Some(Vec::new());
    }

    /// The decisions noted since the last call.
    pub fn take_decisions(&mut self) -> impl Iterator<Item = SchedDecision> + '_ {
        self.decisions.iter_mut().flat_map(|d| d.drain(..))
    }

    /// The decision log, when decisions are traced.
    pub(crate) fn decision_log(&mut self) -> Option<&mut Vec<SchedDecision>> {
        self.decisions.as_mut()
    }

    /// Counters so far.
    pub fn stats(&self) -> SchedulerStats {
        self.stats
    }

    /// [`SchedulerStats::prefix_requested_tokens`] and [`SchedulerStats::prefix_hit_tokens`].
    pub fn prefix_tokens(&self) -> (u64, u64) {
        (
            self.stats.prefix_requested_tokens,
            self.stats.prefix_hit_tokens,
        )
    }

    /// KV pages in use (locked by or private to requests), and the pool's size.
    pub fn kv_pages_used(&self) -> usize {
        self.tree.pinned_pages() as usize
    }

    /// Pages of the pool.
    pub fn kv_pages(&self) -> usize {
        self.tree.total_pages() as usize
    }

    /// Pages free or evictable.
    pub fn kv_pages_available(&self) -> usize {
        (self.tree.free_pages() + self.tree.evictable_pages()) as usize
    }

    /// Checks the pool's counts (tests).
    pub fn audit(&self) -> Result<(), SchedulerBug> {
        self.tree.audit()?;
        let held: u64 = self
            .slots
            .iter()
            .flatten()
            .map(|r| u64::from(r.own_pages))
            .sum();
        if held != self.tree.private_pages() {
            return Err(format!(
                "requests hold {held} private pages, the pool counts {}",
                self.tree.private_pages()
            )
            .into());
        }
        Ok(())
    }

    /// Requests waiting for admission (received prompts included).
    pub fn num_waiting(&self) -> usize {
        self.waiting.len() + self.received.len()
    }

    /// Requests admitted and not finished (the request between its prefill chunks too).
    pub fn num_running(&self) -> usize {
        self.running.len() + usize::from(self.chunked.is_some())
    }

    /// Whether any request is waiting or running.
    pub fn has_work(&self) -> bool {
        self.num_waiting() + self.num_running() > 0
    }

    /// Whether another pass may be formed now.
    pub fn can_form_step(&self) -> bool {
        !self.in_flight
    }

    /// Passes formed and not completed.
    pub fn steps_in_flight(&self) -> usize {
        usize::from(self.in_flight)
    }

    /// The batch of the pass formed last (and, one pass at a time, completed last).
    pub fn last_batch(&self) -> &[BatchItem] {
        &self.step_items
    }

    /// The KV tokens of the last formed pass a decode instance would need.
    pub fn last_kv_send_tokens(&self) -> u64 {
        self.step_kv_send_tokens
    }

    /// The tokens the pass completed last computed.
    pub fn last_step_tokens(&self) -> StepTokens {
        self.last_step_tokens
    }

    /// Leading pages of the chain `hashes` (a router's chained page hashes) the radix cache
    /// holds (read-only).
    pub fn cached_prefix_blocks(&self, hashes: &[u64]) -> usize {
        self.tree.cached_chain(hashes)
    }

    /// Queues an arrived request at the back of the waiting queue, with the control plane's
    /// `priority` (and `nominal` urgency, kept for its records).
    pub fn enqueue_ranked(&mut self, request: &Request, priority: i32, nominal: i32) {
        let mut r = RunningRequest::new(request, &self.request_view);
        r.priority = priority;
        r.nominal = nominal;
        if !self.config.disable_overlap_schedule && self.in_flight {
            r.eligible_step = self.formed + 2;
        }
        let keys = PageKeys::new(request, !self.tree.disabled());
        let slot = self.new_slot(r, keys, false);
        self.waiting.push(slot);
    }

    fn new_slot(&mut self, r: RunningRequest, keys: PageKeys, received: bool) -> u32 {
        let req = SgRequest {
            keys,
            r,
            node: ROOT,
            tree_pages: 0,
            own_pages: 0,
            matched_pages: 0,
            match_node: ROOT,
            received,
        };
        match self.free_slots.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(req);
                s
            }
            None => {
                self.slots.push(Some(req));
                (self.slots.len() - 1) as u32
            }
        }
    }

    fn req(&self, slot: u32) -> &SgRequest {
        self.slots[slot as usize].as_ref().expect("live slot")
    }

    fn req_mut(&mut self, slot: u32) -> &mut SgRequest {
        self.slots[slot as usize].as_mut().expect("live slot")
    }

    /// Frees a request's KV without caching it (retraction, cancellation, eviction): its
    /// path is unlocked, its private pages freed.
    fn drop_kv(&mut self, slot: u32) {
        let req = self.slots[slot as usize].as_mut().expect("live slot");
        if req.node != ROOT {
            self.tree.unlock(req.node);
        }
        self.tree.release(u64::from(req.own_pages));
        req.keys.reset();
        req.node = ROOT;
        req.tree_pages = 0;
        req.own_pages = 0;
        req.r.computed = 0;
    }

    /// SGLang's `cache_unfinished_req` / the insert of `cache_finished_req`: the request's
    /// full computed pages go into the tree (its private copies of pages already there are
    /// freed), and its lock moves to the node they end at.
    fn cache_pages(&mut self, slot: u32) {
        if self.tree.disabled() {
            return;
        }
        let page = self.config.page_size;
        let req = self.slots[slot as usize].as_mut().expect("live slot");
        debug_assert_eq!(req.keys.base(), req.tree_pages as usize, "keys out of step");
        let computed = (req.r.computed / page) as usize;
        let keys = req.keys.upto(computed, page, &mut self.hash_bytes);
        let full = req.tree_pages + keys.len() as u32;
        if full <= req.tree_pages {
            return;
        }
        let (_, node) = self.tree.insert_below(req.node, keys);
        req.keys.held_by_tree(full as usize);
        self.tree.adopt(full, req.tree_pages);
        self.tree.lock(node);
        if req.node != ROOT {
            self.tree.unlock(req.node);
        }
        req.own_pages -= full - req.tree_pages;
        req.tree_pages = full;
        req.node = node;
    }

    /// A finished (or handed-off and transferred) request leaves: its pages are cached,
    /// its lock dropped, the rest freed, its slot reused.
    fn release_finished(&mut self, slot: u32) {
        self.cache_pages(slot);
        self.drop_kv(slot);
        self.slots[slot as usize] = None;
        self.free_slots.push(slot);
    }

    /// Ends request `id` if it waits or runs here, freeing its KV; returns where it was.
    pub fn cancel(&mut self, id: u64) -> Option<Cancelled> {
        let slot = self.slots.iter().position(|s| {
            s.as_ref().is_some_and(|q| {
                q.r.id == id && matches!(q.r.phase, Phase::Prefill | Phase::Decode)
            })
        })? as u32;
        let place = if let Some(pos) = self.waiting.iter().position(|&s| s == slot) {
            self.waiting.remove(pos);
            Cancelled::Waiting
        } else if let Some(pos) = self.received.iter().position(|&s| s == slot) {
            self.received.remove(pos);
            Cancelled::Waiting
        } else if self.chunked == Some(slot) {
            self.chunked = None;
            Cancelled::Running
        } else {
            let pos = self.running.iter().position(|&s| s == slot);
            if let Some(pos) = pos {
                self.running.remove(pos);
            } else if !self.in_flight_has(slot) {
                return None;
            }
            Cancelled::Running
        };
        self.drop_kv(slot);
        self.req_mut(slot).r.phase = Phase::Cancelled;
        self.batch_is_full = false;
        if self.in_flight_has(slot) {
            self.cancelled.push(slot);
        } else {
            self.slots[slot as usize] = None;
            self.free_slots.push(slot);
        }
        Some(place)
    }

    fn in_flight_has(&self, slot: u32) -> bool {
        self.in_flight && self.step.iter().any(|s| s.slot == slot)
    }

    /// Takes requests out of an instance with no pass in flight (a replica leaving): every
    /// waiting request that has computed nothing and was never retracted, and with `all`
    /// every other one too.
    pub fn evict(&mut self, all: bool, out: &mut Vec<Evicted>) {
        let mut k = 0;
        while k < self.waiting.len() {
            let slot = self.waiting[k];
            let r = &self.req(slot).r;
            if all || (r.computed == 0 && !r.was_preempted) {
                self.waiting.remove(k);
                self.evict_slot(slot, out);
            } else {
                k += 1;
            }
        }
        if all {
            let mut rest: Vec<u32> = self.received.drain(..).collect();
            rest.extend(self.chunked.take());
            rest.append(&mut self.running);
            for slot in rest {
                self.evict_slot(slot, out);
            }
        }
    }

    fn evict_slot(&mut self, slot: u32, out: &mut Vec<Evicted>) {
        self.drop_kv(slot);
        let req = self.slots[slot as usize].take().expect("live slot");
        out.push(Evicted {
            id: req.r.id,
            arrival_ns: req.r.arrival_ns,
            input_toks: req.r.input_toks,
            output_toks: req.r.target - req.r.input_toks,
        });
        self.free_slots.push(slot);
    }

    /// Makes this a prefill instance's scheduler (P/D): requests leave when their prompt
    /// completes, their KV held until [`SglangScheduler::release_handoff`].
    pub fn hand_off_prefills(&mut self) {
        self.hand_off = true;
    }

    /// Whether the passes completed so far handed off a request not collected yet.
    pub fn has_handoffs(&self) -> bool {
        !self.handoffs.is_empty()
    }

    /// The next request handed off by the passes completed so far.
    pub fn pop_handoff(&mut self) -> Option<Handoff> {
        let slot = self.handoffs.pop_front()?;
        let req = self.req(slot);
        Some(Handoff {
            slot,
            request_id: req.r.id,
            prompt_tokens: req.r.input_toks,
            blocks: (req.tree_pages + req.own_pages) as usize,
            queuing_delay_ns: req.r.queuing_delay_ns,
            priority: req.r.priority,
            nominal: req.r.nominal,
        })
    }

    /// Whether the records of finished requests list their inter-token gaps (on by
    /// default); off, they are only pooled ([`SglangScheduler::take_itl_counts`]).
    pub fn keep_itl_values(&mut self, on: bool) {
        self.itl_values = on;
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

    /// Requests handed off whose KV is still held.
    pub fn num_handed_off(&self) -> usize {
        self.handed_off
    }

    /// Releases a handed-off request whose transfer ended: its prompt is cached in the tree
    /// (as SGLang's prefill server does once the KV is sent) and its slot freed. Returns the
    /// pages it held.
    pub fn release_handoff(&mut self, slot: u32) -> Result<usize, SchedulerBug> {
        let held = match self.slots.get(slot as usize).and_then(Option::as_ref) {
            Some(req) if req.r.phase == Phase::HandedOff => req.tree_pages + req.own_pages,
            _ => {
                return Err(SchedulerBug::new(format!(
                    "slot {slot} holds no handed-off request"
                )));
            }
        };
        self.release_finished(slot);
        self.handed_off -= 1;
        Ok(held as usize)
    }

    /// A request was routed here and its KV is on its way.
    pub fn expect_incoming(&mut self) {
        self.incoming += 1;
    }

    /// A request routed here will not come after all.
    pub fn cancel_incoming(&mut self) {
        self.incoming = self.incoming.saturating_sub(1);
    }

    /// Requests routed here whose KV has not arrived yet.
    pub fn num_incoming(&self) -> usize {
        self.incoming
    }

    /// A request handed off here found no ready decode replica.
    pub fn hold_for_decode(&mut self) {
        self.held_for_decode += 1;
    }

    /// A request waiting for a ready decode replica left the wait.
    pub fn end_hold_for_decode(&mut self) {
        self.held_for_decode = self.held_for_decode.saturating_sub(1);
    }

    /// Handed-off requests waiting for a ready decode replica.
    pub fn num_held_for_decode(&self) -> usize {
        self.held_for_decode
    }

    /// Queues `request`, whose prompt KV arrived from a prefill instance (SGLang's decode
    /// server: its prealloc queue). It joins the running batch once its prompt's pages fit
    /// (see `admit.rs`), and decodes from its first token on.
    pub fn receive(&mut self, request: &Request, kv: ReceivedKv) {
        self.incoming = self.incoming.saturating_sub(1);
        let mut r = RunningRequest::new(request, &self.request_view);
        r.computed = 0;
        r.reached = request.input_toks + 1;
        r.phase = Phase::Decode;
        r.first_token_ns = kv.pd.transfer_end_ns;
        r.itl_from_ns = Some(kv.pd.transfer_end_ns);
        r.queuing_delay_ns = kv.queuing_delay_ns;
        r.prefix_recorded = true;
        r.pd = Some(Box::new(kv.pd));
        r.priority = kv.priority;
        r.nominal = kv.nominal;
        let keys = PageKeys::new(request, !self.tree.disabled());
        let slot = self.new_slot(r, keys, true);
        self.received.push_back(slot);
    }

    fn note(&mut self, decision: SchedDecision) {
        if let Some(log) = &mut self.decisions {
            log.push(decision);
        }
    }
}
