//! Pipeline parallelism inside an instance (`pp_size > 1`), the way LLMServingSim runs it on
//! ASTRA-Sim.
//!
//! The transformer blocks are split over `pp` stages as vLLM's `get_pp_indices` does
//! ([`stage_blocks`]); each stage is a group of `tp` GPUs. Stage `s` of a step computes its
//! blocks (stage 0 also the prologue, the last stage also the head; a block's TP and EP
//! collectives stay inside its stage), then, unless it is the last stage, sends the step's
//! activation (`tokens × hidden × dtype bytes`) to stage `s + 1` over the instance's link
//! (`latency + bytes / (bandwidth · 2^30 / 1e9)` ns, as ASTRA-Sim's analytical network prices a
//! point-to-point message). A stage's GPUs are busy until their send is done; a message that
//! arrives before the next stage is free waits for it (ASTRA-Sim buffers early sends). So, for
//! step `b`:
//!
//! - stage `s` starts at `max(arrival from stage s − 1, stage s free)` (stage 0: when formed);
//! - stage `s` is free again at its compute end plus its send (the last stage: its compute
//!   end), and the step's tokens are produced when the last stage ends.
//!
//! A new step may be formed when stage 0 is free and fewer than `pp` steps are in flight
//! (LLMServingSim's `len(inflight) ≥ pp_size` check, made at the start NPU's polls, which
//! happen when stage 0 finishes its send or, idle, at every event). Pipelining therefore
//! comes only from up to `pp` consecutive steps in flight; there is no micro-batching inside
//! a step. KV recalled from the lower tier of the prefix cache is loaded before stage 0
//! computes.
//!
//! The stage times come from the backend's
//! [`LatencyBackend::stage_times`](crate::latency::LatencyBackend::stage_times): compute only
//! (the engine adds the sends, as above) or, under ASTRA-Sim, each stage's busy time with its
//! send included (the engine adds nothing; see [`crate::astra::AstraBackend`]).

use std::collections::VecDeque;

use super::dp::StepShape;
use crate::Nanos;
pub use crate::config::{Pipeline, stage_blocks};

/// When a step ends, and when stage 0 can take the next one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Timing {
    /// The last stage's end: the step's tokens are out.
    pub end: Nanos,
    /// Stage 0 is free again (its send done).
    pub stage0_free: Nanos,
}

/// What the observer learns about a step in flight when it ends.
#[derive(Debug, Clone, Copy)]
pub(super) struct Formed {
    pub start: Nanos,
    pub waiting: usize,
    pub running: usize,
    /// A DP dummy step (no request of the instance in it).
    pub dummy: bool,
    /// The padding and gate tokens the step was priced with.
    pub shape: StepShape,
}

/// The run-time state of an instance's pipeline.
#[derive(Debug)]
pub(super) struct Stages<'a> {
    pipeline: &'a Pipeline,
    /// When each stage's GPUs are free.
    free_at: Vec<Nanos>,
    /// Compute time of each stage of the step being started.
    compute: Vec<Nanos>,
    /// The steps in flight, oldest first.
    in_flight: VecDeque<Formed>,
    /// The ends of a DP group's waves in flight (see [`Stages::run_wave`]).
    wave_ends: VecDeque<Nanos>,
}

impl<'a> Stages<'a> {
    pub fn new(pipeline: &'a Pipeline) -> Stages<'a> {
        let pp = pipeline.stage_blocks.len();
        Stages {
            pipeline,
            free_at: vec![0; pp],
            compute: vec![0; pp],
            in_flight: VecDeque::with_capacity(pp),
            wave_ends: VecDeque::with_capacity(pp),
        }
    }

    /// Whether stage 0 is free at `now`.
    pub fn stage0_free(&self, now: Nanos) -> bool {
        self.free_at[0] <= now
    }

    /// Steps in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The pipeline.
    pub fn pipeline(&self) -> &'a Pipeline {
        self.pipeline
    }

