//! Prefill/decode disaggregation in the engine: hand-offs, KV transfers, delivery.
//!
//! Three flows ([`PdFlow`]). **vLLM's** (the default) follows vLLM's disaggregated serving with
//! its NixlConnector: a proxy sends the request to a prefill instance with `max_tokens = 1`,
//! then, when that answers, to a decode instance. At the hand-off the decode instance is chosen
//! as below and the request is queued there at once ([`Scheduler::receive_remote`]); the KV
//! transfer starts when a step of the decode instance reaches it in its waiting queue (the
//! step's start, [`Transfers::start_pulls`]); when the KV has landed the request waits for the
//! step that computes its last prompt token, whose end is its first token. The prefill
//! instance's token is not the client's. **LMCache's** (`--pd-flow lmcache`: vLLM with
//! `LMCacheConnectorV1` between the instances) sends the KV as LLMServingSim's accounting
//! below does, the prefill instance answering the proxy once it is sent, so the request
//! reaches its decode instance with its KV; there the first step that admits it loads the KV
//! and computes its last prompt token, whose end is the first token
//! ([`Scheduler::receive_loaded`]). **LLMServingSim's** accounting (`--pd-flow
//! llmservingsim`, and `--llmservingsim`) is the rest of this page:
//!
//! When a step on a prefill instance completes a request's prompt, the request is handed off
//! (its first token is sampled there; see [`crate::scheduler`]). At that instant the
//! decode-side router picks a decode instance of the same model among those that can take
//! the request, seeing their state then (requests already on their way to an instance count
//! as waiting there), through the run's signals, as stale as the prefill router sees them
//! (`signals.rs`). The prompt's KV cache, `prompt tokens × full-model KV bytes per token`,
//! is sent over the link between the two instances ([`crate::config::ClusterLinks`]) and takes
//! `latency + bytes / bandwidth`. Each prefill instance sends one transfer at a time, in
//! hand-off order (a FIFO per sender: transfers contend for the sender's link); its KV blocks
//! stay held until its own transfer ends. When the transfer ends the prefill blocks are freed
//! and the decode instance queues the request; that instant is the request's first token
//! (TTFT includes prefill queueing, the prefill, the link wait and the transfer, like
//! LLMServingSim, whose prefill batch completes only once the KV has arrived).
//!
//! In an autoscaled run (`crate::autoscale`) only ready decode replicas are candidates (a
//! draining one takes no new hand-off); a hand-off that finds none is held, its KV kept on
//! the prefill instance, and sent in hand-off order when a decode replica becomes ready.
//!
//! A hand-off is not a completion: observers (and the run's [`super::Injector`]) hear of the
//! request only when its last token comes out on the decode instance. A request released at
//! run time, or admitted late in concurrency mode, is handed over as it entered the run.

use super::SimError;
use super::cluster::effects::{Effect, Effects};
use super::cores::Cores;
use super::eligibility::{Eligibility, Groups};
use super::events::EventKind;
use super::hol::blocks_head_of_line;
use super::instance::InstanceSim;
use super::signals::{Side, Signals};
use crate::Nanos;
use crate::autoscale::Autoscaler;
use crate::config::{InstanceRole, Link, PdFlow};
use crate::metrics::PdRecord;
use crate::observe::TransferEvent;
use crate::router::Router;
use crate::scheduler::{Core, Engine, Handoff, ReceivedKv, SchedulerBug};
use crate::workload::Request;
use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};

/// What a cluster with prefill and decode instances needs beyond its instances' setups.
#[derive(Debug)]
pub struct Disaggregation {
    flow: PdFlow,
    roles: Vec<InstanceRole>,
    kv_bytes_per_token: Vec<u64>,
    /// Instances come in groups of this many consecutive ids sharing their links.
    group: usize,
    /// Row-major over the groups: the link from group `i` to group `j` is at `i · g + j`
    /// (`g` groups).
    pub links: Vec<Link>,
    router: Router,
}

