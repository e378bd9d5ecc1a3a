//! The cluster control plane: what happens to a request between its arrival at the cluster
//! and its arrival at an instance, on the engine's clock.
//!
//! ```text
//! cluster arrival ─▶ admission ─▶ priority ─▶ [gateway queue] ─▶ routing ─▶ instance
//!                  (+admission latency)                        (+routing latency)
//! ```
//!
//! - **Admission** ([`admission`], `--admission-policy`) lets the request in or ends it
//!   (rejected or shed), after `--admission-latency`; with `--admission-delay` a refused
//!   request is instead held at the gateway and decided on again after the back-off, up to
//!   `--admission-max-delays` times (the seed's DELAY beside ADMIT and REJECT).
//! - **Priority** ([`priority`], `--priority-policy`) gives it a number (higher is more
//!   urgent), used by the gateway queue's bands and by the instances' schedulers
//!   (`--scheduler priority-fcfs`). It is computed when the request arrives, so that the
//!   admission policies that shed by priority (`tier-shed`, `tenant-quota`) can see it.
//! - **Flow control** ([`flow`], `--flow-control`) holds admitted requests in per-band queues
//!   while the cluster is saturated, rejects when full and expires requests past their TTL.
//! - **Routing** happens `--routing-latency` after the request leaves the previous stage;
//!   the run's router then picks the instance (it may also hold or reject it).
//! - **Instance scheduling** (`--scheduler`, `--preemption-policy`) orders each instance's
//!   waiting queue and picks preemption victims ([`crate::scheduler::QueueOrder`]).
//!
//! The engine parks each arriving request and hands the control plane a [`Ticket`] (plain
//! numbers); the control plane returns its decisions as [`Action`]s (route, or end with a
//! [`Dropped`] reason) and says when it next needs the clock ([`ControlPlane::next_wake`]).
//! The engine settles these decisions in its own phase of each instant
//! ([`crate::engine::Phase::Control`]). Within one call the order is fixed: admissions due
//! (in the order they arrived), then TTL expiries (by band, then enqueue order), then
//! dispatches from the gateway queue, then routings due (in the order they were sent).
//!
//! Every request ends exactly once: completed, or [`Dropped`] (rejected, shed or expired,
//! with the stage and the policy), counted per SLO class and tenant by [`OutcomeCollector`].

pub mod admission;
pub mod bundle;
pub mod export;
pub mod flow;
mod outcome;
pub mod priority;
mod report;
pub mod section;

pub use outcome::{Dropped, Outcome, Stage};
pub use report::{OutcomeCollector, OutcomeReport};

use crate::Nanos;
use crate::router::ClusterView;
use crate::scheduler::{PreemptionOrder, QueueOrder};
use crate::workload::{Request, RequestClasses};
use admission::{Admission, AdmissionConfig, AdmissionPolicy, DelayConfig};
use flow::{FlowConfig, FlowQueue};
use priority::{PriorityInput, PriorityPolicy};
use serde::Serialize;
use std::collections::VecDeque;

/// Everything the control plane of a run is configured with (flags and `--policy-config`).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ControlConfig {
    /// Admission policy and parameters.
    pub admission: AdmissionConfig,
    /// Priority policy.
    pub priority: PriorityPolicy,
    /// Overrides of the SLO classes' priorities (`slo_priorities`).
    pub slo_priorities: Vec<(String, i32)>,
    /// SLO targets per class (deadlines of requests without their own target).
    pub slo_targets: Vec<(String, Nanos)>,
    /// The gateway queue, when flow control is on.
    pub flow: Option<FlowConfig>,
    /// Delay between a request's arrival and its admission decision.
    pub admission_latency_ns: Nanos,
    /// Delay between a request leaving admission (or the gateway queue) and its routing.
    pub routing_latency_ns: Nanos,
    /// How instances order their waiting queues.
    pub scheduler: QueueOrder,
    /// Which running request instances preempt first.
    pub preemption: PreemptionOrder,
    /// The autoscaler, when on (`autoscale:`, `--autoscale`); not part of the control plane
    /// proper: a run can scale without one.
    pub autoscale: Option<crate::autoscale::AutoscaleConfig>,
}

impl ControlConfig {
    /// Whether the control plane changes nothing (admit all, no delays, no gateway queue,
    /// FCFS and LIFO): the engine then runs without one, exactly as before it existed.
    pub fn is_passive(&self) -> bool {
        self.admission.policy == AdmissionPolicy::AlwaysAdmit
            && self.flow.is_none()
            && self.admission_latency_ns == 0
            && self.routing_latency_ns == 0
            && self.scheduler == QueueOrder::Fcfs
            && self.preemption == PreemptionOrder::Lifo
    }
}

