//! Per-request records, the per-request CSV, the vLLM-style run summary, and validation
//! against a real vLLM run.

pub mod anomalies;
pub mod count_log;
pub mod csv_out;
pub mod fitness;
mod fold_behind;
pub mod itl;
pub mod plots;
mod run_plots;
pub mod run_settings;
mod scale_plots;
pub mod sessions;
pub mod slo;
pub mod sorted_blocks;
pub mod stats;
pub mod summary;
mod timeseries;
pub mod validate;

pub use crate::output::write_atomically;
pub use anomalies::{AnomalyCounts, DEFAULT_THRASH_WINDOW_NS};
pub use count_log::CountLog;
pub use csv_out::{CSV_HEADER, CsvColumns, PD_CSV_COLUMNS, RequestCsv, SESSION_COLUMNS};
pub use fitness::{
    DEFAULT_WEIGHTS, Fitness, FitnessError, FitnessInputs, FitnessTerm, FitnessWeights, METRICS,
    REFERENCE_MS,
};
pub use fold_behind::FoldBehind;
pub use itl::{Itl, StepGaps, StepWindow};
pub use plots::PlotFormat;
pub use plots::{tick_label, whole_label_count, whole_tick_label, write_png};
pub use run_plots::RunPlots;
pub use run_settings::{RunSettings, SettingHint, VllmMeta};
pub use scale_plots::write_autoscale_plots;
pub use sessions::{SESSION_CSV_HEADER, SessionSummary, prepare_sessions_csv};
pub use slo::{SloCollector, SloHeadline, SloReport, SloTargets, jain};
pub use stats::{IntegerCounts, LatencyStats};
pub use summary::{
    InstanceInfo, InstanceSummary, KvOffloadStats, LowerTierStats, PdSummary, PrefixCacheStats,
    RunInfo, Summary, SummaryCollector,
};
pub use timeseries::{MAX_SERIES_ROWS, SeriesTooLong, StepSeries, TimeSeries};
pub use validate::{Samples, Validation, VllmArrival, diff_label, diff_table, real_run_samples};

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
    pub itl_ns: Itl<'a>,
    /// How the request went from a prefill to a decode instance; `None` when one instance
    /// served it start to finish.
    pub pd: Option<PdRecord>,
}

/// The hand-off of a request from the prefill instance that ran its prompt to the decode
/// instance that decoded it (prefill/decode disaggregation). Times are absolute, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PdRecord {
    /// Instance that ran the prompt.
    pub prefill_instance: u32,
    /// Completion of the step that finished the prompt on the prefill instance.
    pub prefill_end_ns: Nanos,
    /// When the KV transfer got the sender's link (after the transfers queued before it).
    pub transfer_start_ns: Nanos,
    /// When the KV cache arrived at the decode instance: the first token's time.
    pub transfer_end_ns: Nanos,
    /// When the decode instance admitted the request.
    pub decode_admitted_ns: Nanos,
    /// KV bytes transferred.
    pub kv_bytes: u64,
}

impl PdRecord {
    /// From the end of the prefill to the arrival of the KV cache (link wait included), ns.
    pub fn kv_transfer_ns(&self) -> Nanos {
        self.transfer_end_ns - self.prefill_end_ns
    }

    /// Time on the wire: latency plus bytes over bandwidth, ns.
    pub fn wire_ns(&self) -> Nanos {
        self.transfer_end_ns - self.transfer_start_ns
    }

    /// Time waiting for the sender's link to finish earlier transfers, ns.
    pub fn link_wait_ns(&self) -> Nanos {
        self.transfer_start_ns - self.prefill_end_ns
    }

    /// Time between the KV cache's arrival and admission on the decode instance, ns.
    pub fn decode_queue_ns(&self) -> Nanos {
        self.decode_admitted_ns - self.transfer_end_ns
    }
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