impl Disaggregation {
    /// `roles` and `kv_bytes_per_token` (full-model KV bytes per token, all TP ranks) give
    /// one entry per instance, by id; `link(from, to)` is the link a transfer from instance
    /// `from` to instance `to` takes; `router` picks decode instances (give it its own random
    /// stream, [`Router::with_stream`]).
    pub fn new(
        roles: Vec<InstanceRole>,
        kv_bytes_per_token: Vec<u64>,
        router: Router,
        link: impl Fn(usize, usize) -> Link,
    ) -> Disaggregation {
        Disaggregation::grouped(roles, kv_bytes_per_token, router, 1, link)
    }

    /// [`Disaggregation::new`] for instances in groups of `group` consecutive ids that share
    /// their links (an autoscaled run's replica slots of one template): `link(from, to)`
    /// is given group numbers, and the links are held per pair of groups, not of instances.
    pub fn grouped(
        roles: Vec<InstanceRole>,
        kv_bytes_per_token: Vec<u64>,
        router: Router,
        group: usize,
        link: impl Fn(usize, usize) -> Link,
    ) -> Disaggregation {
        let n = roles.len();
        assert_eq!(n, kv_bytes_per_token.len(), "one KV size per instance");
        assert!(
            group > 0 && n.is_multiple_of(group),
            "whole groups of instances"
        );
        let g = n / group;
        let links = (0..g * g).map(|k| link(k / g, k % g)).collect();
        Disaggregation {
            flow: PdFlow::default(),
            roles,
            kv_bytes_per_token,
            group,
            links,
            router,
        }
    }

    /// The link a transfer from instance `from` to instance `to` takes.
    pub fn link(&self, from: usize, to: usize) -> &Link {
        let g = self.roles.len() / self.group;
        &self.links[(from / self.group) * g + to / self.group]
    }

    /// The same setup with its P/D flow `flow`.
    pub fn with_flow(mut self, flow: PdFlow) -> Disaggregation {
        self.flow = flow;
        self
    }

    /// The role of every instance, by id.
    pub fn roles(&self) -> &[InstanceRole] {
        &self.roles
    }
}

/// What the choice of a decode instance reads: the instances' candidate lists (and models),
/// the run's signals (the same snapshots, as stale, as the prefill router sees) and, in an
/// autoscaled run, the autoscaler (only ready replicas take hand-offs).
pub(super) struct DecodeChoice<'a, 'r> {
    pub eligibility: &'a Eligibility,
    pub signals: &'a mut Signals,
    pub instances: &'a [InstanceSim<'r>],
    pub autoscaler: Option<&'a Autoscaler>,
}

/// A transfer waiting for, or holding, its sender's link.
#[derive(Debug, Clone, Copy)]
struct Transfer {
    request_id: u64,
    /// Its slot on the prefill instance.
    slot: u32,
    to: u32,
    bytes: u64,
    duration: Nanos,
    prefill_end: Nanos,
    start: Nanos,
    queuing_delay: Nanos,
    blocks: usize,
    /// Its control-plane priority, kept on the decode side.
    priority: i32,
    /// Its nominal urgency, which decode-side priority inversions are judged by.
    nominal: i32,
    /// The request timed out while its KV was on the wire: the KV is dropped on arrival.
    cancelled: bool,
}

/// One sender's link: the transfer on the wire and those queued behind it.
#[derive(Debug, Default)]
struct LinkQueue {
    active: Option<Transfer>,
    waiting: VecDeque<Transfer>,
}

/// A hand-off on its way to a decode instance.
#[derive(Debug, Clone, Copy)]
struct Pending {
    /// The prefill instance holding its KV.
    from: u32,
    handoff: Handoff,
    /// When its prefill ended.
    prefill_end: Nanos,
}

