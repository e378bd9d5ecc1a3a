//! One instance in the loop: its state beside its scheduler, and starting and finishing its
//! steps (alone, or pipelined). DP groups start theirs as waves (`dp.rs`).
//!
//! The seam between the loop and an instance's engine core ([`crate::scheduler::Core`]:
//! vLLM's [`crate::scheduler::Scheduler`] or SGLang's) is narrow on purpose, so that either
//! core can stand behind it: a step is formed by `schedule(now)` (its batch, `last_batch`, priced by the
//! instance's backend) and applied by `complete_step(end, id, &mut Completions)`, which hands
//! back as values the requests it finished, each with its own end time; the loop ends each
//! one through `Cluster::end` and queues the step's [`StepReport`]. Besides that the loop only
//! queues requests (`enqueue_ranked`, `receive`), takes them out (`cancel`, `evict`), moves
//! P/D hand-offs (`pop_handoff`, `release_handoff`) and reads what the router's signals see
//! (queue lengths, KV blocks, prefix-cache lookups). No core sees the observer, the clock's
//! queue or another instance.

use super::dp::StepShape;
use super::signals::Recent;
use super::{InstanceSetup, SimError, StepEvent, pipeline};
use crate::Nanos;
use crate::latency::{BatchItem, LatencyBackend, LatencyError, StageSends};
use crate::metrics::StepSeries;
use crate::scheduler::{Completions, Core, SchedulerBug, StepTokens};

/// One instance's state in the loop, besides its scheduler.
pub(super) struct InstanceSim<'a> {
    /// A step is in flight.
    pub busy: bool,
    pub step_start: Nanos,
    /// Queue lengths when the step in flight was formed.
    pub waiting: usize,
    pub running: usize,
    pub steps: u64,
    pub dummy_steps: u64,
    /// The step in flight is a DP dummy step (no request of the instance in it).
    pub dummy: bool,
    /// The padding and gate tokens the step in flight was priced with (set by DP waves).
    pub shape: StepShape,
    pub finished: u64,
    /// Queued for a scheduling attempt at the end of the current instant.
    pub ready: bool,
    /// The stages of a pipelined instance (then `busy` and `step_start` are unused).
    pub stages: Option<pipeline::Stages<'a>>,
    /// When its last step ended (`None` before the first).
    pub last_end: Option<Nanos>,
    /// The step being formed starts as the previous one ends ([`BatchDesc::back_to_back`]).
    pub back_to_back: bool,
    /// Recent statistics the router may see (`signals.rs`).
    pub recent: Recent,
    /// Its steps tallied per interval, when the run's observer asks for them.
    pub series: Option<Box<StepSeries>>,
}