    /// Sets the compute time of every stage of the next step to start to 0, and returns them
    /// to be filled (see [`Stages::start`]).
    pub fn compute_mut(&mut self) -> &mut [Nanos] {
        self.compute.fill(0);
        &mut self.compute
    }

    /// Time to send the activation of a step of `tokens` tokens to the next stage.
    pub fn send_ns(&self, tokens: u64) -> Nanos {
        self.pipeline
            .link
            .transfer_ns(tokens * self.pipeline.activation_bytes_per_token)
    }

    /// Runs a step formed at `now` through the stages, with the stage compute times set
    /// through [`Stages::compute_mut`] and sends of `send` ns between stages (0 when the stage
    /// times include them, [`StageSends::Included`](crate::latency::StageSends));
    /// `formed` is queued for [`Stages::finish`].
    pub fn start(&mut self, formed: Formed, now: Nanos, send: Nanos) -> Timing {
        let timing = self.run(now, send);
        self.in_flight.push_back(formed);
        timing
    }

    /// Runs the step through the stages (sends of `send` ns) without queueing anything.
    pub fn run(&mut self, now: Nanos, send: Nanos) -> Timing {
        let pp = self.free_at.len();
        let mut t = now;
        for s in 0..pp {
            let end = t.max(self.free_at[s]).saturating_add(self.compute[s]);
            t = if s + 1 < pp {
                end.saturating_add(send)
            } else {
                end
            };
            self.free_at[s] = t;
        }
        Timing {
            end: t,
            stage0_free: self.free_at[0],
        }
    }

    /// [`Stages::run`] for a DP group's wave, whose end is remembered (see
    /// [`Stages::waves_in_flight`]).
    pub fn run_wave(&mut self, now: Nanos, send: Nanos) -> Timing {
        let timing = self.run(now, send);
        self.wave_ends.push_back(timing.end);
        timing
    }

    /// A DP group's waves still in flight at `now` (a wave ending at `now` is done).
    pub fn waves_in_flight(&mut self, now: Nanos) -> usize {
        while self.wave_ends.front().is_some_and(|&end| end <= now) {
            self.wave_ends.pop_front();
        }
        self.wave_ends.len()
    }

    /// Queues a step for [`Stages::finish`] (a DP member of a group whose stages run it).
    pub fn push(&mut self, formed: Formed) {
        self.in_flight.push_back(formed);
    }

