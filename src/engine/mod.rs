//! The discrete-event loop of one instance.
//!
//! Loop, in order, at simulated time `now`:
//! 1. Every request with `arrival ≤ now` joins the waiting queue (arrival order).
//! 2. The scheduler forms a batch. If there is one, the latency backend prices it, the clock
//!    advances by the step time, and the step's results (first tokens, inter-token gaps,
//!    completions) are applied at the new time. The next batch starts at that same instant:
//!    steps run back to back.
//! 3. If no batch can be formed and nothing is waiting or running, the clock jumps exactly to
//!    the next arrival; with no arrival left the run ends. Work that can never be scheduled is
//!    a loud error, never a spin.
//!
//! One instance has exactly one kind of event (its step finishing) besides arrivals, so a
//! cursor over the sorted arrivals and the step clock replace an event heap here.

use crate::Nanos;
use crate::latency::{BatchDesc, LatencyBackend, LatencyError};
use crate::metrics::RequestRecord;
use crate::scheduler::{Scheduler, SchedulerBug, SchedulerConfig, SchedulerStats};
use crate::workload::Request;

/// What the engine needs to know about the instance beyond its scheduler.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceSetup {
    /// Model name, reported in the CSV; requests naming another model are rejected.
    pub model_name: String,
    /// Longest sequence (prompt + output) the model accepts.
    pub max_model_len: u32,
    /// KV blocks of the instance.
    pub num_blocks: u32,
    pub scheduler: SchedulerConfig,
}

/// One finished step, for observers (logging, progress).
#[derive(Debug, Clone, Copy)]
pub struct StepEvent<'a> {
    /// Step start time.
    pub start_ns: Nanos,
    /// Step finish time.
    pub end_ns: Nanos,
    pub batch: BatchDesc<'a>,
    pub waiting: usize,
    pub running: usize,
}

/// Receives the run's results as they happen.
pub trait Observer {
    /// A request produced its last token.
    fn request_finished(&mut self, record: &RequestRecord<'_>) -> anyhow::Result<()>;

    /// A step finished (called after its requests are recorded).
    fn step_finished(
        &mut self,
        step: &StepEvent<'_>,
        backend: &mut dyn LatencyBackend,
    ) -> anyhow::Result<()>;
}

/// The outcome of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOutcome {
    /// Simulated time when the last request finished.
    pub total_clocks_ns: Nanos,
    /// Steps executed.
    pub steps: u64,
    /// Requests finished.
    pub finished: u64,
    pub stats: SchedulerStats,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A request can never be served as configured.
    #[error("request {id} (workload line {line}): {message}")]
    Unservable { id: u64, line: u64, message: String },
    /// The latency backend failed.
    #[error("latency backend: {0}")]
    Latency(#[from] LatencyError),
    /// An internal invariant broke.
    #[error(transparent)]
    Bug(#[from] SchedulerBug),
    /// Requests remain but no step can be formed: a bug, reported instead of spinning.
    #[error(
        "stuck at {now} ns: nothing can be scheduled with {waiting} waiting and {running} running"
    )]
    Stuck {
        now: Nanos,
        waiting: usize,
        running: usize,
    },
    /// Writing results failed.
    #[error(transparent)]
    Output(#[from] anyhow::Error),
}

/// Checks up front that every request can be served at all, so that no run hangs on a
/// request that can never fit.
pub fn check_servable(requests: &[Request], setup: &InstanceSetup) -> Result<(), SimError> {
    let block = u64::from(setup.scheduler.block_size);
    let capacity = u64::from(setup.num_blocks) * block;
    for r in requests {
        let fail = |message: String| SimError::Unservable {
            id: r.id,
            line: r.line,
            message,
        };
        if let Some(m) = &r.model
            && !model_matches(m, &setup.model_name)
        {
            return Err(fail(format!(
                "asks for model `{m}` but the instance serves `{}`",
                setup.model_name
            )));
        }
        let total = u64::from(r.input_toks) + u64::from(r.output_toks);
        if total > u64::from(setup.max_model_len) {
            return Err(fail(format!(
                "prompt {} + output {} = {total} tokens exceeds the model's maximum length {}",
                r.input_toks, r.output_toks, setup.max_model_len
            )));
        }
        let sched = &setup.scheduler;
        let first_chunk = match sched.long_prefill_token_threshold {
            0 => r.input_toks,
            t => r.input_toks.min(t),
        };
        if !sched.enable_chunked_prefill && first_chunk > sched.max_num_batched_tokens {
            return Err(fail(format!(
                "prompt of {} tokens exceeds --max-num-batched-tokens {} with chunked prefill off",
                r.input_toks, sched.max_num_batched_tokens
            )));
        }
        let what = if u64::from(r.input_toks).div_ceil(block) * block > capacity {
            "prompt"
        } else {
            "prompt + output"
        };
        if total.div_ceil(block) > u64::from(setup.num_blocks) {
            return Err(fail(format!(
                "{what} needs {} KV blocks but the cache holds only {} ({capacity} tokens); \
                 raise --npu-memory-utilization or --tp, or use larger hardware",
                total.div_ceil(block),
                setup.num_blocks
            )));
        }
    }
    Ok(())
}

/// Whether a request's `model` field names the served model: equal ignoring case, or equal to
/// the part after the organisation.
fn model_matches(asked: &str, served: &str) -> bool {
    let short = |s: &str| s.rsplit('/').next().unwrap_or(s).to_ascii_lowercase();
    asked.eq_ignore_ascii_case(served) || short(asked) == short(served)
}

/// Runs `requests` (sorted by arrival) on one instance to completion.
pub fn run(
    requests: &[Request],
    setup: &InstanceSetup,
    backend: &mut dyn LatencyBackend,
    observer: &mut dyn Observer,
) -> Result<RunOutcome, SimError> {
    check_servable(requests, setup)?;
    let mut scheduler = Scheduler::new(setup.scheduler.clone(), setup.num_blocks);
    let mut now: Nanos = 0;
    let mut next = 0usize;
    let mut steps = 0u64;
    let mut finished = 0u64;
    loop {
        while next < requests.len() && requests[next].arrival_ns <= now {
            scheduler.enqueue(&requests[next]);
            next += 1;
        }
        let Some(items) = scheduler.schedule(now)? else {
            if scheduler.has_work() {
                return Err(SimError::Stuck {
                    now,
                    waiting: scheduler.num_waiting(),
                    running: scheduler.num_running(),
                });
            }
            match requests.get(next) {
                Some(r) => {
                    now = now.max(r.arrival_ns);
                    continue;
                }
                None => break,
            }
        };
        let batch = BatchDesc { items };
        let step_ns = backend.step_time(&batch)?;
        if step_ns == 0 {
            return Err(LatencyError::Backend("backend priced a step at 0 ns".to_owned()).into());
        }
        let start = now;
        now += step_ns;
        steps += 1;
        let (waiting, running) = (scheduler.num_waiting(), scheduler.num_running());
        scheduler.complete_step(now, &setup.model_name, 0, |rec| {
            finished += 1;
            observer.request_finished(rec)
        })?;
        observer.step_finished(
            &StepEvent {
                start_ns: start,
                end_ns: now,
                batch: BatchDesc {
                    items: scheduler.last_batch(),
                },
                waiting,
                running,
            },
            backend,
        )?;
    }
    Ok(RunOutcome {
        total_clocks_ns: now,
        steps,
        finished,
        stats: scheduler.stats(),
    })
}