/// What the control plane knows of a request: plain numbers, copied once at its arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    /// Where the engine parked the request.
    pub slot: u32,
    /// Request id.
    pub id: u64,
    /// Arrival at the cluster.
    pub arrival_ns: Nanos,
    /// Prompt tokens.
    pub input_toks: u32,
    /// Tenant index (0 when the workload names none).
    pub tenant: u32,
    /// SLO class index (0 when the workload names none).
    pub class: u32,
    /// Priority (higher is more urgent).
    pub priority: i32,
    /// SLO target (its own, else its class's), if any.
    pub target_ns: Option<Nanos>,
}

/// A decision the engine carries out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Route the request parked at `slot` now; instances queue it with `priority`.
    Route { slot: u32, priority: i32 },
    /// The request parked at `slot` ends here.
    Drop { slot: u32, why: Dropped },
}

/// What the policies may see of the cluster when they decide: the instances' snapshots and
/// the control plane's own counters.
pub struct Load<'a> {
    view: &'a dyn ClusterView,
    /// The instances serving (all of them; in an autoscaled run, the ready replicas).
    instances: &'a [u32],
    in_flight: u64,
    pending: u64,
    tenant_in_flight: &'a [u64],
}

impl<'a> Load<'a> {
    /// The load of the serving `instances` (ids) seen through `view`, with `in_flight` requests
    /// past admission and the gateway (of which `pending` are not yet routed), and each
    /// tenant's admitted requests not yet ended.
    pub fn new(
        view: &'a dyn ClusterView,
        instances: &'a [u32],
        in_flight: u64,
        pending: u64,
        tenant_in_flight: &'a [u64],
    ) -> Load<'a> {
        Load {
            view,
            instances,
            in_flight,
            pending,
            tenant_in_flight,
        }
    }

    /// Number of instances serving.
    pub fn instances(&self) -> u32 {
        self.instances.len() as u32
    }

    /// Requests dispatched past the gateway and not ended.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Admitted requests of `tenant` not ended.
    pub fn tenant_in_flight(&self, tenant: u32) -> u64 {
        self.tenant_in_flight
            .get(tenant as usize)
            .copied()
            .unwrap_or(0)
    }

    /// Waiting + running requests of the busiest instance.
    pub fn busiest(&self) -> u64 {
        self.instances
            .iter()
            .map(|&id| {
                let s = self.view.snapshot(id);
                (s.waiting + s.running) as u64
            })
            .max()
            .unwrap_or(0)
    }

    /// Requests the cluster runs at once: Σ max_num_seqs (256 where unlimited).
    pub fn capacity(&self) -> u64 {
        self.instances
            .iter()
            .map(|&id| u64::from(self.view.snapshot(id).max_num_seqs.unwrap_or(256)))
            .sum()
    }

    /// GAIE's saturation: the mean over the serving instances of `max(waiting / qd, kv used
    /// / kv)`, the requests dispatched but not yet routed counted as waiting, spread evenly.
    pub fn utilization(&self, queue_depth_threshold: f64, kv_util_threshold: f64) -> f64 {
        let n = f64::from(self.instances().max(1));
        let spread = self.pending as f64 / n;
        let sum: f64 = (self.instances.iter())
            .map(|&id| {
                let s = self.view.snapshot(id);
                let qd = (s.waiting as f64 + spread) / queue_depth_threshold.max(f64::MIN_POSITIVE);
                let kv = s.kv_blocks_used as f64 / s.kv_blocks_total.max(1) as f64;
                qd.max(kv / kv_util_threshold.max(f64::MIN_POSITIVE))
            })
            .sum();
        sum / n
    }
}

/// The control plane of one run: its policies, their state, and the requests between
/// stages.
#[derive(Debug)]
pub struct ControlPlane {
    admission: Admission,
    priority: PriorityPolicy,
    flow: Option<FlowQueue>,
    admission_latency: Nanos,
    routing_latency: Nanos,
    scheduler: (QueueOrder, PreemptionOrder),
    classes: RequestClasses,
    /// Per class index: its priority in the class map, and its SLO target.
    class_priority: Vec<i32>,
    class_target: Vec<Option<Nanos>>,
    /// Requests waiting for their admission decision, and for routing, with when it is due.
    admitting: VecDeque<(Nanos, Ticket)>,
    routing: VecDeque<(Nanos, Ticket)>,
    /// Requests refused and held for another admission decision, with when it is due and
    /// how many times each was delayed (due in order: one back-off for all).
    delayed: VecDeque<(Nanos, Ticket, u32)>,
    /// Requests past the gateway and not ended.
    in_flight: u64,
    /// Admitted requests not ended, by tenant index.
    tenant_in_flight: Vec<u64>,
    /// The decisions since the last [`ControlPlane::take_notes`], when they are traced.
    notes: Option<Vec<ControlNote>>,
}

