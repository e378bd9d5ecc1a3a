//! The seam between the engine's loop and an instance's engine core: [`Core`] is vLLM's
//! [`Scheduler`] or SGLang's [`SglangScheduler`], chosen per instance (`--engine`, a cluster
//! config's `engine`). The loop forms a pass with [`Core::schedule`] (its batch priced by the
//! instance's latency backend), applies it with [`Core::complete_step`] (finished requests
//! handed back as values), queues and takes out requests, moves P/D hand-offs and reads what
//! the router's signals see; nothing else. A closed enum rather than a trait object: two
//! cores, matched once per call.

use super::sglang::SglangScheduler;
use super::{
    Cancelled, Completions, Evicted, Handoff, OffloadLoad, PreemptionOrder, QueueOrder, ReceivedKv,
    SchedDecision, Scheduler, SchedulerBug, SchedulerConfig, SchedulerStats, StepTokens,
};
use crate::Nanos;
use crate::latency::{BatchItem, DecodeLead};
use crate::workload::Request;
use serde::Serialize;

/// Which engine an instance runs (`--engine`, a cluster config's `engine`).
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
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Engine {
    /// vLLM V1's scheduler (budget, chunked prefill, KV blocks, prefix caching, preemption)
    #[default]
    Vllm,
    /// SGLang's scheduler (prefill-first passes, new-token ratio, retraction, radix cache)
    Sglang,
}

impl crate::choice::Choice for Engine {
    const WHAT: &'static str = "engine";
    fn name(&self) -> &'static str {
        self.into()
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(crate::choice::Choice::name(self))
    }
}

/// An instance's engine core (see the module docs). vLLM's scheduler is held inline: one
/// core per instance, and its calls are the engine's hot path (no indirection added there).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Core {
    Vllm(Scheduler),
    Sglang(Box<SglangScheduler>),
}

/// Calls `$body` on the core whichever it is.
macro_rules! each {
    ($core:expr, $s:ident => $body:expr) => {
        match $core {
            Core::Vllm($s) => $body,
            Core::Sglang($s) => $body,
        }
    };
}

impl Core {
    /// The engine it runs.
    pub fn engine(&self) -> Engine {
        match self {
            Core::Vllm(_) => Engine::Vllm,
            Core::Sglang(_) => Engine::Sglang,
        }
    }

    /// vLLM's scheduler, if this is one.
    pub fn vllm(&self) -> Option<&Scheduler> {
        match self {
            Core::Vllm(s) => Some(s),
            Core::Sglang(_) => None,
        }
    }

    /// vLLM's scheduler, if this is one.
    pub fn vllm_mut(&mut self) -> Option<&mut Scheduler> {
        match self {
            Core::Vllm(s) => Some(s),
            Core::Sglang(_) => None,
        }
    }

    /// SGLang's scheduler, if this is one.
    pub fn sglang(&self) -> Option<&SglangScheduler> {
        match self {
            Core::Sglang(s) => Some(s),
            Core::Vllm(_) => None,
        }
    }

    /// Warms the CPU cache for the core's next step (see `scheduler/warm.rs`); changes
    /// nothing.
    pub fn warm(&self) {
        match self {
            Core::Vllm(s) => s.warm(),
            Core::Sglang(_) => {}
        }
    }

    /// Forms the next pass at `now`; `None` when nothing can run.
    pub fn schedule(&mut self, now: Nanos) -> Result<Option<&[BatchItem]>, SchedulerBug> {
        each!(self, s => s.schedule(now))
    }

    /// Applies the pass formed first of those in flight, finished at `finish`.
    pub fn complete_step(&mut self, finish: Nanos, instance_id: u32, finished: &mut Completions) {
        each!(self, s => s.complete_step(finish, instance_id, finished))
    }

    /// Forms the next pass at `now` without writing what the pricing need not read (see
    /// [`Scheduler::form_step`]); returns whether one was formed.
    pub fn form_step(&mut self, now: Nanos) -> Result<bool, SchedulerBug> {
        match self {
            Core::Vllm(s) => s.form_step(now),
            Core::Sglang(s) => Ok(s.schedule(now)?.is_some()),
        }
    }

    /// How many items the batch formed last has (written or not).
    pub fn formed_len(&self) -> usize {
        match self {
            Core::Vllm(s) => s.formed_len(),
            Core::Sglang(s) => s.last_batch().len(),
        }
    }

