//! A request's state inside one instance's scheduler.

use super::SchedulerConfig;
use super::kv::{BlockId, block_hashes};
use crate::Nanos;
use crate::metrics::{PdRecord, RequestRecord};
use crate::workload::Request;

/// Where a request is in its life on an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// The prompt is not fully computed yet; no token produced.
    Prefill,
    /// The first token is out; one token per step until the target length.
    Decode,
    /// Prefill done on a prefill instance: out of the running set, its KV blocks held until
    /// the transfer to a decode instance completes.
    HandedOff,
    /// The last token is out; the slot is about to be released.
    Finished,
}

/// Scheduler-side state of one request.
#[derive(Debug)]
pub(super) struct RunningRequest {
    pub id: u64,
    pub arrival_ns: Nanos,
    pub input_toks: u32,
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
    pub last_token_ns: Nanos,
    pub itl_ns: Vec<Nanos>,
    /// Set on a decode instance: where the prompt ran and how its KV cache came here.
    pub pd: Option<PdRecord>,
}

impl RunningRequest {
    pub fn new(request: &Request, config: &SchedulerConfig) -> RunningRequest {
        let mut hashes = Vec::new();
        if config.enable_prefix_caching && !request.token_ids.is_empty() {
            block_hashes(&request.token_ids, config.block_size, &mut hashes);
        }
        RunningRequest {
            id: request.id,
            arrival_ns: request.arrival_ns,
            input_toks: request.input_toks,
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
            last_token_ns: 0,
            itl_ns: Vec::with_capacity(request.output_toks as usize - 1),
            pd: None,
        }
    }

    /// The CSV record of this request, finished at `end`.
    pub fn record<'a>(&'a self, end: Nanos, model: &'a str, instance_id: u32) -> RequestRecord<'a> {
        RequestRecord {
            instance_id,
            request_id: self.id,
            model,
            input_toks: self.input_toks,
            output_toks: self.target - self.input_toks,
            arrival_ns: self.arrival_ns,
            first_token_ns: self.first_token_ns,
            end_ns: end,
            queuing_delay_ns: self.queuing_delay_ns,
            itl_ns: &self.itl_ns,
            pd: self.pd,
        }
    }
}