impl<'a> InstanceSim<'a> {
    /// An idle instance of `setup` that has run nothing yet.
    pub fn new(setup: &'a InstanceSetup) -> InstanceSim<'a> {
        InstanceSim {
            busy: false,
            step_start: 0,
            waiting: 0,
            running: 0,
            steps: 0,
            dummy_steps: 0,
            dummy: false,
            shape: StepShape::default(),
            finished: 0,
            ready: false,
            stages: setup.pipeline.as_ref().map(pipeline::Stages::new),
            last_end: None,
            back_to_back: false,
            recent: Recent::default(),
            series: None,
        }
    }
}

/// Forms and prices the next step of idle instance `id` at `now`; returns when it ends, or
/// `None` when nothing can run until KV transfers from the instance free its blocks.
pub(super) fn start_step(
    scheduler: &mut Core,
    inst: &mut InstanceSim<'_>,
    id: u32,
    now: Nanos,
    backend: &mut dyn LatencyBackend,
) -> Result<Option<Nanos>, SimError> {
    if !scheduler.form_step(now)? {
        if scheduler.awaits_kv() {
            return Ok(None);
        }
        return Err(SimError::Stuck {
            now,
            instance: id,
            waiting: scheduler.num_waiting(),
            running: scheduler.num_running(),
        });
    }
    let shape = StepShape {
        back_to_back: inst.last_end == Some(now),
        ..StepShape::of_step(scheduler)
    };
    let compute_ns = price_step(scheduler, shape, backend)?;
    if compute_ns == 0 {
        return Err(LatencyError::ZeroStep.into());
    }
    // KV recalled from the lower tier of the prefix cache is loaded before the step computes.
    let step_ns = compute_ns.saturating_add(scheduler.last_recall_ns());
    let end = clock_add(now, step_ns)?;
    inst.busy = true;
    inst.step_start = now;
    inst.waiting = scheduler.num_waiting();
    inst.running = scheduler.num_running();
    inst.shape = shape;
    inst.steps += 1;
    Ok(Some(end))
}

/// The price of the step `scheduler` formed last, shaped by `shape` (no padding or gate
/// tokens): from its lead alone when it is its lead and nothing else and the backend prices
/// such a step so ([`LatencyBackend::lead_step_time`]), its items unread and unwritten; else
/// from its items, written first.
#[inline]
fn price_step(
    scheduler: &mut Core,
    shape: StepShape,
    backend: &mut dyn LatencyBackend,
) -> Result<Nanos, LatencyError> {
    let lead = scheduler.last_lead();
    if lead.count > 0
        && lead.count == scheduler.formed_len()
        && let Some(ns) = backend.lead_step_time(lead, shape.back_to_back)
    {
        return Ok(ns);
    }
    let batch = shape.apply(scheduler.written_batch());
    backend.step_time(&batch.with_decode_lead(lead))
}

/// Runs idle-free instance `id` ahead of the clock from its step in flight, which ends at
/// `end`: while that step ends before `horizon` and ends no request
/// ([`Core::in_flight_ends_nothing`]), it is completed at its end and the next step is formed
/// and priced there, as a quiet step end does. `finished` must stay as it is (nothing
/// finishes). Returns when the step then in flight ends (`None`: none was formed) and how
/// many steps were completed ahead.
pub(super) fn run_ahead(
    scheduler: &mut Core,
    inst: &mut InstanceSim<'_>,
    id: u32,
    mut end: Nanos,
    horizon: Nanos,
    backend: &mut dyn LatencyBackend,
    finished: &mut Completions,
) -> Result<(Option<Nanos>, u64), SimError> {
    let mut steps = 0;
    while end < horizon && scheduler.in_flight_ends_nothing() {
        let before = finished.len();
        finish_step(scheduler, inst, id, end, finished);
        if finished.len() != before {
            let message = format!("instance {id}'s step run ahead to {end} ended a request");
            return Err(SchedulerBug::new(message).into());
        }
        inst.recent.step_finished(scheduler.prefix_tokens());
        steps += 1;
        match start_step(scheduler, inst, id, end, backend)? {
            Some(next) => end = next,
            None => return Ok((None, steps)),
        }
    }
    Ok((Some(end), steps))
}

/// `now + ns`, refused past [`crate::workload::MAX_TIME_NS`] (where sums of times could
/// wrap) rather than wrapping into a wrong result.
pub(crate) fn clock_add(now: Nanos, ns: Nanos) -> Result<Nanos, SimError> {
    match now.checked_add(ns) {
        Some(t) if t <= crate::workload::MAX_TIME_NS => Ok(t),
        _ => Err(SimError::ClockOverflow { now, ns }),
    }
}

/// Forms the next step of pipelined instance `id` at `now` if stage 0 is free, fewer than
/// `pp` steps are in flight and a batch can be formed; returns when it ends and when stage 0
/// is free again.
pub(super) fn start_pipelined(
    scheduler: &mut Core,
    inst: &mut InstanceSim<'_>,
    id: u32,
    now: Nanos,
    backend: &mut dyn LatencyBackend,
) -> Result<Option<pipeline::Timing>, SimError> {
    let Some(stages) = inst.stages.as_mut() else {
        return Ok(None);
    };
    if !stages.stage0_free(now) || !scheduler.can_form_step() || !scheduler.has_work() {
        return Ok(None);
    }
    if scheduler.schedule(now)?.is_none() {
        // Every running request has its token in flight: the next step end brings work.
        if stages.in_flight() > 0 || scheduler.awaits_kv() {
            return Ok(None);
        }
        return Err(SimError::Stuck {
            now,
            instance: id,
            waiting: scheduler.num_waiting(),
            running: scheduler.num_running(),
        });
    }
    let shape = StepShape::of_step(scheduler);
    let batch = shape.apply(scheduler.last_batch());
    let tokens = batch.total_tokens();
    let blocks = &stages.pipeline().stage_blocks;
    let compute = stages.compute_mut();
    let sends = backend.stage_times(&batch, blocks, compute)?;
    if compute.iter().all(|&ns| ns == 0) {
        return Err(LatencyError::ZeroStep.into());
    }
    // KV recalled from the lower tier of the prefix cache is loaded before stage 0 computes.
    compute[0] += scheduler.last_recall_ns();
    let formed = pipeline::Formed {
        start: now,
        waiting: scheduler.num_waiting(),
        running: scheduler.num_running(),
        dummy: false,
        shape,
    };
    let send = match sends {
        StageSends::Separate => stages.send_ns(tokens),
        StageSends::Included => 0,
    };
    let timing = stages.start(formed, now, send);
    inst.steps += 1;
    Ok(Some(timing))
}

/// A finished step, as the observer hears of it ([`StepEvent`]) but for its batch, which is
/// read from its scheduler when the report is applied.
#[derive(Debug, Clone, Copy)]
pub(super) struct StepReport {
    pub instance: u32,
    start_ns: Nanos,
    end_ns: Nanos,
    shape: StepShape,
    waiting: usize,
    running: usize,
    tokens: StepTokens,
    kv_blocks_used: usize,
    kv_blocks: usize,
}

impl StepReport {
    /// The report of the step instance `id` (`inst`) finished at `now` ([`finish_step`]),
    /// read from its scheduler.
    pub fn of(scheduler: &Core, inst: &InstanceSim<'_>, id: u32, now: Nanos) -> StepReport {
        StepReport {
            instance: id,
            start_ns: inst.step_start,
            end_ns: now,
            shape: inst.shape,
            waiting: inst.waiting,
            running: inst.running,
            tokens: scheduler.last_step_tokens(),
            kv_blocks_used: scheduler.kv_blocks_used(),
            kv_blocks: scheduler.kv_blocks(),
        }
    }