    /// The batch formed by the last [`Core::schedule`] (see [`Scheduler::last_batch`]).
    pub fn last_batch(&self) -> &[BatchItem] {
        each!(self, s => s.last_batch())
    }

    /// The batch formed last, every item written (see [`Scheduler::written_batch`]).
    pub fn written_batch(&mut self) -> &[BatchItem] {
        match self {
            Core::Vllm(s) => s.written_batch(),
            Core::Sglang(s) => s.last_batch(),
        }
    }

    /// What is known of the last formed batch's first items without reading them (SGLang's
    /// passes: nothing).
    pub fn last_lead(&self) -> DecodeLead {
        match self {
            Core::Vllm(s) => s.last_lead(),
            Core::Sglang(_) => DecodeLead::default(),
        }
    }

    /// The batch of the pass completed last.
    pub fn completed_batch(&mut self) -> &[BatchItem] {
        match self {
            Core::Vllm(s) => s.completed_batch(),
            Core::Sglang(s) => s.last_batch(),
        }
    }

    /// Time to load what the last pass recalled from a lower KV tier, ns.
    pub fn last_recall_ns(&self) -> Nanos {
        match self {
            Core::Vllm(s) => s.last_recall_ns(),
            Core::Sglang(_) => 0,
        }
    }

    /// KV tokens of the last formed pass a decode instance would need.
    pub fn last_kv_send_tokens(&self) -> u64 {
        each!(self, s => s.last_kv_send_tokens())
    }

    /// Tokens the pass completed last computed.
    pub fn last_step_tokens(&self) -> StepTokens {
        each!(self, s => s.last_step_tokens())
    }

    /// Requests waiting for admission.
    pub fn num_waiting(&self) -> usize {
        each!(self, s => s.num_waiting())
    }

    /// Requests admitted and not finished.
    pub fn num_running(&self) -> usize {
        each!(self, s => s.num_running())
    }

    /// Whether any request waits or runs.
    pub fn has_work(&self) -> bool {
        each!(self, s => s.has_work())
    }

    /// Whether another pass may be formed now.
    pub fn can_form_step(&self) -> bool {
        each!(self, s => s.can_form_step())
    }

    /// Passes formed and not completed.
    pub fn steps_in_flight(&self) -> usize {
        each!(self, s => s.steps_in_flight())
    }

    /// The engine-neutral settings (SGLang's mapped: places, budget, page size, caching).
    pub fn config(&self) -> &SchedulerConfig {
        each!(self, s => s.config())
    }

    /// KV blocks (SGLang: pages) held by requests.
    pub fn kv_blocks_used(&self) -> usize {
        match self {
            Core::Vllm(s) => s.pool().num_pinned(),
            Core::Sglang(s) => s.kv_pages_used(),
        }
    }

    /// KV offloading's CPU tier occupancy and link queue at `now` (none: all zero; SGLang
    /// has no KV offloading here).
    pub fn offload_load(&self, now: Nanos) -> OffloadLoad {
        match self {
            Core::Vllm(s) => s.offload_load(now).unwrap_or_default(),
            Core::Sglang(_) => OffloadLoad::default(),
        }
    }

    /// KV blocks (pages) of the instance.
    pub fn kv_blocks(&self) -> usize {
        match self {
            Core::Vllm(s) => s.pool().num_blocks(),
            Core::Sglang(s) => s.kv_pages(),
        }
    }

