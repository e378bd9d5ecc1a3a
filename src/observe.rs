//! What the engine reports to its observers about steps and KV transfers, defined below the
//! engine so that the observers (metrics, traces, the runner's outputs) need not import it.
//! The engine re-exports both ([`crate::engine::StepEvent`], [`crate::engine::TransferEvent`]).

use crate::Nanos;
use crate::latency::BatchDesc;
use crate::scheduler::StepTokens;

/// One finished step, for observers (logging, progress).
#[derive(Debug, Clone, Copy)]
pub struct StepEvent<'a> {
    /// Instance that ran the step.
    pub instance: u32,
    /// Step start time.
    pub start_ns: Nanos,
    /// Step finish time.
    pub end_ns: Nanos,
    /// The step's batch as it was priced: a DP group member's is padded to its wave's widest
    /// batch and carries the group's gate tokens.
    pub batch: BatchDesc<'a>,
    /// Requests waiting on the instance when the step was formed.
    pub waiting: usize,
    /// Requests running on the instance when the step was formed.
    pub running: usize,
    /// The tokens the step computed.
    pub tokens: StepTokens,
    /// KV blocks held by requests once the step is done, and the instance's total.
    pub kv_blocks_used: usize,
    pub kv_blocks: usize,
}

/// A KV transfer starting or ending, for observers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferEvent {
    /// Request id.
    pub request_id: u64,
    /// Prefill instance sending.
    pub from: u32,
    /// Decode instance receiving.
    pub to: u32,
    /// KV bytes moved.
    pub bytes: u64,
    /// When the request's prefill completed.
    pub prefill_end_ns: Nanos,
    /// When the transfer got the link.
    pub start_ns: Nanos,
    /// When it arrives (or arrived).
    pub end_ns: Nanos,
    /// False when the transfer starts, true when it has arrived.
    pub arrived: bool,
    /// KV blocks the request holds on the sender (freed when it arrives).
    pub request_blocks: usize,
    /// KV blocks in use on the sender after the event.
    pub sender_blocks_used: usize,
}
