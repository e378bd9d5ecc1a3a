//! Routing in the loop: requests arriving (phase [`super::super::Phase::Arrivals`]) enter
//! the run and go to the control plane or straight to the router, whose decision is carried
//! out here; the requests it holds wait at the gateway and are asked about again whenever
//! something ends.

use super::super::SimError;
use super::super::eligibility::Groups;
use super::super::events::EventKind;
use super::super::hol::blocks_head_of_line;
use super::super::signals::Side;
use super::effects::Effect;
use super::endings::Ending;
use super::{Cluster, Services};
use crate::Nanos;
use crate::router::RouteDecision;
use crate::scheduler::SchedulerBug;
use crate::workload::Request;
use std::borrow::Cow;
use std::collections::VecDeque;

/// A request the router held at the gateway.
pub(super) struct Held {
    pub request: Request,
    pub groups: Groups,
    /// Its control-plane priority (0 without a control plane).
    pub priority: i32,
    /// When it was (last) held: it is asked about again only at a later instant.
    pub since: Nanos,
}

/// The requests the router holds, and when it is next asked about them.
#[derive(Default)]
pub(super) struct Gateway {
    /// In the order they were held.
    pub held: VecDeque<Held>,
    /// The instant for which an arrival event to ask about the gateway is scheduled.
    pub event: Option<Nanos>,
}

impl Gateway {
    /// Holds `request` (with its candidate lists and priority) from `now` on.
    pub(super) fn hold(&mut self, request: Request, groups: Groups, priority: i32, now: Nanos) {
        self.held.push_back(Held {
            request,
            groups,
            priority,
            since: now,
        });
    }

    /// Takes request `id` out of the gateway; whether it was held there.
    pub fn withdraw(&mut self, id: u64) -> bool {
        let Some(k) = self.held.iter().position(|h| h.request.id == id) else {
            return false;
        };
        self.held.remove(k);
        true
    }
}

impl<'r> Cluster<'r> {
    /// Something ended now: if the router holds requests, it is asked again in this
    /// instant's arrival phase.
    pub(super) fn ask_gateway_again(&mut self, s: &Services<'_, '_>) {
        if !self.gateway.held.is_empty() && self.gateway.event != Some(self.now) {
            self.gateway.event = Some(self.now);
            self.queue.push(self.now, EventKind::Arrival);
        }
        if s.control.as_ref().is_some_and(|c| c.waiting_for_capacity()) {
            self.wake_control(self.now);
        }
    }

    /// Phase 4: the requests the router held before now are asked about again (in the order
    /// they were held), then every request due now enters the run and is routed.
    pub(super) fn on_arrivals(&mut self, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        let now = self.now;
        for _ in 0..self.gateway.held.len() {
            if self
                .gateway
                .held
                .front()
                .is_none_or(|held| held.since >= now)
            {
                break;
            }
            if let Some(held) = self.gateway.held.pop_front() {
                self.dispatch(Cow::Owned(held.request), held.groups, held.priority, s)?;
            }
        }
        while let Some(due) = self.arrivals.next_due(now, self.ended()) {
            let (request, groups) = due.enter(now, &mut self.eligibility, self.setups)?;
            self.arm_timeout(&request);
            match s.control.as_deref_mut() {
                None => self.dispatch(request, groups, 0, s)?,
                Some(control) => {
                    control.arrive(now, self.control.next_slot(), &request);
                    self.control.park(request, groups);
                    self.drain_control(s)?;
                }
            }
        }
        if let Some(t) = self.arrivals.initial_event(Some(now)) {
            self.queue.push(t, EventKind::Arrival);
        }
        Ok(())
    }

    /// Routes `request` (with its candidate lists `groups` and control-plane `priority`)
    /// and acts on the decision.
    pub(super) fn dispatch(
        &mut self,
        request: Cow<'r, Request>,
        groups: Groups,
        priority: i32,
        s: &mut Services<'_, '_>,
    ) -> Result<(), SimError> {
        let (schedulers, instances) = (&mut self.schedulers, &self.instances);
        self.signals.refresh_due(self.now, schedulers, instances);
        let mut candidates = self.eligibility.arrival(groups);
        if let Some(scaling) = &mut self.scaling {
            candidates = scaling.routable(candidates);
            if candidates.is_empty() {
                // No replica able to serve it is ready: it waits at the gateway for one.
                self.gateway
                    .hold(request.into_owned(), groups, priority, self.now);
                return Ok(());
            }
        }
        let view = (self.signals).view(Side::Arrival, &self.schedulers, &self.instances);
        let decision = s.router.decide(&request, candidates, &view);
        if self.tracing {
            let explained = s.router.explanation().map(|e| self.effects.keep(e));
            self.effects.push(Effect::Routed {
                t: self.now,
                request: request.id,
                decision,
                explained,
            });
        }
        match decision {
            RouteDecision::To(id) if candidates.binary_search(&id).is_ok() => {
                let blocked =
                    self.watch.is_some() && blocks_head_of_line(&self.schedulers, id, candidates);
                let block_size = self.schedulers[id as usize].config().block_size;
                let known = s.router.prompt_hashes(&request, block_size);
                self.enqueue(id, &request, priority, blocked, known);
                self.mark_ready(id);
                if let Some(scaling) = &mut self.scaling {
                    scaling.routed(|| request.clone(), (groups, priority));
                }
                if let (Some(t), Cow::Owned(r)) = (&mut self.transfers, request) {
                    t.entered(id, r, groups);
                }
            }
            RouteDecision::To(id) => {
                let message = format!(
                    "the router sent request {} to instance {id}, which cannot serve it",
                    request.id
                );
                return Err(SchedulerBug::new(message).into());
            }
            RouteDecision::Queue => {
                self.gateway
                    .hold(request.into_owned(), groups, priority, self.now);
            }
            RouteDecision::Reject => self.end(Ending::Rejected(request), s)?,
        }
        Ok(())
    }

    /// Queues `request` on instance `id` with `priority`; with anomaly detection, with its
    /// nominal urgency, counting a head-of-line blocking event if `blocked`. `known`: the
    /// hashes of its leading blocks the router computed at the instance's block size.
    pub(super) fn enqueue(
        &mut self,
        id: u32,
        request: &Request,
        priority: i32,
        blocked: bool,
        known: &[u64],
    ) {
        let Some(w) = self.watch else {
            self.schedulers[id as usize].enqueue_hashed(request, priority, priority, known);
            return;
        };
        self.hol_blocking += u64::from(blocked);
        let nominal = w.nominal.of(request);
        self.schedulers[id as usize].enqueue_hashed(request, priority, nominal, known);
    }
}
