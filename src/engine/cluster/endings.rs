//! How requests end: the counts by outcome, and the requests' own timeouts (phase
//! [`super::super::Phase::Timeouts`]), which take a request out of wherever it is.

use super::super::SimError;
use super::super::events::EventKind;
use super::super::timeouts::Timeouts;
use super::{Cluster, Services};
use crate::Nanos;
use crate::control::{Dropped, Stage};
use crate::scheduler::SchedulerBug;
use crate::trace::Decision;
use crate::workload::RequestClasses;

/// How many requests ended so far, by how.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Tally {
    /// Produced their last token.
    pub finished: u64,
    /// Rejected by the router.
    pub rejected: u64,
    /// Ended unserved by the control plane, or dropped by an `immediate` drain.
    pub dropped: u64,
    /// Their own timeout ran out.
    pub timed_out: u64,
}

impl Tally {
    /// Requests that ended, served or not.
    pub fn ended(&self) -> u64 {
        self.finished + self.rejected + self.dropped + self.timed_out
    }
}

/// The requests' timers, and the timeout event scheduled.
pub(super) struct TimeoutState<'r> {
    pub timers: Timeouts<'r>,
    /// The instant for which a timeout event is scheduled and not yet applied.
    wake: Option<Nanos>,
}

impl<'r> TimeoutState<'r> {
    /// The timers of the requests of `clients`; `None` when no request has a timeout.
    pub fn new(clients: Option<&'r RequestClasses>) -> Option<TimeoutState<'r>> {
        Some(TimeoutState {
            timers: Timeouts::new(clients)?,
            wake: None,
        })
    }
}

impl<'r> Cluster<'r> {
    /// Request `id` ended otherwise than by its timeout.
    pub(super) fn disarm(&mut self, id: u64) {
        if let Some(timeouts) = &mut self.timeouts {
            timeouts.timers.disarm(id);
        }
    }

    /// Arms the timer of `request`, entering the run now, if it has a timeout.
    pub(super) fn arm_timeout(&mut self, request: &crate::workload::Request) {
        let now = self.now;
        let Some(timeouts) = self.timeouts.as_mut() else {
            return;
        };
        if let Some(deadline) = timeouts.timers.arm(request, now) {
            self.wake_timeouts(deadline);
        }
    }

    /// Schedules a timeout event at `t` unless one is due by then.
    pub(super) fn wake_timeouts(&mut self, t: Nanos) {
        let Some(timeouts) = self.timeouts.as_mut() else {
            return;
        };
        if timeouts.wake.is_none_or(|w| t < w) {
            timeouts.wake = Some(t);
            self.queue.push(t, EventKind::Timeout);
        }
    }

    /// Discards the timeout events due before any live timer (every request they were
    /// scheduled for has ended), so that they never move the clock (BLIS's lazy
    /// cancellation), and schedules one at the next live deadline instead.
    pub(super) fn skip_orphan_timeouts(&mut self) {
        let Some(timeouts) = self.timeouts.as_mut() else {
            return;
        };
        while let Some(&event) = self.queue.peek() {
            let live = timeouts.timers.next_deadline();
            if event.kind != EventKind::Timeout || live.is_some_and(|d| d <= event.time) {
                return;
            }
            self.queue.pop_until(event.time);
            if timeouts.wake == Some(event.time) {
                timeouts.wake = None;
            }
            if let Some(d) = live.filter(|_| timeouts.wake.is_none()) {
                timeouts.wake = Some(d);
                self.queue.push(d, EventKind::Timeout);
            }
        }
    }

    /// Phase [`super::Phase::Timeouts`]: every request whose timeout runs out now ends as
    /// timed out, wherever it is; what it held is free for this instant's steps.
    pub(super) fn on_timeouts(&mut self, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        let now = self.now;
        if let Some(timeouts) = self.timeouts.as_mut().filter(|t| t.wake == Some(now)) {
            timeouts.wake = None;
        }
        let mut any = false;
        while let Some(timer) = self.timeouts.as_mut().and_then(|t| t.timers.next_due(now)) {
            let stage = self.withdraw(timer.id, s)?;
            if let Some(scaling) = &mut self.scaling {
                scaling.forget(&[timer.id]);
            }
            self.tally.timed_out += 1;
            let why = Dropped::timed_out(stage);
            if self.tracing {
                let (t, request) = (self.now, timer.id);
                s.observer
                    .decision(&Decision::Dropped { t, request, why })?;
            }
            s.observer
                .request_dropped(&timer.request(), self.now, why)?;
            any = true;
        }
        if let Some(next) = self
            .timeouts
            .as_mut()
            .and_then(|t| t.timers.next_deadline())
        {
            self.wake_timeouts(next);
        }
        if any {
            self.admit_gated();
            self.ask_gateway_again(s);
        }
        Ok(())
    }

    /// Takes request `id`, which has not ended, out of wherever it is; returns the stage.
    pub(super) fn withdraw(
        &mut self,
        id: u64,
        s: &mut Services<'_, '_>,
    ) -> Result<Stage, SimError> {
        if self.gateway.withdraw(id) {
            if let Some(control) = s.control.as_deref_mut() {
                control.request_left(id);
            }
            return Ok(Stage::Routing);
        }
        if let Some(slot) = self.control.withdraw(id) {
            let stage = s.control.as_deref_mut().and_then(|c| c.withdraw(slot));
            return stage.ok_or_else(|| nowhere(id));
        }
        let on = (0..self.schedulers.len()).find(|&i| self.schedulers[i].cancel(id).is_some());
        let transfer = match &mut self.transfers {
            Some(t) => t.cancel(id, &mut self.schedulers)?,
            None => None,
        };
        let in_transfer = transfer.is_some();
        if let Some((from, to)) = transfer {
            // Draining replicas waiting for this transfer may be done.
            self.settle_drain(from, s)?;
            if let Some(to) = to {
                self.settle_drain(to, s)?;
            }
        }
        if let Some(i) = on {
            self.mark_ready(i as u32);
            // A draining replica whose last request this was is off now.
            self.settle_drain(i as u32, s)?;
        } else if !in_transfer {
            return Err(nowhere(id));
        }
        if let Some(control) = s.control.as_deref_mut() {
            control.request_left(id);
        }
        Ok(if in_transfer {
            Stage::Transfer
        } else {
            Stage::Instance
        })
    }
}

/// The error of a timed-out request found nowhere: a bug.
fn nowhere(id: u64) -> SimError {
    SchedulerBug::new(format!("request {id} timed out but is nowhere in the run")).into()
}