    /// KV blocks (pages) free, or cached and reusable.
    pub fn kv_blocks_free(&self) -> usize {
        match self {
            Core::Vllm(s) => s.pool().num_free(),
            Core::Sglang(s) => s.kv_pages_available(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> SchedulerStats {
        each!(self, s => s.stats())
    }

    /// Whether completing the step in flight would end no request (vLLM's decode stretches,
    /// [`Scheduler::in_flight_ends_nothing`]; SGLang's core never says so).
    pub fn in_flight_ends_nothing(&self) -> bool {
        match self {
            Core::Vllm(s) => s.in_flight_ends_nothing(),
            Core::Sglang(_) => false,
        }
    }

    /// Prompt tokens looked up in the prefix cache so far, and of those the tokens found
    /// there: what a step's end reads of [`Core::stats`], without copying them all.
    pub fn prefix_tokens(&self) -> (u64, u64) {
        each!(self, s => s.prefix_tokens())
    }

    /// Leading blocks of the chain `hashes` the prefix cache holds now.
    pub fn cached_prefix_blocks(&self, hashes: &[u64]) -> usize {
        each!(self, s => s.cached_prefix_blocks(hashes))
    }

    /// Leading blocks of `hashes` the prefix cache held at `t` (SGLang's radix cache keeps
    /// no history: as it is now).
    pub fn cached_prefix_blocks_at(&self, hashes: &[u64], t: Nanos) -> usize {
        match self {
            Core::Vllm(s) => s.cached_prefix_blocks_at(hashes, t),
            Core::Sglang(s) => s.cached_prefix_blocks(hashes),
        }
    }

    /// Keeps the prefix cache's history (vLLM; SGLang's has none).
    pub fn keep_cache_history(&mut self) {
        if let Core::Vllm(s) = self {
            s.keep_cache_history();
        }
    }

    /// Forgets the prefix cache's history before `t`.
    pub fn forget_cache_history_before(&mut self, t: Nanos) {
        if let Core::Vllm(s) = self {
            s.forget_cache_history_before(t);
        }
    }

    /// Queues an arrived request.
    pub fn enqueue(&mut self, request: &Request) {
        self.enqueue_ranked(request, 0, 0);
    }

    /// Queues an arrived request with the control plane's priority.
    pub fn enqueue_with_priority(&mut self, request: &Request, priority: i32) {
        self.enqueue_ranked(request, priority, priority);
    }

    /// Queues an arrived request with its priority and nominal urgency.
    pub fn enqueue_ranked(&mut self, request: &Request, priority: i32, nominal: i32) {
        each!(self, s => s.enqueue_ranked(request, priority, nominal))
    }

    /// [`Core::enqueue_ranked`] given `known`, the chained hashes of the request's leading
    /// full blocks at this core's block size that the router computed already (the vLLM
    /// core copies them; SGLang's keys its radix cache its own way).
    pub fn enqueue_hashed(&mut self, req: &Request, priority: i32, nominal: i32, known: &[u64]) {
        match self {
            Core::Vllm(s) => s.enqueue_hashed(req, priority, nominal, known),
            Core::Sglang(s) => s.enqueue_ranked(req, priority, nominal),
        }
    }

    /// Queues a request whose prompt KV arrived from a prefill instance.
    pub fn receive(&mut self, request: &Request, kv: ReceivedKv) {
        each!(self, s => s.receive(request, kv))
    }

    /// Ends request `id` if it is here.
    pub fn cancel(&mut self, id: u64) -> Option<Cancelled> {
        each!(self, s => s.cancel(id))
    }

    /// Takes requests out of an idle instance (a replica leaving).
    pub fn evict(&mut self, all: bool, out: &mut Vec<Evicted>) {
        each!(self, s => s.evict(all, out))
    }

    /// Makes this a prefill instance's core.
    pub fn hand_off_prefills(&mut self) {
        each!(self, s => s.hand_off_prefills())
    }

    /// The next request handed off.
    pub fn pop_handoff(&mut self) -> Option<Handoff> {
        each!(self, s => s.pop_handoff())
    }

    /// Whether the passes completed so far handed off a request not collected yet
    /// ([`Core::pop_handoff`]).
    pub fn has_handoffs(&self) -> bool {
        each!(self, s => s.has_handoffs())
    }

    /// Handed-off requests whose KV is still held.
    pub fn num_handed_off(&self) -> usize {
        each!(self, s => s.num_handed_off())
    }

    /// Whether a KV transfer's end will bring this instance work when no pass can be formed
    /// now: KV held here for a transfer, or (vLLM's P/D flow) KV being pulled here.
    pub fn awaits_kv(&self) -> bool {
        match self {
            Core::Vllm(s) => s.awaits_kv(),
            Core::Sglang(s) => s.num_handed_off() > 0,
        }
    }

    /// LMCache's P/D flow: queues `request`, sent here with its prompt KV already loaded
    /// (see [`Scheduler::receive_loaded`]). Only a vLLM decode instance follows that flow: an
    /// SGLang one gets its requests as [`Core::receive`] queues them.
    pub fn receive_loaded(&mut self, request: &Request, kv: ReceivedKv) {
        match self {
            Core::Vllm(s) => s.receive_loaded(request, kv),
            Core::Sglang(s) => s.receive(request, kv),
        }
    }

    /// vLLM's P/D flow: queues `request`, sent here by the proxy while its KV is still on
    /// its prefill instance (see [`Scheduler::receive_remote`]). Only a vLLM decode instance
    /// is sent requests this way: an SGLang one gets them with their KV ([`Core::receive`]).
    pub fn receive_remote(&mut self, request: &Request, kv: ReceivedKv) {
        match self {
            Core::Vllm(s) => s.receive_remote(request, kv),
            Core::Sglang(s) => s.receive(request, kv),
        }
    }

    /// vLLM's P/D flow: the next request whose KV pull a pass just reached.
    pub fn pop_pull_start(&mut self) -> Option<u64> {
        match self {
            Core::Vllm(s) => s.pop_pull_start(),
            Core::Sglang(_) => None,
        }
    }

    /// vLLM's P/D flow: whether a pass formed so far started a KV pull not collected yet
    /// ([`Core::pop_pull_start`]).
    pub fn has_pull_starts(&self) -> bool {
        match self {
            Core::Vllm(s) => s.has_pull_starts(),
            Core::Sglang(_) => false,
        }
    }

    /// vLLM's P/D flow: the KV of request `id`, pulled from `start`, landed here at `now`.
    pub fn kv_landed(&mut self, id: u64, start: Nanos, now: Nanos) -> Result<(), SchedulerBug> {
        match self {
            Core::Vllm(s) => s.kv_landed(id, start, now),
            Core::Sglang(_) => Err(SchedulerBug::new(format!(
                "request {id}: an SGLang instance pulls no KV (it receives it pushed)"
            ))),
        }
    }

    /// Whether the records of finished requests list their inter-token latencies (on by
    /// default; off, they are only pooled).
    pub fn keep_itl_values(&mut self, on: bool) {
        each!(self, s => s.keep_itl_values(on))
    }

    /// Lets go of step finish times once `steps` are held (see
    /// [`Scheduler::retire_steps_after`]).
    pub fn retire_steps_after(&mut self, steps: usize) {
        each!(self, s => s.retire_steps_after(steps))
    }

    /// The finish times of its completed steps that the records of the requests it finished
    /// read ([`Completions::record`]). Out of line: the engine's step reads it per finished
    /// request, and in line it grew `Cluster::step` by a copy per engine.
    #[inline(never)]
    pub fn step_times(&self) -> crate::metrics::StepWindow<'_> {
        each!(self, s => s.step_times())
    }

    /// Moves the inter-token gaps of every request finished here so far to `out`, leaving
    /// none here.
    pub fn take_itl_counts(&mut self, out: &mut crate::metrics::IntegerCounts) {
        each!(self, s => s.take_itl_counts(out))
    }

    /// Frees a handed-off request whose transfer ended.
    pub fn release_handoff(&mut self, slot: u32) -> Result<usize, SchedulerBug> {
        each!(self, s => s.release_handoff(slot))
    }

    /// A request was routed here and its KV is on its way.
    pub fn expect_incoming(&mut self) {
        each!(self, s => s.expect_incoming())
    }

    /// A request routed here will not come after all.
    pub fn cancel_incoming(&mut self) {
        each!(self, s => s.cancel_incoming())
    }

    /// Requests routed here whose KV has not arrived.
    pub fn num_incoming(&self) -> usize {
        each!(self, s => s.num_incoming())
    }

    /// A handed-off request waits for a ready decode replica.
    pub fn hold_for_decode(&mut self) {
        each!(self, s => s.hold_for_decode())
    }

    /// A request waiting for a decode replica left the wait.
    pub fn end_hold_for_decode(&mut self) {
        each!(self, s => s.end_hold_for_decode())
    }

    /// Handed-off requests waiting for a ready decode replica.
    pub fn num_held_for_decode(&self) -> usize {
        each!(self, s => s.num_held_for_decode())
    }

    /// Sets the control plane's queue order and preemption choice (SGLang takes the
    /// priority order as its priority scheduling; it retracts by its own rule).
    pub fn set_policies(&mut self, order: QueueOrder, preemption: PreemptionOrder) {
        match self {
            Core::Vllm(s) => s.set_policies(order, preemption),
            Core::Sglang(s) => s.set_queue_order(order),
        }
    }

    /// Turns the noting of decisions on, for the decision trace.
    pub fn trace_decisions(&mut self) {
        each!(self, s => s.trace_decisions())
    }

    /// The decisions noted since the last call.
    pub fn take_decisions(&mut self) -> impl Iterator<Item = SchedDecision> + '_ {
        let log = match self {
            Core::Vllm(s) => s.decisions.as_mut(),
            Core::Sglang(s) => s.decision_log(),
        };
        log.into_iter().flat_map(|d| d.drain(..))
    }
}
