//! Data-parallel groups: instances of a MoE model that step in lock step.
//!
//! The members of a DP group meet at every MoE collective of a step (the expert-parallel
//! dispatch and combine span the group), so they run their steps as *waves*: a wave starts
//! when every member is idle and some member has work. Each member then forms its batch; a
//! member with nothing to run contributes a dummy batch (one decode token with a one-token
//! context, as LLMServingSim and vLLM's `execute_dummy_batch` do). Every batch is padded to the
//! token count of the largest ([`BatchDesc::pad_tokens`]), every member's experts fire for the
//! whole group's tokens (the dispatch gathers them: [`BatchDesc::gate_tokens`]), each member's
//! step is priced by its own backend (which also prices the collectives at the padded size),
//! and the wave lasts as long as the slowest member: every member's step ends at
//! `start + max(step times)`. A
//! [`WavePricer`] may price a group's waves as wholes instead (ASTRA-Sim co-simulating the
//! group in one process): then each member's step ends at its own time, and the next wave
//! starts when the last member's has ended.
//!
//! Taking the slowest member's whole step is exact when the members differ only in attention
//! (the case under BALANCED expert routing, since padding makes every other layer equal):
//! then one member is the slowest between every pair of collectives. With RR or RAND routing
//! the expert loads differ too, and a per-layer maximum would be slightly longer.
//!
//! The members are scheduled in id order at the wave's start, so a wave is deterministic.
//!
//! Under P/D disaggregation a group's members share a role. A prefill member hands off what
//! its step prefilled like any prefill instance (each member sends over its own link) and
//! its batch carries the KV it sends; when no member can form a batch because a member's
//! blocks are held by its transfers, no wave starts until a transfer ends.
//!
//! With pipeline parallelism (every member has the same `pp` stages), the group's waves are
//! pipelined like one instance's steps (`pipeline.rs`): a wave starts when the group's stage 0
//! is free, fewer than `pp` waves are in flight and some member has work (a member whose running
//! requests all have a token in flight contributes a dummy); each stage of a wave lasts as long
//! as the slowest member's (the members meet at its MoE collectives), and the activation sent
//! between stages is the padded width's. A [`WavePricer`] may price a pipelined group's waves
//! as wholes instead ([`WavePricer::wave_stage_times`]: the group's busy time of each stage).

use super::cores::Cores;
use super::pipeline::{Formed, Stages, Timing};
use super::{InstanceSim, Setups, SimError};
use crate::Nanos;
use crate::latency::{BatchDesc, BatchItem, LatencyBackend, LatencyError, StageSends};
use crate::scheduler::Core;

/// The batch of an idle member: one decode token over a one-token context.
const DUMMY: [BatchItem; 1] = [BatchItem {
    new_tokens: 1,
    context_tokens: 1,
}];

/// The members of every DP group, by group index, each in instance id order.
pub(super) fn groups(setups: Setups<'_>) -> Vec<Vec<u32>> {
    let mut groups: Vec<Vec<u32>> = Vec::new();
    for (id, setup) in setups.iter().enumerate() {
        if let Some(g) = setup.dp_group {
            let g = g as usize;
            if groups.len() <= g {
                groups.resize_with(g + 1, Vec::new);
            }
            groups[g].push(id as u32);
        }
    }
    groups
}