    /// The step's event, its batch being `completed` (its scheduler's
    /// [`Core::completed_batch`]).
    pub fn event(self, completed: &[BatchItem]) -> StepEvent<'_> {
        StepEvent {
            instance: self.instance,
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            batch: self.shape.apply(completed),
            waiting: self.waiting,
            running: self.running,
            tokens: self.tokens,
            kv_blocks_used: self.kv_blocks_used,
            kv_blocks: self.kv_blocks,
        }
    }
}

/// Applies the results of instance `id`'s step, which ends at `now`: the requests it
/// finished are appended to `finished`. Returns whether requests of the instance ran in it
/// (not for a DP dummy step); its report is then [`StepReport::of`].
pub(super) fn finish_step(
    scheduler: &mut Core,
    inst: &mut InstanceSim<'_>,
    id: u32,
    now: Nanos,
    finished: &mut Completions,
) -> bool {
    if let Some(formed) = inst.stages.as_mut().and_then(|s| s.finish()) {
        inst.step_start = formed.start;
        inst.waiting = formed.waiting;
        inst.running = formed.running;
        inst.dummy = formed.dummy;
        inst.shape = formed.shape;
    }
    inst.busy = false;
    inst.last_end = Some(now);
    if std::mem::take(&mut inst.dummy) {
        return false;
    }
    scheduler.complete_step(now, id, finished);
    if let Some(series) = &mut inst.series {
        let queues = (inst.running, inst.waiting);
        let kv = (scheduler.kv_blocks_used(), scheduler.kv_blocks());
        series.step(now, scheduler.last_step_tokens(), queues, kv);
    }
    true
}