/// The transfers of a run.
pub(super) struct Transfers<'a> {
    setup: Disaggregation,
    /// The initial list of requests.
    requests: &'a [Request],
    /// Index in `requests` of every request id.
    index_of: HashMap<u64, u32>,
    /// Requests on prefill instances that entered the run otherwise than as listed in
    /// `requests` (released at run time, or admitted after their arrival in concurrency mode),
    /// by id, as they entered and with their candidate lists, until their KV arrives.
    entered: HashMap<u64, (Request, Groups)>,
    /// By sending instance.
    links: Vec<LinkQueue>,
    /// Hand-offs that found no ready decode replica, in hand-off order; their KV stays on
    /// the prefill instance until one is ready.
    held: VecDeque<Pending>,
    candidates: Vec<u32>,
    /// Whether head-of-line blocking of hand-offs is counted (anomaly detection is on).
    watch: bool,
    /// Hand-offs routed to wait behind others while another decode candidate had nobody
    /// waiting and room (see `hol.rs`).
    hol_blocking: u64,
    /// vLLM's flow: transfers whose decode instance has not started pulling yet, by request.
    pulls: HashMap<u64, Pull>,
    /// vLLM's flow: decode instances sent a request to pull since the loop last looked
    /// ([`Transfers::take_received`]).
    received: Vec<u32>,
}

/// A transfer waiting for its decode instance to start the pull (vLLM's flow).
#[derive(Debug, Clone, Copy)]
struct Pull {
    from: u32,
    transfer: Transfer,
}

impl<'a> Transfers<'a> {
    pub fn new(setup: Disaggregation, requests: &'a [Request]) -> Transfers<'a> {
        let n = setup.roles.len();
        Transfers {
            setup,
            requests,
            index_of: (0..requests.len())
                .map(|i| (requests[i].id, i as u32))
                .collect(),
            entered: HashMap::new(),
            links: (0..n).map(|_| LinkQueue::default()).collect(),
            held: VecDeque::new(),
            candidates: Vec::with_capacity(n),
            watch: false,
            hol_blocking: 0,
            pulls: HashMap::new(),
            received: Vec::new(),
        }
    }

    /// The decode instances sent a request to pull since the last call (the list's buffer:
    /// give it back, emptied, with [`Transfers::give_back_received`]).
    pub fn take_received(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.received)
    }

    /// Returns the buffer [`Transfers::take_received`] lent, emptied.
    pub fn give_back_received(&mut self, buffer: Vec<u32>) {
        self.received = buffer;
    }

    /// Counts head-of-line blocking among the hand-offs from now on.
    pub fn watch_anomalies(&mut self) {
        self.watch = true;
    }

    /// Hand-offs so far that blocked the head of the line.
    pub fn hol_blocking(&self) -> u64 {
        self.hol_blocking
    }

    /// Notes `request`, just routed to instance `to` as it entered the run (not as listed in
    /// the initial requests), with candidate lists `groups`: when `to` is a prefill instance
    /// that will hand it off, the decode side needs it as it entered.
    pub fn entered(&mut self, to: u32, request: Request, groups: Groups) {
        if self.setup.roles[to as usize] == InstanceRole::Prefill && request.output_toks > 1 {
            self.entered.insert(request.id, (request, groups));
        }
    }

    /// Takes over every request prefill instance `from` handed off in the step that ended at
    /// `now`: routes it to a decode instance and queues its transfer on `from`'s link. A
    /// hand-off that finds no ready decode replica (autoscaled runs) is held until one is.
    pub fn hand_off(
        &mut self,
        from: u32,
        now: Nanos,
        schedulers: &mut Cores<'_>,
        mut choice: DecodeChoice<'_, '_>,
        effects: &mut Effects<'_>,
    ) -> Result<(), SimError> {
        while let Some(h) = schedulers[from as usize].pop_handoff() {
            let pending = Pending {
                from,
                handoff: h,
                prefill_end: now,
            };
            if !self.send(pending, now, schedulers, &mut choice, effects)? {
                schedulers[from as usize].hold_for_decode();
                self.held.push_back(pending);
            }
        }
        Ok(())
    }

