//! The instances in the loop: steps ending (phase [`super::super::Phase::StepEnds`]), KV
//! transfers arriving ([`super::super::Phase::TransferEnds`]), and the closing phase of every
//! instant, in which idle instances start their next steps (DP groups as waves).

use super::super::SimError;
use super::super::dp;
use super::super::events::EventKind;
use super::super::instance::{self, StepReport};
use super::super::pd::DecodeChoice;
use super::effects::Effect;
use super::endings::Ending;
use super::{Cluster, Services};
use crate::control::ControlPlane;
use crate::scheduler::SchedulerBug;
use crate::trace::Decision;

impl<'r> Cluster<'r> {
    /// Phase 1: instance `id`'s step ends now. Its results are applied and reported, its
    /// prefills handed off, and the requests its completions release join the arrivals.
    pub(super) fn on_step_end(
        &mut self,
        id: u32,
        s: &mut Services<'_, '_>,
    ) -> Result<(), SimError> {
        let i = id as usize;
        let from = self.effects.completions.len();
        let (scheduler, inst) = (&mut self.schedulers[i], &mut self.instances[i]);
        let ran =
            instance::finish_step(scheduler, inst, id, self.now, &mut self.effects.completions);
        // Its report is read before the ends below change anything.
        let report =
            (ran && self.report_steps).then(|| StepReport::of(scheduler, inst, id, self.now));
        self.settle_step_end(id, ran, from, report, s)
    }

    /// The rest of phase 1 for instance `id`, whose step ended now (`ran`: requests of the
    /// instance ran in it) and finished the completions from the `from`-th on.
    fn settle_step_end(
        &mut self,
        id: u32,
        ran: bool,
        from: usize,
        report: Option<StepReport>,
        s: &mut Services<'_, '_>,
    ) -> Result<(), SimError> {
        let i = id as usize;
        for k in from..self.effects.completions.len() {
            self.end(Ending::Completed(k), s)?;
        }
        if ran {
            let prefix = self.schedulers[i].prefix_tokens();
            self.instances[i].recent.step_finished(prefix);
        }
        if let Some(report) = report {
            self.effects.push(Effect::StepEnded(report));
        }
        self.mark_ready(id);
        if let Some(t) = &mut self.transfers {
            let choice = DecodeChoice {
                eligibility: &self.eligibility,
                signals: &mut self.signals,
                instances: &self.instances,
                autoscaler: self.scaling.as_ref().map(|sc| sc.autoscaler()),
            };
            t.hand_off(
                id,
                self.now,
                &mut self.schedulers,
                choice,
                &mut self.effects,
            )?;
        }
        self.wake_receivers();
        // After its hand-offs: a draining prefill replica waits for the KV it still holds.
        self.settle_drain(id, s)?;
        // Requests released by this step's completions (hand-offs release none).
        for request in self.released.drain(..) {
            let t = self.arrivals.release(request);
            self.queue.push(t, EventKind::Arrival);
        }
        self.admit_gated();
        self.ask_gateway_again(s);
        Ok(())
    }

