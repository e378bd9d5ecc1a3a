//! How requests end: every request ends exactly once, in one [`Ending`], through one
//! function, [`Cluster::end`], which counts it, disarms its timer, tells the control plane
//! and the autoscaler, traces it, queues what the observer hears of it, and hands what a
//! completion releases to the arrivals. The requests' own timeouts (phase
//! [`super::super::Phase::Timeouts`]) take a request out of wherever it is first.

use super::super::SimError;
use super::super::events::EventKind;
use super::super::timeouts::Timeouts;
use super::effects::Effect;
use super::{Cluster, Services};
use crate::Nanos;
use crate::control::{Dropped, Stage};
use crate::metrics::RequestRecord;
use crate::scheduler::SchedulerBug;
use crate::trace::Decision;
use crate::workload::BlockHashes;
use crate::workload::Injector;
use crate::workload::{Request, RequestClasses};
use std::borrow::Cow;

/// How a request ends, with the request: exactly one of these, exactly once.
pub(super) enum Ending<'r> {
    /// Its last token came out (on its decode instance under P/D): the `k`-th of the
    /// completions being applied.
    Completed(usize),
    /// The router rejected it.
    Rejected(Cow<'r, Request>),
    /// The control plane ended it before routing it (admission, the gateway queue).
    Dropped(Cow<'r, Request>, Dropped),
    /// Its own timeout ran out where `Stage` says.
    TimedOut(Cow<'r, Request>, Stage),
    /// An `immediate` drain of its replica dropped it.
    Drained(Cow<'r, Request>),
}

impl<'r> Ending<'r> {
    /// Why the request was not served, and the request; `None` for a completion.
    fn unserved(self) -> Option<(Cow<'r, Request>, Dropped)> {
        match self {
            Ending::Completed(_) => None,
            Ending::Rejected(r) => Some((r, Dropped::rejected(Stage::Routing, "router"))),
            Ending::Dropped(r, why) => Some((r, why)),
            Ending::TimedOut(r, stage) => Some((r, Dropped::timed_out(stage))),
            Ending::Drained(r) => Some((r, Dropped::shed(Stage::Autoscaler, "drain-immediate"))),
        }
    }

    /// Whether the request had left the control plane for routing (it counts there as in
    /// flight until it ends).
    fn routed(&self) -> bool {
        match self {
            Ending::Dropped(..) => false,
            Ending::TimedOut(_, stage) => !matches!(stage, Stage::Admission | Stage::FlowControl),
            Ending::Completed(_) | Ending::Rejected(_) | Ending::Drained(_) => true,
        }
    }

    /// The trace record of the end of `request` at `t`, when it has its own (a completion
    /// has none, and a rejection is the router's decision, traced as such).
    fn decision(&self, t: Nanos, request: u64) -> Option<Decision<'static>> {
        let why = match self {
            Ending::Completed(_) | Ending::Rejected(_) => return None,
            Ending::Dropped(_, why) if why.stage == Stage::Admission => {
                let refused = Some(*why);
                return Some(Decision::Admission {
                    t,
                    request,
                    refused,
                });
            }
            Ending::Dropped(_, why) => *why,
            Ending::TimedOut(_, stage) => Dropped::timed_out(*stage),
            Ending::Drained(_) => Dropped::shed(Stage::Autoscaler, "drain-immediate"),
        };
        Some(Decision::Dropped { t, request, why })
    }
}

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
    /// Counts `ending`.
    fn count(&mut self, ending: &Ending<'_>) {
        let n = match ending {
            Ending::Completed(_) => &mut self.finished,
            Ending::Rejected(_) => &mut self.rejected,
            Ending::Dropped(..) | Ending::Drained(_) => &mut self.dropped,
            Ending::TimedOut(..) => &mut self.timed_out,
        };
        *n += 1;
    }

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
    /// No timeout ends a request before this instant: the scheduled timeout event or the
    /// earliest deadline held, whichever comes first (`Nanos::MAX` for none).
    pub fn horizon(&self) -> Nanos {
        let deadline = self.timers.earliest_deadline().unwrap_or(Nanos::MAX);
        self.wake.map_or(deadline, |w| w.min(deadline))
    }

    /// The timers of the requests of `clients`; `None` when no request has a timeout.
    pub fn new(clients: Option<&'r RequestClasses>) -> Option<TimeoutState<'r>> {
        Some(TimeoutState {
            timers: Timeouts::new(clients)?,
            wake: None,
        })
    }
}

impl<'r> Cluster<'r> {
    /// A request ends now, as `ending` says (see the module documentation).
    pub(super) fn end(
        &mut self,
        ending: Ending<'r>,
        s: &mut Services<'_, '_>,
    ) -> Result<(), SimError> {
        let id = match &ending {
            Ending::Completed(k) => self.effects.completions.request_id(*k),
            Ending::Rejected(r)
            | Ending::Dropped(r, _)
            | Ending::TimedOut(r, _)
            | Ending::Drained(r) => r.id,
        };
        self.tally.count(&ending);
        self.disarm(id);
        if let Some(control) = s.control.as_deref_mut().filter(|_| ending.routed()) {
            control.request_left(id);
        }
        if let Some(scaling) = &mut self.scaling {
            scaling.forget(id);
        }
        if let Some(decision) = ending.decision(self.now, id).filter(|_| self.tracing) {
            self.effects.push(Effect::Decision(decision));
        }
        match ending {
            Ending::Completed(k) => self.complete(k, s)?,
            unserved => {
                if let Some(injector) = s.injector.as_deref_mut() {
                    injector.request_dropped(id, self.now);
                }
                if let Some((request, why)) = unserved.unserved() {
                    self.effects.push(Effect::Unserved { request, why });
                }
            }
        }
        Ok(())
    }

    /// The `k`-th of the completions being applied: its instance counts it and updates its
    /// recent statistics, the run's injector releases what it releases, the observer hears
    /// of it.
    fn complete(&mut self, k: usize, s: &mut Services<'_, '_>) -> Result<(), SimError> {
        let completions = &self.effects.completions;
        let i = completions.instance(k) as usize;
        let steps = self.schedulers[i].step_times();
        let record = completions.record(k, &self.setups[i].model_name, steps);
        let inst = &mut self.instances[i];
        inst.finished += 1;
        inst.recent.request_finished(&record);
        if let Some(scaling) = &mut self.scaling {
            scaling.request_finished(i as u32, &record);
        }
        if let Some(injector) = s.injector.as_deref_mut() {
            let hashes = completions.hashes(k);
            release_after(injector, &record, hashes, &mut self.released)?;
        }
        self.effects.push(Effect::Completed(k));
        Ok(())
    }

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
        while let Some(event) = self.queue.peek() {
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
            self.end(Ending::TimedOut(Cow::Owned(timer.request()), stage), s)?;
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

/// Hands the finished request of `record`, with its block `hashes`, to `injector`, appending
/// what it releases to `released`; a released request arriving before the finish is an error.
fn release_after(
    injector: &mut dyn Injector,
    record: &RequestRecord<'_>,
    hashes: BlockHashes<'_>,
    released: &mut Vec<Request>,
) -> anyhow::Result<()> {
    let before = released.len();
    injector.request_finished(record, hashes, released);
    if let Some(early) = released[before..]
        .iter()
        .find(|r| r.arrival_ns < record.end_ns)
    {
        anyhow::bail!(
            "request {} was released by request {} finishing at {} ns but arrives earlier, \
             at {} ns",
            early.id,
            record.request_id,
            record.end_ns,
            early.arrival_ns
        );
    }
    Ok(())
}