    /// A decode replica became ready at `now`: every held hand-off that can go now is sent,
    /// in hand-off order; the others stay held.
    pub fn send_held(
        &mut self,
        now: Nanos,
        schedulers: &mut Cores<'_>,
        mut choice: DecodeChoice<'_, '_>,
        effects: &mut Effects<'_>,
    ) -> Result<(), SimError> {
        for _ in 0..self.held.len() {
            let Some(pending) = self.held.pop_front() else {
                break;
            };
            if self.send(pending, now, schedulers, &mut choice, effects)? {
                schedulers[pending.from as usize].end_hold_for_decode();
            } else {
                self.held.push_back(pending);
            }
        }
        Ok(())
    }

    /// The role of instance `id`.
    pub fn role(&self, id: u32) -> InstanceRole {
        self.setup.roles[id as usize]
    }

    /// Routes hand-off `pending` to a ready decode instance of its model at `now` and
    /// queues its transfer; false when no decode instance is ready.
    fn send(
        &mut self,
        pending: Pending,
        now: Nanos,
        schedulers: &mut Cores<'_>,
        choice: &mut DecodeChoice<'_, '_>,
        effects: &mut Effects<'_>,
    ) -> Result<bool, SimError> {
        let eligibility = choice.eligibility;
        let Pending {
            from,
            handoff: h,
            prefill_end,
        } = pending;
        let f = from as usize;
        let (request, decode) = match self.entered.get(&h.request_id) {
            Some((request, groups)) => (request, eligibility.decode(*groups)),
            None => {
                let index = self.index_of[&h.request_id] as usize;
                (&self.requests[index], eligibility.decode_candidates(index))
            }
        };
        let same_model = |d: &u32| eligibility.same_model(*d, from);
        self.candidates.clear();
        match choice.autoscaler {
            // Fewer replicas ready than candidates: the ready ones are looked up among the
            // candidates, so that a hand-off costs the replicas on, not every slot.
            Some(a) if a.num_ready() < decode.len() => {
                let ready = a.ready().filter(|d| decode.binary_search(d).is_ok());
                self.candidates.extend(ready.filter(same_model));
            }
            Some(a) => {
                let ready = decode.iter().copied().filter(|&d| a.is_ready(d));
                self.candidates.extend(ready.filter(same_model));
            }
            None => self
                .candidates
                .extend(decode.iter().copied().filter(same_model)),
        }
        if self.candidates.is_empty() {
            if decode.iter().any(same_model) {
                // Only in an autoscaled run: none of them is ready yet.
                return Ok(false);
            }
            return Err(SchedulerBug::new(format!(
                "request {} was prefilled on instance {from} but no decode instance can take it",
                h.request_id
            ))
            .into());
        }
        // The decode router sees the instances as the prefill router does: through the
        // run's signals, refreshed as their modes say (each earlier hand-off included).
        choice
            .signals
            .refresh_due(now, schedulers, choice.instances);
        let view = (choice.signals).view(Side::Decode, schedulers, choice.instances);
        let to = self.setup.router.route(request, &self.candidates, &view);
        if self.watch && blocks_head_of_line(schedulers, to, &self.candidates) {
            self.hol_blocking += 1;
        }
        let flow = self.flow_to(&schedulers[to as usize]);
        if flow != PdFlow::Vllm {
            schedulers[to as usize].expect_incoming();
        }
        let bytes = self.setup.kv_bytes_per_token[f] * u64::from(h.prompt_tokens);
        let transfer = Transfer {
            request_id: h.request_id,
            slot: h.slot,
            to,
            bytes,
            duration: self.setup.link(f, to as usize).transfer_ns(bytes),
            prefill_end,
            start: now,
            queuing_delay: h.queuing_delay_ns,
            blocks: h.blocks,
            priority: h.priority,
            nominal: h.nominal,
            cancelled: false,
        };
        if flow == PdFlow::Vllm {
            // The proxy sends the request to its decode instance now; the KV waits here until
            // a step there starts pulling it.
            let received = Self::received(&transfer, from, now);
            schedulers[to as usize].receive_remote(request, received);
            self.entered.remove(&h.request_id);
            self.pulls.insert(h.request_id, Pull { from, transfer });
            self.received.push(to);
            return Ok(true);
        }
        self.queue_on_link(from, transfer, now, schedulers, effects)?;
        Ok(true)
    }