    /// A quiet step end (see [`Cluster::step_quietly`]): when the earliest event is instance
    /// `id`'s step end at `t`, alone at its instant, its step is completed, and when that
    /// ended no request the instant is settled here: the instance forms and prices its next
    /// step at once and its step end takes the place of the one applied, without the
    /// instant's phases (there is nothing else to apply at `t`, and nothing outside the
    /// instance hears of a step that ends nothing). Returns whether the instant is settled;
    /// when a request ended, the step end is applied as [`Cluster::on_step_end`] does and the
    /// loop settles the rest of the instant.
    pub(super) fn quiet_step_end(
        &mut self,
        t: crate::Nanos,
        s: &mut Services<'_, '_>,
    ) -> Result<bool, SimError> {
        let Some(id) = self.queue.lone_step_end(t) else {
            return Ok(false);
        };
        let i = id as usize;
        let in_group = self.dp_group(id).is_some();
        // A draining replica's step end may let it go (`settle_drain`).
        let draining = (self.scaling.as_ref()).is_some_and(|sc| sc.draining(id));
        if self.instances[i].stages.is_some() || in_group || draining || !self.ready.is_empty() {
            return Ok(false);
        }
        if self.warm
            && let Some(j) = self.queue.second_step_end()
        {
            // One event ahead, as the loop warms: while this step end is applied.
            self.warm_instance(j);
        }
        let horizon = self.ahead_horizon(s.control.as_deref());
        let pd = self.transfers.is_some();
        let inst = &mut self.instances[i];
        // The ranking reads requests waiting and running alone: the instance is listed as
        // changed only when they change.
        let by_queues = self.signals.keys_read_queues_only();
        let scheduler = self.schedulers.get_mut_unlisted(i);
        let queues =
            |c: &crate::scheduler::Core| (c.num_waiting() + c.num_incoming(), c.num_running());
        let before = queues(scheduler);
        let completions = &mut self.effects.completions;
        let from = completions.len();
        let ran = instance::finish_step(scheduler, inst, id, t, completions);
        if completions.len() > from || !ran || (pd && scheduler.has_handoffs()) {
            self.schedulers.note_changed(i);
            self.queue.pop_until(t);
            self.settle_step_end(id, ran, from, None, s)?;
            self.apply_effects(s)?;
            return Ok(false);
        }
        inst.recent.step_finished(scheduler.prefix_tokens());
        let backend = &mut *s.backends[i];
        let mut end = match scheduler.has_work() {
            true => instance::start_step(scheduler, inst, id, t, backend)?,
            false => None,
        };
        // A decode instance that may start KV pulls (requests wait for it, or a pull
        // started now) steps no further than now: pulls start at its step starts.
        let pulls_ahead = pd && (scheduler.num_waiting() > 0 || scheduler.has_pull_starts());
        if let Some(at) = end
            && horizon > at
            && !pulls_ahead
        {
            let ahead =
                instance::run_ahead(scheduler, inst, id, at, horizon, backend, completions)?;
            end = ahead.0;
            self.steps_ahead += ahead.1;
        }
        if !by_queues || queues(scheduler) != before {
            self.schedulers.note_changed(i);
        }
        match end {
            Some(end) => self
                .queue
                .replace_next(end, EventKind::StepEnd { instance: id }),
            None => {
                self.queue.pop_until(t);
            }
        }
        if pd && self.schedulers[i].has_pull_starts() {
            // The pulls the step formed now started, as the closing phase starts them.
            self.start_kv_pulls(id)?;
            self.apply_effects(s)?;
        }
        Ok(true)
    }

    /// How far a quiet step end may run its instance ahead ([`Cluster::step_ahead`]): to the
    /// next known arrival, timeout or decision of the `control` plane (strictly before it),
    /// or not at all (0).
    fn ahead_horizon(&self, control: Option<&ControlPlane>) -> crate::Nanos {
        if !self.ahead || self.releases {
            return 0;
        }
        let never = crate::Nanos::MAX;
        let arrival = self.arrivals.next_arrival().unwrap_or(never);
        // A timeout may take a request out of this instance.
        let timeout = self.timeouts.as_ref().map_or(never, |t| t.horizon());
        // A decision may route a request to it, or read it.
        let decision = (self.control.wake.into_iter())
            .chain(control.and_then(ControlPlane::next_wake))
            .min()
            .unwrap_or(never);
        // A hand-off may route a request to it, or read it, and a transfer's end bring it
        // one; an autoscaler's tick reads it, and a replica's change of state may route to
        // it; a control plane holding requests for room dispatches them at any end, routed
        // at once: with transfers, an autoscaler or requests held for room, nothing else may
        // happen first. (A concurrency gate admits at a completion only requests it holds,
        // whose arrivals are past: the next arrival is then now. A lower tier shared by
        // instances is not touched by the steps run ahead: their members write nothing
        // down, and recall nothing.)
        let holding = control.is_some_and(ControlPlane::waiting_for_capacity);
        let others = match self.transfers.is_some() || self.scaling.is_some() || holding {
            true => self.queue.second_time().unwrap_or(never),
            false => never,
        };
        arrival.min(timeout).min(decision).min(others)
    }

    /// Phase 2: the KV transfer from `sender` arrives now at its decode instance.
    pub(super) fn on_transfer_end(
        &mut self,
        sender: u32,
        s: &mut Services<'_, '_>,
    ) -> Result<(), SimError> {
        let Some(t) = &mut self.transfers else {
            return Err(SchedulerBug::new("a transfer without P/D".into()).into());
        };
        let to = t.finish(sender, self.now, &mut self.schedulers, &mut self.effects)?;
        // The decode instance has a request; the sender has blocks back.
        self.mark_ready(to);
        self.mark_ready(sender);
        // Draining replicas waiting for this transfer may be done (or drop what came).
        self.settle_drain(sender, s)?;
        self.settle_drain(to, s)?;
        self.ask_gateway_again(s);
        Ok(())
    }

