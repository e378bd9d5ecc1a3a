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
pub struct Timing {
    /// The last stage's end: the step's tokens are out.
    pub end: Nanos,
    /// Stage 0 is free again (its send done).
    pub stage0_free: Nanos,
}

/// What the observer learns about a step in flight when it ends.
#[derive(Debug, Clone, Copy)]
pub struct Formed {
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
pub struct Stages<'a> {
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
