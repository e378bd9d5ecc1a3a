//! The scheduler's side of prefill/decode disaggregation.
//!
//! On a **prefill** instance ([`Scheduler::hand_off_prefills`]) a request whose prompt
//! completes produces its first token and leaves the running set, but keeps its slot and KV
//! blocks: the blocks are the transfer's source and are freed only when the engine reports
//! the transfer done ([`Scheduler::release_handoff`]). A request that wants a single token is
//! finished right there (nothing is left to decode, nothing is transferred).
//!
//! On a **decode** instance, vLLM's flow (the default, [`Scheduler::receive_remote`]) queues
//! the request as the proxy sends it, right after its prefill: it waits like any request
//! (async scheduling: the step after the next), and when a step reaches it at the head of the
//! waiting queue (within `max_num_seqs`, with a token budget and KV blocks for its prompt) the
//! step starts pulling its prompt KV ([`Scheduler::pop_pull_start`]; vLLM's NixlConnector
//! allocates the blocks and reads asynchronously, the request `WAITING_FOR_REMOTE_KVS`) and
//! admission goes on behind it. When the KV has landed ([`Scheduler::kv_landed`]) it waits
//! again at the head of the queue (under FCFS behind the landed requests whose pulls started
//! before its own, so that landing out of order does not reorder them: vLLM keeps such a
//! request at its place in the queue), seen by the next step formed after the landing (the step
//! after that under async scheduling: vLLM learns of a finished read from a step's output),
//! with all but the last prompt token computed: that step computes the last one, and its end
//! is the first token the client sees. (vLLM allocates the blocks as the pull starts; here
//! a pull starts only when its prompt's blocks are free beside those of the pulls in flight,
//! and takes them at admission, once the KV has landed, so running decodes may still grow
//! into them meanwhile.)
//!
//! LMCache's flow (`--pd-flow lmcache`, [`Scheduler::receive_loaded`]) queues a request
//! whose prompt KV arrived as any request arriving now, with all but its last prompt token
//! computed: the first step that admits it loads the KV and computes that token, and its end
//! is the first token.
//!
//! LLMServingSim's accounting (`--pd-flow llmservingsim`, [`Scheduler::receive`]) queues a
//! request whose prompt KV arrived:
//! it waits at the back of the waiting queue and is admitted like any other request, under
//! `max_num_seqs`, the token budget and the free KV blocks, needing blocks for the prompt plus
//! the first token. Its prompt blocks may come from the decode instance's prefix cache (then
//! they are shared, not allocated again); it computes nothing of the prompt: its first step
//! decodes the first token (context = the prompt), exactly like a colocated request's first
//! decode step. If it is preempted later, it is recomputed on the decode instance like any
//! preempted request.

use super::request::{KvPull, Phase};
use super::{QueueOrder, Scheduler, SchedulerBug, request::RunningRequest};
use crate::Nanos;
use crate::metrics::PdRecord;
use crate::workload::Request;

/// A request a prefill instance handed off at the end of its prefill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handoff {
    /// The request's slot on the prefill instance, for [`Scheduler::release_handoff`].
    pub slot: u32,
    /// Request id.
    pub request_id: u64,
    /// Prompt tokens, whose KV is transferred.
    pub prompt_tokens: u32,
    /// KV blocks it holds on the prefill instance until the transfer ends.
    pub blocks: usize,
    /// Schedule time of its last prefill chunk minus arrival, ns.
    pub queuing_delay_ns: Nanos,
    /// Its control-plane priority (0 without one), which the decode side keeps.
    pub priority: i32,
    /// Its nominal urgency (anomaly detection), which the decode side keeps.
    pub nominal: i32,
}

/// A prompt KV cache arriving at a decode instance, with the request's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceivedKv {
    /// Schedule time of the last prefill chunk minus arrival (on the prefill instance), ns.
    pub queuing_delay_ns: Nanos,
    /// Where the prompt ran and how the KV came; `decode_admitted_ns` is set on admission.
    pub pd: PdRecord,
    /// Its control-plane priority (0 without one): the decode instance's waiting queue
    /// orders it by it under `--scheduler priority-fcfs` and the like, as a colocated
    /// instance does.
    pub priority: i32,
    /// Its nominal urgency (anomaly detection): decode-side priority inversions are judged
    /// by it, as on any instance.
    pub nominal: i32,
}

impl Scheduler {
    /// Makes this a prefill instance's scheduler: requests leave when their prompt completes
    /// and are collected with [`Scheduler::pop_handoff`].
    pub fn hand_off_prefills(&mut self) {
        self.hand_off = true;
    }

    /// The next request handed off by the steps completed so far, in completion order.
    pub fn pop_handoff(&mut self) -> Option<Handoff> {
        let slot = self.handoffs.pop_front()?;
        let req = self.slots[slot as usize].as_ref().expect("handed-off slot");
        Some(Handoff {
            slot,
            request_id: req.id,
            prompt_tokens: req.input_toks,
            blocks: req.blocks.len(),
            queuing_delay_ns: req.queuing_delay_ns,
            priority: req.priority,
            nominal: req.nominal,
        })
    }