    /// The oldest step in flight, which ends now.
    pub fn finish(&mut self) -> Option<Formed> {
        self.in_flight.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Link;
    use crate::latency::StepParts;

    /// Two stages of one block each, prologue 10, block 100, head 20: stage 0 takes 110 ns,
    /// stage 1 120 ns. Link: 1000 ns latency, 1 GB/s (2^30 / 1e9 bytes per ns); 4 bytes per
    /// token.
    fn two_stages() -> Pipeline {
        Pipeline {
            stage_blocks: vec![1, 1],
            activation_bytes_per_token: 4,
            link: Link {
                bandwidth_gbps: 1.0,
                latency_ns: 1000.0,
            },
        }
    }

    const PARTS: StepParts = StepParts {
        prologue_ns: 10,
        block_ns: 100,
        head_ns: 20,
    };

    fn formed(start: Nanos) -> Formed {
        Formed {
            start,
            waiting: 0,
            running: 0,
            dummy: false,
            shape: StepShape::default(),
        }
    }

    fn start(
        stages: &mut Stages<'_>,
        now: Nanos,
        parts: &StepParts,
        tokens: u64,
        recall: Nanos,
    ) -> Timing {
        let blocks = &stages.pipeline().stage_blocks;
        let pp = blocks.len();
        let compute = stages.compute_mut();
        for (s, c) in compute.iter_mut().enumerate() {
            *c = parts.stage_ns(s, pp, blocks[s]);
        }
        compute[0] += recall;
        let send = stages.send_ns(tokens);
        stages.start(formed(now), now, send)
    }

    #[test]
    fn stage_times_that_include_the_sends_run_back_to_back() {
        let p = two_stages();
        let mut stages = Stages::new(&p);
        // Stage 0 busy 1110 ns (its send included), stage 1 120 ns.
        stages.compute_mut().copy_from_slice(&[1110, 120]);
        let a = stages.start(formed(0), 0, 0);
        assert_eq!((a.end, a.stage0_free), (1230, 1110));
        stages.compute_mut().copy_from_slice(&[1110, 500]);
        let b = stages.start(formed(1110), 1110, 0);
        // Stage 1 free at 1230 < arrival 2220: 2220..2720.
        assert_eq!((b.end, b.stage0_free), (2720, 2220));
    }

    #[test]
    fn a_step_runs_its_stages_one_after_the_other_with_a_send_between() {
        let p = two_stages();
        let mut stages = Stages::new(&p);
        // 1 GB/s is 2^30 / 1e9 = 1.073741824 B/ns: the send of 268 tokens × 4 B = 1072 B
        // takes 1000 + 1072 / 1.073741824 = 1998.36 → 1998 ns (truncated).
        let t = start(&mut stages, 0, &PARTS, 268, 0);
        // Stage 0: 0..110, send 110..2108; stage 1: 2108..2228.
        assert_eq!(
            t,
            Timing {
                end: 2228,
                stage0_free: 2108
            }
        );
        assert!(stages.stage0_free(2108) && !stages.stage0_free(2107));
    }

    #[test]
    fn two_steps_in_flight_queue_on_a_busy_stage() {
        let p = two_stages();
        let mut stages = Stages::new(&p);
        // One token: send = 1000 + 4 / 1.073741824 = 1003.73 → 1003 ns.
        // Step A formed at 0: stage 0 0..110, send to 1113, stage 1 1113..1233.
        let a = start(&mut stages, 0, &PARTS, 1, 0);
        assert_eq!((a.end, a.stage0_free), (1233, 1113));
        // Step B formed when stage 0 is free, at 1113: stage 0 1113..1223, send to 2226,
        // stage 1 (free since 1233) 2226..2346.
        let b = start(&mut stages, 1113, &PARTS, 1, 0);
        assert_eq!((b.end, b.stage0_free), (2346, 2226));
        // Step C formed at A's end, 1233, while stage 0 is still sending B (free at 2226):
        // stage 0 starts at 2226, ends 2336, send to 3339; stage 1 free at 2346: 3339..3459.
        assert_eq!(stages.finish().map(|f| f.start), Some(0));
        let c = start(&mut stages, 1233, &PARTS, 1, 0);
        assert_eq!((c.end, c.stage0_free), (3459, 3339));
        assert_eq!(stages.in_flight(), 2);
    }

    #[test]
    fn a_slow_last_stage_sets_the_pace() {
        let p = two_stages();
        let mut stages = Stages::new(&p);
        // Stage 1 is 10 000 ns per step (block 100, head 9900); stage 0 110 ns; send 1003.
        let parts = StepParts {
            prologue_ns: 10,
            block_ns: 100,
            head_ns: 9_900,
        };
        let a = start(&mut stages, 0, &parts, 1, 0);
        // Stage 0 0..110, send to 1113, stage 1 1113..11113.
        assert_eq!(a.end, 11_113);
        let b = start(&mut stages, a.stage0_free, &parts, 1, 0);
        // Stage 0 1113..1223, send to 2226, waits for stage 1 until 11113: ends 21113.
        assert_eq!(b.end, 21_113);
        // A recall of 50 ns delays stage 0 of the next step by that much.
        let c = start(&mut stages, 2226, &parts, 1, 50);
        assert_eq!(c.stage0_free, 2226 + 110 + 50 + 1003);
        assert_eq!(c.end, 31_113);
    }
}