    /// The flow a hand-off to `decode` follows: the run's, except that an SGLang decode
    /// instance is sent its KV, as SGLang's disaggregation does, and queues the request once
    /// it has landed (the flow `PdFlow::LlmServingSim` models).
    fn flow_to(&self, decode: &Core) -> PdFlow {
        match decode.engine() {
            Engine::Sglang => PdFlow::LlmServingSim,
            Engine::Vllm => self.setup.flow,
        }
    }

    /// Starts `transfer` on `from`'s link now if it is idle, else queues it behind the others.
    fn queue_on_link(
        &mut self,
        from: u32,
        transfer: Transfer,
        now: Nanos,
        schedulers: &Cores<'_>,
        effects: &mut Effects<'_>,
    ) -> Result<(), SimError> {
        if self.links[from as usize].active.is_none() {
            self.start(from, transfer, now, schedulers, effects)
        } else {
            self.links[from as usize].waiting.push_back(transfer);
            Ok(())
        }
    }

    /// vLLM's flow: starts, at `now`, the KV pulls that the step decode instance `decode`
    /// just formed reached (each on its prefill instance's link, after the transfers queued
    /// there).
    pub fn start_pulls(
        &mut self,
        decode: u32,
        now: Nanos,
        schedulers: &mut Cores<'_>,
        effects: &mut Effects<'_>,
    ) -> Result<(), SimError> {
        while let Some(id) = schedulers[decode as usize].pop_pull_start() {
            let Some(Pull { from, transfer }) = self.pulls.remove(&id) else {
                return Err(SchedulerBug::new(format!(
                    "instance {decode} pulls the KV of request {id}, which no prefill instance holds"
                ))
                .into());
            };
            self.queue_on_link(from, transfer, now, schedulers, effects)?;
        }
        Ok(())
    }

    /// Puts `transfer` on `from`'s idle link at `now`.
    fn start(
        &mut self,
        from: u32,
        mut transfer: Transfer,
        now: Nanos,
        schedulers: &Cores<'_>,
        effects: &mut Effects<'_>,
    ) -> Result<(), SimError> {
        transfer.start = now;
        let end = super::clock_add(now, transfer.duration)?;
        effects.wake(end, EventKind::TransferEnd { sender: from });
        self.links[from as usize].active = Some(transfer);
        let event = self.event(from, &transfer, false, schedulers);
        effects.push(Effect::Transfer(event));
        Ok(())
    }

    /// Completes the transfer on `from`'s link at `now`: frees its blocks on the prefill
    /// instance, queues the request on its decode instance and starts the next transfer.
    /// Returns the decode instance.
    pub fn finish(
        &mut self,
        from: u32,
        now: Nanos,
        schedulers: &mut Cores<'_>,
        effects: &mut Effects<'_>,
    ) -> Result<u32, SimError> {
        let Some(t) = self.links[from as usize].active.take() else {
            return Err(SchedulerBug::new(format!("no transfer in flight from {from}")).into());
        };
        let freed = schedulers[from as usize].release_handoff(t.slot)?;
        if freed != t.blocks {
            return Err(SchedulerBug::new(format!(
                "transfer from {from} freed {freed} blocks, held {}",
                t.blocks
            ))
            .into());
        }
        match (t.cancelled, self.flow_to(&schedulers[t.to as usize])) {
            (true, PdFlow::LlmServingSim | PdFlow::Lmcache) => {
                schedulers[t.to as usize].cancel_incoming()
            }
            // Its decode instance dropped the request already.
            (true, PdFlow::Vllm) => {}
            (false, flow @ (PdFlow::LlmServingSim | PdFlow::Lmcache)) => {
                self.deliver(&t, from, now, &mut schedulers[t.to as usize], flow);
            }
            (false, PdFlow::Vllm) => {
                schedulers[t.to as usize].kv_landed(t.request_id, t.start, now)?
            }
        }
        let event = self.event(from, &t, true, schedulers);
        effects.push(Effect::Transfer(event));
        if let Some(next) = self.links[from as usize].waiting.pop_front() {
            self.start(from, next, now, schedulers, effects)?;
        }
        Ok(t.to)
    }