/// Prices the waves of DP groups as wholes, instead of each member by its own backend (e.g.
/// one ASTRA-Sim process holding every member's NPUs, whose collectives span the members).
pub trait WavePricer {
    /// Each member's step time in a wave of group `group` whose members (`members`, in id
    /// order) run `batches` (one per member, same order, already padded to the group's
    /// widest; a dummy for an idle member): when that member's own NPUs are done, its requests'
    /// tokens are out; the next wave starts when the last member is done. `None` when this
    /// pricer does not price that group (then each member is priced by its own backend and
    /// every member's step lasts as long as the slowest). `backends` are the instances' own
    /// (by instance id), e.g. for each member's compute breakdown.
    fn wave_ns(
        &mut self,
        group: u32,
        members: &[u32],
        batches: &[BatchDesc<'_>],
        backends: &mut [&mut dyn LatencyBackend],
    ) -> Result<Option<Vec<Nanos>>, LatencyError>;

    /// The busy time of each stage of a wave of pipelined group `group` (arguments as for
    /// [`WavePricer::wave_ns`]), written into `out` (one per stage): the group's stage is busy
    /// until every member's is done (see [`LatencyBackend::stage_times`]). `None` when this
    /// pricer does not price that group (then each stage lasts as long as the slowest
    /// member's, priced by its own backend).
    fn wave_stage_times(
        &mut self,
        _group: u32,
        _members: &[u32],
        _batches: &[BatchDesc<'_>],
        _backends: &mut [&mut dyn LatencyBackend],
        _out: &mut [Nanos],
    ) -> Result<Option<StageSends>, LatencyError> {
        Ok(None)
    }
}

/// When the members' steps of a wave end.
pub(super) enum WaveEnd {
    /// Every member's at the same time.
    All(Nanos),
    /// Each member's (in member order).
    Each(Vec<Nanos>),
}

impl WaveEnd {
    /// The end of the step of the `i`-th member.
    pub fn of(&self, i: usize) -> Nanos {
        match self {
            WaveEnd::All(end) => *end,
            WaveEnd::Each(ends) => ends[i],
        }
    }
}

/// The shape of a wave's batches, once every member has formed its own.
#[derive(Debug, Clone, Copy)]
struct WaveWidth {
    /// The widest batch's token count, to which every member is padded.
    widest: u64,
    /// Tokens at the gate of every member's experts: all members' real tokens, plus one for
    /// the padding and dummies if there are any (their identical rows pick the same
    /// experts). See [`BatchDesc::gate_tokens`].
    gate: u64,
}

/// Forms every member's batch at `now` (a member without one gets a dummy: `dummy` set);
/// returns the wave's width, or `None` when no member has a real batch.
fn form_batches(
    members: &[u32],
    instances: &mut [InstanceSim<'_>],
    schedulers: &mut Cores<'_>,
    now: Nanos,
) -> Result<Option<WaveWidth>, SimError> {
    let (mut widest, mut narrowest) = (0u64, u64::MAX);
    let (mut real_tokens, mut dummies) = (0u64, false);
    for &m in members {
        let (scheduler, inst) = (&mut schedulers[m as usize], &mut instances[m as usize]);
        inst.back_to_back = inst.last_end == Some(now);
        let tokens = match scheduler.has_work().then(|| scheduler.schedule(now)) {
            Some(result) => result?.map(|items| BatchDesc::new(items).total_tokens()),
            None => None,
        };
        inst.dummy = tokens.is_none();
        real_tokens += tokens.unwrap_or(0);
        dummies |= tokens.is_none();
        widest = widest.max(tokens.unwrap_or(1));
        narrowest = narrowest.min(tokens.unwrap_or(1));
    }
    if real_tokens == 0 {
        return Ok(None);
    }
    let padded = dummies || narrowest < widest;
    Ok(Some(WaveWidth {
        widest,
        gate: real_tokens + u64::from(padded),
    }))
}

/// How a step is priced beyond its own batch: padded to its DP wave's widest batch, with its
/// experts fired by the wave's gate tokens, sending the KV of the prompts it completes (a
/// prefill instance's). The default, no padding, gate or sent tokens, is a colocated step
/// outside DP groups.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepShape {
    pub pad_tokens: u32,
    pub gate_tokens: u64,
    pub kv_send_tokens: u64,
    /// The step starts as the instance's previous step ends ([`BatchDesc::back_to_back`]).
    pub back_to_back: bool,
}

impl StepShape {
    /// The shape of the step `scheduler` just formed outside DP groups.
    pub fn of_step(scheduler: &Core) -> StepShape {
        StepShape {
            kv_send_tokens: scheduler.last_kv_send_tokens(),
            ..StepShape::default()
        }
    }

    /// The batch of `items` as the step was priced.
    pub fn apply(self, items: &[BatchItem]) -> BatchDesc<'_> {
        BatchDesc::padded(items, self.pad_tokens)
            .with_gate_tokens(self.gate_tokens)
            .with_kv_send_tokens(self.kv_send_tokens)
            .with_back_to_back(self.back_to_back)
    }
}

/// A member's batch of a wave (a dummy for an idle member).
fn own_items<'s>(inst: &InstanceSim<'_>, scheduler: &'s Core) -> &'s [BatchItem] {
    if inst.dummy {
        &DUMMY[..]
    } else {
        scheduler.last_batch()
    }
}

/// The shape of a member's step in a wave of `width`.
fn step_shape(inst: &InstanceSim<'_>, scheduler: &Core, width: WaveWidth) -> StepShape {
    let own = BatchDesc::new(own_items(inst, scheduler)).total_tokens();
    StepShape {
        pad_tokens: u32::try_from(width.widest - own).unwrap_or(u32::MAX),
        gate_tokens: width.gate,
        kv_send_tokens: if inst.dummy {
            0
        } else {
            scheduler.last_kv_send_tokens()
        },
        back_to_back: inst.back_to_back,
    }
}

/// A member's batch of a wave (a dummy for an idle member), padded to the wave's width, with
/// the KV a prefill member sends.
fn padded_batch<'s>(
    inst: &InstanceSim<'_>,
    scheduler: &'s Core,
    width: WaveWidth,
) -> BatchDesc<'s> {
    step_shape(inst, scheduler, width).apply(own_items(inst, scheduler))
}