    /// Requests handed off whose KV blocks are still held.
    pub fn num_handed_off(&self) -> usize {
        self.handed_off
    }

    /// Whether the steps completed so far handed off a request not collected yet.
    pub fn has_handoffs(&self) -> bool {
        !self.handoffs.is_empty()
    }

    /// Whether a KV transfer's end will bring this instance work when no step can be formed
    /// now: blocks held for a transfer from here, or KV being pulled here (vLLM's flow).
    pub fn awaits_kv(&self) -> bool {
        self.handed_off > 0 || !self.pulling.is_empty()
    }

    /// Frees the KV blocks (last block first) and the slot of a handed-off request whose
    /// transfer has ended; returns how many blocks were freed.
    pub fn release_handoff(&mut self, slot: u32) -> Result<usize, SchedulerBug> {
        let req = self.slots.get_mut(slot as usize).and_then(Option::take);
        let Some(req) = req.filter(|r| r.phase == Phase::HandedOff) else {
            return Err(SchedulerBug::new(format!(
                "slot {slot} holds no handed-off request"
            )));
        };
        self.pool.release_all(req.blocks.iter().rev().copied());
        self.free_slots.push(slot);
        self.handed_off -= 1;
        Ok(req.blocks.len())
    }

    /// Notes that a request was routed here and its KV cache is on its way; routing counts it
    /// as waiting until [`Scheduler::receive`].
    pub fn expect_incoming(&mut self) {
        self.incoming += 1;
    }

    /// A request routed here will not come after all (it timed out during its transfer).
    pub fn cancel_incoming(&mut self) {
        self.incoming = self.incoming.saturating_sub(1);
    }

    /// Requests routed here whose KV cache has not arrived yet (vLLM's flow: whose pull has
    /// started; those whose pull waits for a step are in the waiting queue).
    pub fn num_incoming(&self) -> usize {
        self.incoming + self.pulling.len()
    }

    /// A request handed off here found no ready decode replica: it waits, its KV kept here.
    pub fn hold_for_decode(&mut self) {
        self.held_for_decode += 1;
    }

    /// A request waiting for a ready decode replica left the wait (sent, or timed out).
    pub fn end_hold_for_decode(&mut self) {
        self.held_for_decode = self.held_for_decode.saturating_sub(1);
    }

    /// Handed-off requests waiting for a ready decode replica.
    pub fn num_held_for_decode(&self) -> usize {
        self.held_for_decode
    }

    /// Queues `request`, whose prompt ran on a prefill instance and whose prompt KV has just
    /// arrived (at `kv.pd.transfer_end_ns`, which is its first token's time), in the waiting
    /// queue: at the back under FCFS, else at its place in the queue's order.
    pub fn receive(&mut self, request: &Request, kv: ReceivedKv) {
        self.incoming = self.incoming.saturating_sub(1);
        let mut state = self.handed_over(request, kv);
        state.computed = request.input_toks;
        state.reached = request.input_toks + 1;
        state.phase = Phase::Decode;
        state.first_token_ns = kv.pd.transfer_end_ns;
        state.itl_from_ns = Some(kv.pd.transfer_end_ns);
        self.push_waiting(state);
    }

    /// LMCache's P/D flow: queues `request`, whose prompt ran on a prefill instance and whose
    /// prompt KV is here now (`kv.pd.transfer_end_ns`), at the back of the waiting queue
    /// under FCFS (else at its place in the queue's order), as the proxy sends it once the
    /// prefill instance has answered. The first step that admits it loads the KV (vLLM 0.13's
    /// `LMCacheConnectorV1.get_num_new_matched_tokens` loads synchronously) with all but the
    /// last prompt token computed: that step computes the last one, and its end is the first
    /// token the client sees.
    pub fn receive_loaded(&mut self, request: &Request, kv: ReceivedKv) {
        self.incoming = self.incoming.saturating_sub(1);
        let mut state = self.handed_over(request, kv);
        state.computed = request.input_toks.saturating_sub(1);
        state.eligible_step = self.first_step_for_arrival();
        self.push_waiting(state);
    }

    /// The state of `request`, whose prompt ran on a prefill instance (`kv`), queued here now:
    /// its history and priority carried over, its prompt's prefix-cache lookup counted where
    /// it ran, and its place among the requests queued here (anomaly detection) taken now.
    fn handed_over(&mut self, request: &Request, kv: ReceivedKv) -> RunningRequest {
        debug_assert!(
            request.output_toks > 1,
            "one-token requests are never handed off"
        );
        let mut state = RunningRequest::new(request, &self.config);
        state.queuing_delay_ns = kv.queuing_delay_ns;
        state.prefix_recorded = true;
        state.pd = Some(Box::new(kv.pd));
        state.priority = kv.priority;
        state.nominal = kv.nominal;
        if let Some(w) = &mut self.watch {
            // Queued on this instance now: it overtakes, or is overtaken by, what queued here
            // before or after it.
            state.seq = w.next_seq();
        }
        state
    }
}