/// A decision of the control plane that is not an [`Action`], for the decision trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlNote {
    /// The priority policy gave `request` `priority` at its arrival, `t`.
    Priority {
        t: Nanos,
        request: u64,
        priority: i32,
    },
    /// The admission policy let `request` in at `t`.
    Admitted { t: Nanos, request: u64 },
    /// The admission policy refused `request` at `t` (`why`), and it is held for its
    /// `attempt`-th delay until `retry_at`.
    Delayed {
        t: Nanos,
        request: u64,
        attempt: u32,
        retry_at: Nanos,
        why: Dropped,
    },
    /// `request` entered the gateway queue at `t`, which then held `depth` requests (it
    /// included).
    Enqueued {
        t: Nanos,
        request: u64,
        depth: usize,
    },
    /// `request` left the gateway queue for routing at `t` after waiting `waited_ns` there;
    /// the queue then held `depth` requests.
    Dispatched {
        t: Nanos,
        request: u64,
        depth: usize,
        waited_ns: Nanos,
    },
}

impl ControlPlane {
    /// The control plane of `config` for a workload whose requests belong to `classes`.
    pub fn new(config: ControlConfig, classes: Option<&RequestClasses>) -> ControlPlane {
        let classes = classes.cloned().unwrap_or_default();
        let class_priority = priority::class_priorities(&classes, &config.slo_priorities);
        let class_target = classes
            .classes()
            .iter()
            .map(|c| config.slo_targets.iter().find(|(n, _)| n == c).map(|t| t.1))
            .collect();
        ControlPlane {
            admission: Admission::new(config.admission, classes.tenants()),
            priority: config.priority,
            flow: config.flow.map(FlowQueue::new),
            admission_latency: config.admission_latency_ns,
            routing_latency: config.routing_latency_ns,
            scheduler: (config.scheduler, config.preemption),
            tenant_in_flight: vec![0; classes.tenants().len().max(1)],
            class_priority,
            class_target,
            classes,
            admitting: VecDeque::new(),
            routing: VecDeque::new(),
            delayed: VecDeque::new(),
            in_flight: 0,
            notes: None,
        }
    }

    /// Turns the noting of priorities and admissions on, for the decision trace.
    pub fn trace_decisions(&mut self) {
        self.notes = Some(Vec::new());
    }