/// The KV a member recalls from the lower tier of the prefix cache before its step (none for
/// a dummy), ns.
fn recall_ns(inst: &InstanceSim<'_>, scheduler: &Core) -> Nanos {
    if inst.dummy {
        0
    } else {
        scheduler.last_recall_ns()
    }
}

/// The error of a group with work but no batch to form: names the first member with work.
fn stuck(members: &[u32], schedulers: &Cores<'_>, now: Nanos) -> SimError {
    let m = *members
        .iter()
        .find(|&&m| schedulers[m as usize].has_work())
        .unwrap_or(&members[0]);
    let s = &schedulers[m as usize];
    SimError::Stuck {
        now,
        instance: m,
        waiting: s.num_waiting(),
        running: s.num_running(),
    }
}

/// One attempt to start a wave of a DP group.
pub(super) struct Wave<'w, 'a, 'b, 'p> {
    /// The group's index.
    pub group: u32,
    /// The group's members, in id order.
    pub members: &'w [u32],
    pub instances: &'w mut [InstanceSim<'a>],
    pub schedulers: &'w mut Cores<'a>,
    pub backends: &'w mut [&'b mut dyn LatencyBackend],
    /// Prices whole waves of the groups it knows.
    pub pricer: Option<&'w mut (dyn WavePricer + 'p)>,
}

/// One attempt to start a wave of a pipelined DP group, whose stages are `stages`.
pub(super) struct PipelinedWave<'w, 'a, 'b, 'p> {
    pub wave: Wave<'w, 'a, 'b, 'p>,
    pub stages: &'w mut Stages<'a>,
}

impl PipelinedWave<'_, '_, '_, '_> {
    /// Starts a wave at `now` if the group's stage 0 is free, fewer than `pp` waves are in
    /// flight and a member has work; returns when it ends and when stage 0 is free again.
    pub fn start(self, now: Nanos) -> Result<Option<Timing>, SimError> {
        let PipelinedWave { wave, stages } = self;
        let Wave {
            group,
            members,
            instances,
            schedulers,
            backends,
            pricer,
        } = wave;
        let pp = stages.pipeline().stage_blocks.len();
        let work = members.iter().any(|&m| schedulers[m as usize].has_work());
        if !stages.stage0_free(now) || stages.waves_in_flight(now) >= pp || !work {
            return Ok(None);
        }
        let Some(width) = form_batches(members, instances, schedulers, now)? else {
            for &m in members {
                instances[m as usize].dummy = false;
            }
            // Every running request has its token in flight: a wave end brings work (or a
            // transfer's end does).
            if stages.waves_in_flight(now) > 0
                || members.iter().any(|&m| schedulers[m as usize].awaits_kv())
            {
                return Ok(None);
            }
            return Err(stuck(members, schedulers, now));
        };
        let blocks = &stages.pipeline().stage_blocks;
        let padded = |m: u32| padded_batch(&instances[m as usize], &schedulers[m as usize], width);
        // The whole wave at once, when a pricer takes the group: the members' recalls delay
        // the wave's stage 0 (the members meet at every collective).
        let compute = stages.compute_mut();
        let whole = match pricer {
            Some(pricer) => {
                let batches: Vec<BatchDesc<'_>> = members.iter().map(|&m| padded(m)).collect();
                pricer.wave_stage_times(group, members, &batches, backends, compute)?
            }
            None => None,
        };
        if whole.is_some() {
            if compute.iter().all(|&ns| ns == 0) {
                return Err(LatencyError::ZeroWave.into());
            }
            compute[0] += members
                .iter()
                .map(|&m| recall_ns(&instances[m as usize], &schedulers[m as usize]))
                .max()
                .unwrap_or(0);
        }
        // Else each stage lasts as long as the slowest member's.
        for &m in members.iter().filter(|_| whole.is_none()) {
            let (inst, scheduler) = (&instances[m as usize], &schedulers[m as usize]);
            let parts = backends[m as usize].step_parts(&padded_batch(inst, scheduler, width))?;
            if parts.prologue_ns + parts.block_ns + parts.head_ns == 0 {
                return Err(LatencyError::ZeroStep.into());
            }
            let recall = recall_ns(inst, scheduler);
            for (s, c) in compute.iter_mut().enumerate() {
                let ns = parts.stage_ns(s, pp, blocks[s]) + if s == 0 { recall } else { 0 };
                *c = (*c).max(ns);
            }
        }
        let send = match whole {
            Some(StageSends::Included) => 0,
            Some(StageSends::Separate) | None => stages.send_ns(width.widest),
        };
        let timing = stages.run_wave(now, send);
        push_formed(members, instances, schedulers, width, now);
        Ok(Some(timing))
    }
}