    /// vLLM's P/D flow: marks the decode instances that were just sent requests to pull
    /// ready, so that an idle one forms a step and starts the pulls.
    pub(super) fn wake_receivers(&mut self) {
        let Some(t) = &mut self.transfers else {
            return;
        };
        let mut received = t.take_received();
        for &id in &received {
            self.mark_ready(id);
        }
        received.clear();
        if let Some(t) = &mut self.transfers {
            t.give_back_received(received);
        }
    }

    /// Closing phase: every instance queued for an attempt, by id, starts a step (or its DP
    /// group a wave) if it can.
    pub(super) fn start_ready_instances(
        &mut self,
        s: &mut Services<'_, '_>,
    ) -> Result<(), SimError> {
        self.ready.sort_unstable();
        for k in 0..self.ready.len() {
            let id = self.ready[k];
            self.instances[id as usize].ready = false;
            match self.dp_group(id) {
                Some(group) => {
                    self.start_wave(group, s)?;
                    for k in 0..self.groups[group as usize].len() {
                        self.start_kv_pulls(self.groups[group as usize][k])?;
                    }
                    if self.tracing {
                        for k in 0..self.groups[group as usize].len() {
                            self.report_scheduling(self.groups[group as usize][k]);
                        }
                    }
                }
                None => {
                    self.start_instance(id, s)?;
                    self.start_kv_pulls(id)?;
                    if self.tracing {
                        self.report_scheduling(id);
                    }
                }
            }
        }
        self.ready.clear();
        Ok(())
    }

    /// Starts a wave of DP group `group` if it can (see `dp.rs`).
    pub(super) fn start_wave(
        &mut self,
        group: u32,
        s: &mut Services<'_, '_>,
    ) -> Result<(), SimError> {
        let members = &self.groups[group as usize];
        let wave = dp::Wave {
            group,
            members,
            instances: &mut self.instances,
            schedulers: &mut self.schedulers,
            backends: s.backends,
            pricer: s.waves.as_deref_mut(),
        };
        if let Some(stages) = self.group_stages[group as usize].as_mut() {
            let pipelined = dp::PipelinedWave { wave, stages };
            if let Some(t) = pipelined.start(self.now)? {
                for &m in members {
                    self.queue.push(t.end, EventKind::StepEnd { instance: m });
                }
                let first = members[0];
                let kind = EventKind::StageFree { instance: first };
                self.queue.push(t.stage0_free, kind);
            }
        } else if let Some(end) = wave.start(self.now)? {
            for (i, &m) in members.iter().enumerate() {
                self.queue
                    .push(end.of(i), EventKind::StepEnd { instance: m });
            }
        }
        Ok(())
    }

    /// vLLM's P/D flow: starts the KV pulls of the requests the step instance `id` just
    /// formed reached (at the step's start, now), if it is a decode instance with any.
    pub(super) fn start_kv_pulls(&mut self, id: u32) -> Result<(), SimError> {
        if let Some(t) = &mut self.transfers {
            t.start_pulls(id, self.now, &mut self.schedulers, &mut self.effects)?;
        }
        Ok(())
    }

    /// Starts the next step of instance `id` (outside DP groups) if it can.
    pub(super) fn start_instance(
        &mut self,
        id: u32,
        s: &mut Services<'_, '_>,
    ) -> Result<(), SimError> {
        let i = id as usize;
        let (inst, scheduler) = (&mut self.instances[i], &mut self.schedulers[i]);
        let backend = &mut *s.backends[i];
        let now = self.now;
        if inst.stages.is_some() {
            if let Some(t) = instance::start_pipelined(scheduler, inst, id, now, backend)? {
                self.queue.push(t.end, EventKind::StepEnd { instance: id });
                let kind = EventKind::StageFree { instance: id };
                self.queue.push(t.stage0_free, kind);
            }
            return Ok(());
        }
        if !inst.busy
            && scheduler.has_work()
            && let Some(end) = instance::start_step(scheduler, inst, id, now, backend)?
        {
            self.queue.push(end, EventKind::StepEnd { instance: id });
        }
        Ok(())
    }

    /// Queues the scheduling decisions instance `id` noted, for the trace.
    pub(super) fn report_scheduling(&mut self, id: u32) {
        let t = self.now;
        for decision in self.schedulers[id as usize].take_decisions() {
            let d = Decision::Schedule {
                t,
                instance: id,
                decision,
            };
            self.effects.push(Effect::Decision(d));
        }
    }
}