    /// The priorities and admissions noted since the last call, in the order they were
    /// decided (empty unless [`ControlPlane::trace_decisions`]).
    pub fn take_notes(&mut self) -> impl Iterator<Item = ControlNote> + '_ {
        self.notes.iter_mut().flat_map(|n| n.drain(..))
    }

    /// How the instances order their waiting queues and pick preemption victims.
    pub fn scheduling(&self) -> (QueueOrder, PreemptionOrder) {
        self.scheduler
    }

    /// Requests held between stages (not yet routed or ended).
    pub fn held(&self) -> usize {
        let flow = self.flow.as_ref().map_or(0, FlowQueue::len);
        self.admitting.len() + self.delayed.len() + self.routing.len() + flow
    }

    /// Whether requests wait in the gateway queue for the cluster to have room: the engine
    /// polls again whenever a step or transfer ends.
    pub fn waiting_for_capacity(&self) -> bool {
        self.flow.as_ref().is_some_and(|f| !f.is_empty())
    }

    /// Whether requests wait for room that a step may make: the gateway queue's detector
    /// reads the instances' queues and KV use (utilization), which any step changes. A
    /// concurrency detector reads requests in flight, which only an end changes.
    pub fn waiting_on_steps(&self) -> bool {
        (self.flow.as_ref()).is_some_and(|f| !f.is_empty() && f.saturates_with_steps())
    }

    /// The next time a decision falls due (a latency runs out, a queued request expires).
    pub fn next_wake(&self) -> Option<Nanos> {
        let admit = self.admitting.front().map(|a| a.0);
        let retry = self.delayed.front().map(|d| d.0);
        let route = self.routing.front().map(|r| r.0);
        let expiry = self.flow.as_ref().and_then(FlowQueue::next_expiry);
        [admit, retry, route, expiry].into_iter().flatten().min()
    }

    /// The ticket of `request`, parked by the engine at `slot`.
    pub fn ticket(&self, slot: u32, request: &Request) -> Ticket {
        let profile = self.classes.labels(request.id);
        let (tenant, class) = profile.map_or((0, 0), |p| (p.tenant, p.class));
        let own = profile.and_then(|p| p.extras.priority);
        let target_ns = profile
            .and_then(|p| p.extras.slo_target_ns)
            .or_else(|| self.class_target.get(class as usize).copied().flatten());
        fn name(names: &[String], i: u32) -> &str {
            names.get(i as usize).map_or("default", String::as_str)
        }
        let input = PriorityInput {
            class_priority: self
                .class_priority
                .get(class as usize)
                .copied()
                .unwrap_or(3),
            own,
            class: name(self.classes.classes(), class),
            tenant: name(self.classes.tenants(), tenant),
            deadline_ns: target_ns.map(|t| request.arrival_ns.saturating_add(t)),
        };
        Ticket {
            slot,
            id: request.id,
            arrival_ns: request.arrival_ns,
            input_toks: request.input_toks,
            tenant,
            class,
            priority: self.priority.priority(&input),
            target_ns,
        }
    }

    /// `request` arrives at the cluster at `now`, parked by the engine at `slot`.
    pub fn arrive(&mut self, now: Nanos, slot: u32, request: &Request) {
        let ticket = self.ticket(slot, request);
        if let Some(notes) = &mut self.notes {
            notes.push(ControlNote::Priority {
                t: now,
                request: request.id,
                priority: ticket.priority,
            });
        }
        let due = now.saturating_add(self.admission_latency);
        self.admitting.push_back((due, ticket));
    }

    /// A request the control plane sent to routing has ended (finished, or rejected by the
    /// router).
    pub fn request_left(&mut self, id: u64) {
        self.in_flight = self.in_flight.saturating_sub(1);
        let tenant = self.classes.of(id).map_or(0, |p| p.0);
        if let Some(n) = self.tenant_in_flight.get_mut(tenant as usize) {
            *n = n.saturating_sub(1);
        }
    }

    /// Takes back the request parked at `slot` (its own timeout ran out), wherever it is
    /// between stages; returns the stage it was in, or `None` if no request there is parked
    /// at `slot`. One taken from routing had left the gateway: the engine reports its end
    /// with [`ControlPlane::request_left`], as for every request past the gateway.
    pub fn withdraw(&mut self, slot: u32) -> Option<Stage> {
        if let Some(k) = self.admitting.iter().position(|(_, t)| t.slot == slot) {
            self.admitting.remove(k);
            return Some(Stage::Admission);
        }
        if let Some(k) = self.delayed.iter().position(|(_, t, _)| t.slot == slot) {
            self.delayed.remove(k);
            return Some(Stage::Admission);
        }
        if let Some(t) = self.flow.as_mut().and_then(|f| f.remove(slot)) {
            if let Some(n) = self.tenant_in_flight.get_mut(t.tenant as usize) {
                *n = n.saturating_sub(1);
            }
            return Some(Stage::FlowControl);
        }
        let k = self.routing.iter().position(|(_, t)| t.slot == slot)?;
        self.routing.remove(k);
        Some(Stage::Routing)
    }

    /// Settles what is due at `now`, seeing the serving `instances` (ids: every instance, or
    /// an autoscaled run's ready replicas) through `view`, and
    /// appends the decisions to `out`. The engine carries them out and calls again until a
    /// call decides nothing (a dispatch from the gateway queue changes what the next one
    /// sees).
    pub fn poll(
        &mut self,
        now: Nanos,
        view: &dyn ClusterView,
        instances: &[u32],
        out: &mut Vec<Action>,
    ) {
        while let Some((t, delays)) = self.next_admission(now) {
            self.admit(now, (t, delays), view, instances, out);
        }
        if let Some(flow) = &mut self.flow {
            let tenants = &mut self.tenant_in_flight;
            flow.expire(now, |t, why| {
                if let Some(n) = tenants.get_mut(t.tenant as usize) {
                    *n = n.saturating_sub(1);
                }
                out.push(Action::Drop { slot: t.slot, why });
            });
        }
        self.dispatch(now, view, instances);
        while let Some(&(due, t)) = self.routing.front() {
            if due > now {
                break;
            }
            self.routing.pop_front();
            out.push(Action::Route {
                slot: t.slot,
                priority: t.priority,
            });
        }
    }

    /// The next admission decision due at `now`, with the times its request was delayed:
    /// the earliest due, a delayed request before a new arrival due at the same time (it
    /// arrived first).
    fn next_admission(&mut self, now: Nanos) -> Option<(Ticket, u32)> {
        let retry = self.delayed.front().map(|d| d.0).filter(|&due| due <= now);
        let fresh = self
            .admitting
            .front()
            .map(|a| a.0)
            .filter(|&due| due <= now);
        match (retry, fresh) {
            (Some(r), f) if f.is_none_or(|f| r <= f) => {
                self.delayed.pop_front().map(|(_, t, n)| (t, n))
            }
            (_, Some(_)) => self.admitting.pop_front().map(|(_, t)| (t, 0)),
            _ => None,
        }
    }

    /// The admission decision for `t`, delayed `delays` times before; an admitted request
    /// moves on to the gateway queue or to routing, a refused one is delayed again (while
    /// delays are on and it has some left) or ends.
    fn admit(
        &mut self,
        now: Nanos,
        (t, delays): (Ticket, u32),
        view: &dyn ClusterView,
        n: &[u32],
        out: &mut Vec<Action>,
    ) {
        let pending = self.routing.len() as u64;
        let load = Load::new(view, n, self.in_flight, pending, &self.tenant_in_flight);
        if let Err(why) = self.admission.decide(now, &t, &load) {
            match self.admission.delay() {
                Some(d) if delays < d.max_delays => self.delay(now, (t, delays + 1), d, why),
                _ => out.push(Action::Drop { slot: t.slot, why }),
            }
            return;
        }
        if let Some(notes) = &mut self.notes {
            notes.push(ControlNote::Admitted {
                t: now,
                request: t.id,
            });
        }
        if let Some(count) = self.tenant_in_flight.get_mut(t.tenant as usize) {
            *count += 1;
        }
        match &mut self.flow {
            Some(flow) => match flow.enqueue(now, t, t.target_ns) {
                Ok(()) => {
                    if let Some(notes) = &mut self.notes {
                        let (request, depth) = (t.id, flow.len());
                        notes.push(ControlNote::Enqueued {
                            t: now,
                            request,
                            depth,
                        });
                    }
                }
                Err(why) => {
                    if let Some(count) = self.tenant_in_flight.get_mut(t.tenant as usize) {
                        *count -= 1;
                    }
                    out.push(Action::Drop { slot: t.slot, why });
                }
            },
            None => self.send_to_routing(now, t),
        }
    }

    /// Holds refused `t` for its `attempt`-th delay, noting it for the trace.
    fn delay(&mut self, now: Nanos, (t, attempt): (Ticket, u32), d: DelayConfig, why: Dropped) {
        let retry_at = now.saturating_add(d.backoff_ns);
        if let Some(notes) = &mut self.notes {
            notes.push(ControlNote::Delayed {
                t: now,
                request: t.id,
                attempt,
                retry_at,
                why,
            });
        }
        self.delayed.push_back((retry_at, t, attempt));
    }

    /// Dispatches from the gateway queue while the cluster is not saturated: one request
    /// when routing is immediate (the engine routes it before the next is considered), all
    /// it may otherwise.
    fn dispatch(&mut self, now: Nanos, view: &dyn ClusterView, n: &[u32]) {
        loop {
            let Some(flow) = &self.flow else { return };
            if flow.is_empty() {
                return;
            }
            let pending = self.routing.len() as u64;
            let load = Load::new(view, n, self.in_flight, pending, &self.tenant_in_flight);
            if flow.saturated(&load) {
                return;
            }
            let Some(flow) = self.flow.as_mut() else {
                return;
            };
            let Some((t, enqueued)) = flow.pop() else {
                return;
            };
            if let Some(notes) = &mut self.notes {
                notes.push(ControlNote::Dispatched {
                    t: now,
                    request: t.id,
                    depth: flow.len(),
                    waited_ns: now - enqueued,
                });
            }
            self.send_to_routing(now, t);
            if self.routing_latency == 0 {
                return;
            }
        }
    }

    /// Sends `t` to routing, due after the routing latency.
    fn send_to_routing(&mut self, now: Nanos, t: Ticket) {
        self.in_flight += 1;
        let due = now.saturating_add(self.routing_latency);
        self.routing.push_back((due, t));
    }

    /// The admission policy.
    pub fn admission_policy(&self) -> &AdmissionPolicy {
        self.admission.policy()
    }
}
