//! The control plane in the loop (`crate::control`): arriving requests are parked and handed
//! to it; its decisions due now (phase [`super::super::Phase::Control`], and after each
//! arrival) route a parked request or end it.

use super::super::SimError;
use super::super::eligibility::Groups;
use super::super::events::EventKind;
use super::effects::Effect;
use super::endings::Ending;
use super::{Cluster, Services};
use crate::Nanos;
use crate::control::{Action, ControlNote};
use crate::scheduler::SchedulerBug;
use crate::trace::Decision;
use crate::workload::Request;
use std::borrow::Cow;

/// The engine's side of the control plane: the requests in its hands and its wake-ups.
pub(super) struct ControlState<'r> {
    /// Requests in the control plane's hands, by the slot it knows them by; the free slots.
    slots: Vec<Option<(Cow<'r, Request>, Groups)>>,
    free: Vec<u32>,
    /// The control plane's decisions being carried out (a reused buffer).
    pub actions: Vec<Action>,
    /// The instances the control plane sees as serving: all, or an autoscaled run's ready
    /// replicas (refreshed before each look; a reused buffer).
    pub serving: Vec<u32>,
    /// The earliest instant for which a control event is scheduled and not yet applied
    /// (later ones may be pending too: a control event with nothing due does nothing).
    pub wake: Option<Nanos>,
}

impl<'r> ControlState<'r> {
    /// Nothing parked; every one of `instances` serving.
    pub fn new(instances: usize) -> ControlState<'r> {
        ControlState {
            slots: Vec::new(),
            free: Vec::new(),
            actions: Vec::new(),
            serving: (0..instances as u32).collect(),
            wake: None,
        }
    }

    /// The slot the next request parked gets.
    pub fn next_slot(&self) -> u32 {
        self.free.last().copied().unwrap_or(self.slots.len() as u32)
    }

    /// Parks `request` with its candidate lists at [`ControlState::next_slot`]. Out of line,
    /// as is [`ControlState::withdraw`]: the step loop's routing and endings call them only
    /// with a control plane or timeouts, and inlined there they grew `Cluster::step` by 1 KB.
    #[inline(never)]
    pub fn park(&mut self, request: Cow<'r, Request>, groups: Groups) {
        let parked = Some((request, groups));
        match self.free.pop() {
            Some(slot) => self.slots[slot as usize] = parked,
            None => self.slots.push(parked),
        }
    }

    /// Takes the request parked at `slot`, if any.
    pub fn take(&mut self, slot: u32) -> Option<(Cow<'r, Request>, Groups)> {
        let parked = self.slots.get_mut(slot as usize).and_then(Option::take)?;
        self.free.push(slot);
        Some(parked)
    }

    /// Takes request `id` out of its slot, if it is parked; returns the slot.
    #[inline(never)]
    pub fn withdraw(&mut self, id: u64) -> Option<u32> {
        let here =
            |p: &Option<(Cow<'r, Request>, Groups)>| p.as_ref().is_some_and(|p| p.0.id == id);
        let slot = self.slots.iter().position(here)? as u32;
        self.take(slot).map(|_| slot)
    }

    /// Requests parked now.
    pub fn parked(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

impl<'r> Cluster<'r> {
    /// Schedules a control event at `t` unless one is due by then (that one schedules the
    /// next when it is applied).
    pub(super) fn wake_control(&mut self, t: Nanos) {
        if self.control.wake.is_none_or(|w| t < w) {
            self.control.wake = Some(t);
            self.queue.push(t, EventKind::Control);
        }
    }

    /// Phase [`super::Phase::Control`] (and after each arrival): carries out the control
    /// plane's decisions due now until it has none left, then schedules its next wake-up.
    pub(super) fn drain_control(&mut self, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        loop {
            let mut actions = std::mem::take(&mut self.control.actions);
            if let Some(control) = s.control.as_deref_mut() {
                self.refresh_serving();
                control.poll(
                    self.now,
                    &self.schedulers,
                    &self.control.serving,
                    &mut actions,
                );
                if self.tracing {
                    for note in control.take_notes() {
                        self.effects.push(Effect::Decision(note_decision(note)));
                    }
                }
            }
            if actions.is_empty() {
                self.control.actions = actions;
                break;
            }
            for action in actions.drain(..) {
                self.act(action, s)?;
            }
            self.control.actions = actions;
        }
        let wake = s.control.as_ref().and_then(|c| c.next_wake());
        if let Some(t) = wake.filter(|&t| t > self.now) {
            self.wake_control(t);
        }
        Ok(())
    }

    /// Carries out one control-plane decision on a parked request.
    pub(super) fn act(&mut self, action: Action, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        let slot = match action {
            Action::Route { slot, .. } | Action::Drop { slot, .. } => slot,
        };
        let Some((request, groups)) = self.control.take(slot) else {
            let message = format!("the control plane named an empty slot {slot}");
            return Err(SchedulerBug::new(message).into());
        };
        match action {
            Action::Route { priority, .. } => self.dispatch(request, groups, priority, s),
            Action::Drop { why, .. } => self.end(Ending::Dropped(request, why), s),
        }
    }
}

/// The trace record of a control-plane note.
fn note_decision(note: ControlNote) -> Decision<'static> {
    match note {
        ControlNote::Priority {
            t,
            request,
            priority,
        } => Decision::Priority {
            t,
            request,
            priority,
        },
        ControlNote::Admitted { t, request } => Decision::Admission {
            t,
            request,
            refused: None,
        },
        ControlNote::Delayed {
            t,
            request,
            attempt,
            retry_at,
            why,
        } => Decision::AdmissionDelay {
            t,
            request,
            attempt,
            retry_at,
            why,
        },
        ControlNote::Enqueued { t, request, depth } => {
            Decision::GatewayEnqueue { t, request, depth }
        }
        ControlNote::Dispatched {
            t,
            request,
            depth,
            waited_ns,
        } => Decision::GatewayDispatch {
            t,
            request,
            depth,
            waited_ns,
        },
    }
}