/// What admission did with the request at the head of the waiting queue
/// ([`Scheduler::start_pull`]).
pub(super) enum PullStart {
    /// Its KV is not pulled: admit it as usual.
    Local,
    /// Its pull starts with this step; admission goes on behind it.
    Started,
    /// Its prompt's blocks are not free: admission stops here.
    NoRoom,
}

impl Scheduler {
    /// vLLM's P/D flow: queues `request`, whose prompt ran on a prefill instance that holds its
    /// KV (`kv.pd` says where and when), as the proxy sends it here. A step starts the pull
    /// when it reaches the request ([`Scheduler::pop_pull_start`]).
    pub fn receive_remote(&mut self, request: &Request, kv: ReceivedKv) {
        let mut state = self.handed_over(request, kv);
        state.pull = KvPull::Pending;
        state.eligible_step = self.first_step_for_arrival();
        self.push_waiting(state);
    }

    /// Starts the pull of the request in `slot`, at the head of the waiting queue, with the
    /// step being formed, if its KV is to be pulled and its prompt's blocks are free.
    pub(super) fn start_pull(&mut self, slot: u32) -> PullStart {
        let block = self.config.block_size;
        let req = self.slots[slot as usize].as_mut().expect("waiting slot");
        if req.pull != KvPull::Pending {
            return PullStart::Local;
        }
        let blocks = req.input_toks.div_ceil(block) as usize;
        if self.pulled_blocks + blocks > self.pool.num_free() {
            return PullStart::NoRoom;
        }
        self.pulled_blocks += blocks;
        self.pulls_started += 1;
        req.pull = KvPull::Pulling(self.pulls_started);
        self.pull_starts.push_back(req.id);
        self.waiting.pop_front();
        self.pulling.push(slot);
        PullStart::Started
    }

    /// The next request whose KV pull the steps formed so far started, in start order.
    pub fn pop_pull_start(&mut self) -> Option<u64> {
        self.pull_starts.pop_front()
    }

    /// Whether a step formed so far started a KV pull not collected yet.
    pub fn has_pull_starts(&self) -> bool {
        !self.pull_starts.is_empty()
    }

    /// The prompt KV of request `id`, pulled from `start`, landed here at `now`: the request
    /// waits at the head of the queue for the step that computes its last prompt token (the
    /// first step formed after `now`; the one after under async scheduling).
    pub fn kv_landed(&mut self, id: u64, start: Nanos, now: Nanos) -> Result<(), SchedulerBug> {
        let slots = &self.slots;
        let Some(pos) = self
            .pulling
            .iter()
            .position(|&s| slots[s as usize].as_ref().is_some_and(|r| r.id == id))
        else {
            return Err(SchedulerBug::new(format!(
                "the KV of request {id} landed but it pulls nothing here"
            )));
        };
        let slot = self.pulling.remove(pos);
        let order = match self.slots[slot as usize].as_ref().map(|r| r.pull) {
            Some(KvPull::Pulling(order)) => order,
            _ => 0,
        };
        self.end_pull(slot);
        let first_step = self.first_step_for_arrival();
        let req = self.slots[slot as usize].as_mut().expect("pulling slot");
        req.pull = KvPull::Landed(order);
        req.computed = req.input_toks.saturating_sub(1);
        if let Some(pd) = req.pd.as_mut() {
            pd.transfer_start_ns = start;
            pd.transfer_end_ns = now;
            // Until its admission (a prompt of one token is admitted as a fresh request).
            pd.decode_admitted_ns = now;
        }
        req.eligible_step = first_step;
        self.queue_landed(slot, order);
        Ok(())
    }

    /// Queues a request whose KV landed, its pull the `order`-th started here: at the head of
    /// a FCFS queue, behind the landed requests whose pulls started before its own (pulls
    /// start in queue order, so these keep their FCFS order whatever order their KV lands
    /// in); by its key under another order.
    fn queue_landed(&mut self, slot: u32, order: u64) {
        if self.order != QueueOrder::Fcfs {
            self.queue_waiting(slot, true);
            return;
        }
        let slots = &self.slots;
        let at = self
            .waiting
            .iter()
            .take_while(|&&s| {
                slots[s as usize]
                    .as_ref()
                    .is_some_and(|r| matches!(r.pull, KvPull::Landed(o) if o < order))
            })
            .count();
        self.waiting.insert(at, slot);
    }

    /// The pull of the request in `slot` ended (its KV landed, or it was cancelled): the
    /// blocks set aside for it are free again for other pulls to start.
    pub(super) fn end_pull(&mut self, slot: u32) {
        let block = self.config.block_size;
        if let Some(req) = self.slots[slot as usize].as_mut() {
            let blocks = req.input_toks.div_ceil(block) as usize;
            self.pulled_blocks = self.pulled_blocks.saturating_sub(blocks);
            req.pull = KvPull::Local;
        }
    }
}
