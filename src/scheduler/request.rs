//! A request's state inside one instance's scheduler.

use super::SchedulerConfig;
use super::kv::{BlockId, request_block_hashes_after};
use crate::Nanos;
use crate::metrics::PdRecord;
use crate::workload::Request;

/// Where a request is in its life on an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The prompt is not fully computed yet; no token produced.
    Prefill,
    /// The first token is out; one token per step until the target length.
    Decode,
    /// Prefill done on a prefill instance: out of the running set, its KV blocks held until
    /// the transfer to a decode instance completes.
    HandedOff,
    /// The last token is out; the slot is about to be released.
    Finished,
    /// Ended before completing (its timeout ran out); the slot is released once no step in
    /// flight includes it.
    Cancelled,
}

/// Where a decode instance's request stands with the prompt KV it pulls from a prefill
/// instance (vLLM's P/D flow, [`super::Scheduler::receive_remote`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvPull {
    /// Nothing to pull: its KV is computed (or received) here.
    Local,
    /// Waiting for a step to start its pull (vLLM: `WAITING` with the remote's parameters).
    Pending,
    /// Its KV is on the wire (vLLM: `WAITING_FOR_REMOTE_KVS`); the pull's start order on
    /// this instance.
    Pulling(u64),
    /// Its KV landed (the pull's start order); it waits for the step that computes its last
    /// prompt token, ahead of the requests queued after it (vLLM keeps a request waiting for
    /// remote KV at its place in the FCFS queue).
    Landed(u64),
}

/// Completed steps of an instance, evenly spaced, in each of which a request produced a
/// token: the `start`-th, then every `stride`-th after it, `len` in all. Decoding one token
/// per step makes one run of stride 1; under pipeline parallelism a request skips the steps
/// formed while its token is in flight, stride `pp` in steady state.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokenRun {
    pub start: u64,
    pub stride: u32,
    pub len: u32,
}

/// Scheduler-side state of one request.
#[derive(Debug)]
pub struct RunningRequest {
    pub id: u64,
    pub arrival_ns: Nanos,
    pub input_toks: u32,
    /// Priority given by the control plane (higher is more urgent; 0 without one).
    pub priority: i32,
    /// Its nominal urgency for anomaly detection: its own priority, else its SLO class's
    /// (whatever the run's priority policy made of it).
    pub nominal: i32,
    /// Its place in the order requests were queued on this instance (anomaly detection).
    pub seq: u64,
    /// Sequence length at completion: prompt plus output tokens.
    pub target: u32,
    /// Tokens of the sequence so far (prompt plus produced tokens).
    pub reached: u32,
    /// Tokens whose KV is computed (advanced at schedule time; reset by preemption).
    pub computed: u32,
    pub phase: Phase,
    /// KV blocks held, in sequence order.
    pub blocks: Vec<BlockId>,
    /// How many leading blocks are indexed in the prefix cache.
    pub cached_blocks: usize,
    /// Chained hashes of the full blocks of prompt + output token ids.
    pub hashes: Vec<u64>,
    pub was_preempted: bool,
    /// Times preempted: a step formed before the last preemption no longer counts for it.
    pub preemptions: u32,
    /// Whether this request's prefix lookup was counted in the stats.
    pub prefix_recorded: bool,
    pub queuing_delay_ns: Nanos,
    /// The first step number it may join (async scheduling; 0: any).
    pub eligible_step: u64,
    pub first_token_ns: Nanos,
    /// A token this request produced before it came here (a received prompt's first token),
    /// which its first token here counts its inter-token latency from.
    pub itl_from_ns: Option<Nanos>,
    /// The steps it produced a token in (indices into the scheduler's step finish times), as
    /// runs: the current one, and those before it (rarely any: a run breaks only when the
    /// request's spacing changes: a preemption, a step that left it out).
    pub token_run: TokenRun,
    pub earlier_runs: Vec<TokenRun>,
    /// Set on a decode instance: where the prompt ran and how its KV cache came here (boxed:
    /// most runs have none, see the size check below).
    pub pd: Option<Box<PdRecord>>,
    /// The prompt KV it pulls from a prefill instance, if any.
    pub pull: KvPull,
}

impl RunningRequest {
    pub fn new(request: &Request, config: &SchedulerConfig) -> RunningRequest {
        RunningRequest::with_hashes(request, config, &[])
    }

    /// [`RunningRequest::new`] given `known`, the chained hashes of the request's leading
    /// full blocks at the configured block size that the router computed already (empty:
    /// none), which are copied rather than computed again.
    pub fn with_hashes(
        request: &Request,
        config: &SchedulerConfig,
        known: &[u64],
    ) -> RunningRequest {
        let mut hashes = Vec::new();
        if config.enable_prefix_caching && request.has_token_ids() {
            let (bs, mut bytes) = (config.block_size, Vec::new());
            request_block_hashes_after(request, bs, usize::MAX, known, &mut hashes, &mut bytes);
        }
        RunningRequest {
            id: request.id,
            arrival_ns: request.arrival_ns,
            input_toks: request.input_toks,
            priority: 0,
            nominal: 0,
            seq: 0,
            target: request.input_toks + request.output_toks,
            reached: request.input_toks,
            computed: 0,
            phase: Phase::Prefill,
            blocks: Vec::new(),
            cached_blocks: 0,
            hashes,
            was_preempted: false,
            preemptions: 0,
            prefix_recorded: false,
            queuing_delay_ns: 0,
            eligible_step: 0,
            first_token_ns: 0,
            itl_from_ns: None,
            token_run: TokenRun::default(),
            earlier_runs: Vec::new(),
            pd: None,
            pull: KvPull::Local,
        }
    }

    /// Notes a token produced by the instance's `step`-th completed step.
    pub fn note_token(&mut self, step: u64) {
        let run = &mut self.token_run;
        let next = run.start + u64::from(run.stride) * u64::from(run.len);
        match run.len {
            1 if let Ok(stride) = u32::try_from(step - run.start) => {
                run.stride = stride;
                run.len = 2;
            }
            2.. if step == next && run.len < u32::MAX => run.len += 1,
            _ => {
                if run.len > 0 {
                    self.earlier_runs.push(*run);
                }
                *run = TokenRun {
                    start: step,
                    stride: 1,
                    len: 1,
                };
            }
        }
    }

    /// Notes tokens produced by `count` consecutive completed steps from the `first`-th on:
    /// the same as noting each, with a consecutive run extended in one go.
    pub fn note_tokens(&mut self, first: u64, count: u32) {
        let mut k = 0;
        while k < count {
            let run = &mut self.token_run;
            let next = run.start + u64::from(run.len);
            if run.len >= 2 && run.stride == 1 && next == first + u64::from(k) {
                let add = (count - k).min(u32::MAX - run.len);
                if add > 0 {
                    run.len += add;
                    k += add;
                    continue;
                }
            }
            self.note_token(first + u64::from(k));
            k += 1;
        }
    }

    /// The earliest step its token runs name, if it produced a token on this instance.
    pub fn first_token_step(&self) -> Option<u64> {
        let current = (self.token_run.len > 0).then_some(self.token_run.start);
        self.earlier_runs.first().map(|run| run.start).or(current)
    }
}

// A slot is read at admission, first token and finish, cold on a wide cluster: what most
// runs never read (the P/D record, 56 bytes) is boxed, so that a slot takes 216 bytes, not 264.
const _: () = assert!(size_of::<Option<RunningRequest>>() <= 216);