/// Records, in each member's own stages, the step it formed at `now` in a pipelined wave of
/// `width`, and counts it (a dummy apart).
fn push_formed(
    members: &[u32],
    instances: &mut [InstanceSim<'_>],
    schedulers: &Cores<'_>,
    width: WaveWidth,
    now: Nanos,
) {
    for &m in members {
        let (inst, scheduler) = (&mut instances[m as usize], &schedulers[m as usize]);
        let shape = step_shape(inst, scheduler, width);
        let formed = Formed {
            start: now,
            waiting: scheduler.num_waiting(),
            running: scheduler.num_running(),
            dummy: std::mem::take(&mut inst.dummy),
            shape,
        };
        if formed.dummy {
            inst.dummy_steps += 1;
        } else {
            inst.steps += 1;
        }
        if let Some(own) = inst.stages.as_mut() {
            own.push(formed);
        }
    }
}

impl Wave<'_, '_, '_, '_> {
    /// Starts a wave at `now` if every member is idle and one has work; returns when the
    /// members' steps end.
    pub fn start(self, now: Nanos) -> Result<Option<WaveEnd>, SimError> {
        let Wave {
            group,
            members,
            instances,
            schedulers,
            backends,
            pricer,
        } = self;
        let idle = members.iter().all(|&m| !instances[m as usize].busy);
        let work = members.iter().any(|&m| schedulers[m as usize].has_work());
        if !idle || !work {
            return Ok(None);
        }
        // Form every member's batch; a member without one runs a dummy.
        let Some(width) = form_batches(members, instances, schedulers, now)? else {
            for &m in members {
                instances[m as usize].dummy = false;
            }
            // Members with KV on the wire (held for a transfer from them, or pulled to
            // them): a transfer's end brings work.
            if members.iter().any(|&m| schedulers[m as usize].awaits_kv()) {
                return Ok(None);
            }
            return Err(stuck(members, schedulers, now));
        };
        let padded = |m: u32| padded_batch(&instances[m as usize], &schedulers[m as usize], width);
        // KV recalled from the lower tier of the prefix cache loads before a member's step.
        let recall = |m: u32| recall_ns(&instances[m as usize], &schedulers[m as usize]);
        // The whole wave at once, when a pricer takes the group: the members' recalls delay
        // the wave (the members meet at every collective).
        let whole = match pricer {
            Some(pricer) => {
                let batches: Vec<BatchDesc<'_>> = members.iter().map(|&m| padded(m)).collect();
                let delay = members.iter().map(|&m| recall(m)).max().unwrap_or(0);
                match pricer.wave_ns(group, members, &batches, backends)? {
                    Some(each) if each.len() == members.len() && !each.contains(&0) => {
                        let ends: Result<Vec<Nanos>, SimError> = each
                            .into_iter()
                            .map(|ns| super::clock_add(now, ns.saturating_add(delay)))
                            .collect();
                        Some(ends?)
                    }
                    Some(each) => {
                        return Err(LatencyError::WaveTimes {
                            members: members.len(),
                            priced: each,
                        }
                        .into());
                    }
                    None => None,
                }
            }
            None => None,
        };
        // Else price each member at the padded width; the slowest sets the wave's length.
        let mut wave_ns: Nanos = 0;
        for &m in members.iter().filter(|_| whole.is_none()) {
            let ns = backends[m as usize].step_time(&padded(m))?;
            if ns == 0 {
                return Err(LatencyError::ZeroStep.into());
            }
            wave_ns = wave_ns.max(ns.saturating_add(recall(m)));
        }
        mark_started(members, instances, schedulers, width, now);
        Ok(Some(match whole {
            Some(ends) => WaveEnd::Each(ends),
            None => WaveEnd::All(super::clock_add(now, wave_ns)?),
        }))
    }
}

/// Marks every member busy with the step it formed at `now` in a wave of `width`, and
/// counts it (a dummy apart).
fn mark_started(
    members: &[u32],
    instances: &mut [InstanceSim<'_>],
    schedulers: &Cores<'_>,
    width: WaveWidth,
    now: Nanos,
) {
    for &m in members {
        let (inst, scheduler) = (&mut instances[m as usize], &schedulers[m as usize]);
        inst.shape = step_shape(inst, scheduler, width);
        inst.busy = true;
        inst.step_start = now;
        inst.waiting = scheduler.num_waiting();
        inst.running = scheduler.num_running();
        if inst.dummy {
            inst.dummy_steps += 1;
        } else {
            inst.steps += 1;
        }
    }
}