    /// Queues the request of transfer `t` from `from`, arrived at `now`, on `decode`, as
    /// `flow` (LLMServingSim's or LMCache's) delivers it.
    fn deliver(&mut self, t: &Transfer, from: u32, now: Nanos, decode: &mut Core, flow: PdFlow) {
        let received = Self::received(t, from, now);
        let request = match self.entered.remove(&t.request_id) {
            Some((request, _)) => Cow::Owned(request),
            None => Cow::Borrowed(&self.requests[self.index_of[&t.request_id] as usize]),
        };
        match flow {
            PdFlow::Lmcache => decode.receive_loaded(&request, received),
            _ => decode.receive(&request, received),
        }
    }

    /// What the decode instance learns of transfer `t` from `from`, its KV arrived (or, in
    /// vLLM's flow, its request sent) at `now`.
    fn received(t: &Transfer, from: u32, now: Nanos) -> ReceivedKv {
        ReceivedKv {
            queuing_delay_ns: t.queuing_delay,
            pd: PdRecord {
                prefill_instance: from,
                prefill_end_ns: t.prefill_end,
                transfer_start_ns: t.start,
                transfer_end_ns: now,
                decode_admitted_ns: now,
                kv_bytes: t.bytes,
            },
            priority: t.priority,
            nominal: t.nominal,
        }
    }

    /// Request `id` timed out. If its KV waits for its sender's link or for a ready decode
    /// replica, the transfer is called off (the prefill blocks are freed now); if it is on
    /// the wire, its KV is dropped when it arrives (the blocks stay held until then). Returns
    /// the sender and, when its KV no longer comes, the receiver, if it was in a transfer;
    /// otherwise only what the transfers kept of it is forgotten.
    pub fn cancel(
        &mut self,
        id: u64,
        schedulers: &mut Cores<'_>,
    ) -> Result<Option<(u32, Option<u32>)>, SimError> {
        for (from, link) in self.links.iter_mut().enumerate() {
            if let Some(active) = link.active.as_mut().filter(|t| t.request_id == id) {
                active.cancelled = true;
                self.entered.remove(&id);
                return Ok(Some((from as u32, None)));
            }
            if let Some(k) = link.waiting.iter().position(|t| t.request_id == id) {
                let t = link.waiting.remove(k).expect("found transfer");
                schedulers[from].release_handoff(t.slot)?;
                schedulers[t.to as usize].cancel_incoming();
                self.entered.remove(&id);
                return Ok(Some((from as u32, Some(t.to))));
            }
        }
        self.entered.remove(&id);
        if let Some(Pull { from, transfer }) = self.pulls.remove(&id) {
            // vLLM's flow, its pull not started: the prefill instance drops the KV it held.
            schedulers[from as usize].release_handoff(transfer.slot)?;
            return Ok(Some((from, Some(transfer.to))));
        }
        if let Some(k) = self.held.iter().position(|p| p.handoff.request_id == id) {
            let p = self.held.remove(k).expect("found hand-off");
            schedulers[p.from as usize].end_hold_for_decode();
            schedulers[p.from as usize].release_handoff(p.handoff.slot)?;
            return Ok(Some((p.from, None)));
        }
        Ok(None)
    }

    fn event(
        &self,
        from: u32,
        t: &Transfer,
        arrived: bool,
        schedulers: &Cores<'_>,
    ) -> TransferEvent {
        TransferEvent {
            request_id: t.request_id,
            from,
            to: t.to,
            bytes: t.bytes,
            prefill_end_ns: t.prefill_end,
            start_ns: t.start,
            end_ns: t.start + t.duration,
            arrived,
            request_blocks: t.blocks,
            sender_blocks_used: schedulers[from as usize].kv_blocks_used(),
        }
    }
}
