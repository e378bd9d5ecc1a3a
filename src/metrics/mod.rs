//! Per-request records, the per-request CSV, the vLLM-style run summary, and validation
//! against a real vLLM run.

mod csv_out;
mod plots;
mod sessions;
mod stats;
mod summary;
mod validate;

pub use csv_out::{CSV_HEADER, RequestCsv, SESSION_COLUMNS, write_atomically};
pub use plots::PlotFormat;
pub use sessions::{SESSION_CSV_HEADER, SessionSummary, write_sessions_csv};
pub use stats::LatencyStats;
pub use summary::{
    InstanceInfo, InstanceSummary, PrefixCacheStats, RunInfo, Summary, SummaryCollector,
};
pub use validate::Validation;

use crate::Nanos;

/// One finished request, as written to the CSV. Borrowed from the scheduler's state at
/// completion so that recording allocates nothing.
#[derive(Debug, Clone, Copy)]
pub struct RequestRecord<'a> {
    /// Instance that produced the last token.
    pub instance_id: u32,
    /// Request id (file order of the workload).
    pub request_id: u64,
    /// Model name served by the instance.
    pub model: &'a str,
    /// Prompt tokens.
    pub input_toks: u32,
    /// Generated tokens.
    pub output_toks: u32,
    /// Arrival time, ns.
    pub arrival_ns: Nanos,
    /// Completion time of the step that produced the first token, ns.
    pub first_token_ns: Nanos,
    /// Completion time of the step that produced the last token, ns.
    pub end_ns: Nanos,
    /// Schedule time of the last prefill chunk minus arrival, ns (LLMServingSim's
    /// `queuing_delay`).
    pub queuing_delay_ns: Nanos,
    /// Gaps between consecutive tokens, ns; `output_toks − 1` entries.
    pub itl_ns: &'a [Nanos],
}

impl RequestRecord<'_> {
    /// End-to-end latency, ns.
    pub fn latency_ns(&self) -> Nanos {
        self.end_ns - self.arrival_ns
    }

    /// Time to first token, ns.
    pub fn ttft_ns(&self) -> Nanos {
        self.first_token_ns - self.arrival_ns
    }

    /// Time per output token after the first, ns, floored (LLMServingSim's integer TPOT);
    /// 0 when only one token was generated.
    pub fn tpot_ns(&self) -> Nanos {
        if self.output_toks <= 1 {
            0
        } else {
            (self.end_ns - self.first_token_ns) / u64::from(self.output_toks - 1)
        }
    }
}
