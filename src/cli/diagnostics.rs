//! Flags of the policy-research diagnostics: decision traces and the anomaly counters'
//! thrash window.

use crate::choice::Choice;
use crate::router::parse_duration_ns;
use crate::trace::{Diagnostics, TraceLevel};
use clap::Args;
use std::path::PathBuf;

/// Decision traces and anomaly detection (flattened into the main job's flags).
#[derive(Debug, Args)]
#[command(next_help_heading = "Diagnostics")]
pub struct DiagnosticArgs {
    /// Decision trace: none (no cost), decisions (admission, priority, routing with its best
    /// candidates, P/D hand-offs and KV transfers, scheduler admissions and preemptions) or
    /// detailed (also every routing candidate and every step).
    #[arg(long, value_name = "LEVEL", value_parser = super::choices::<TraceLevel>(),
          default_value = Diagnostics::default().trace_level.name())]
    pub trace_level: TraceLevel,

    /// Write the decision trace here as JSON lines, streamed and put in place atomically
    /// when the run succeeds.
    #[arg(long, value_name = "PATH")]
    pub trace_output: Option<PathBuf>,

    /// Routing candidates each routing record lists (the best by score, and the chosen
    /// one).
    #[arg(long, value_name = "K", default_value_t = Diagnostics::default().counterfactual_k)]
    pub counterfactual_k: usize,

    /// Summarise the decision trace in the console and the summary JSON: records by kind,
    /// requests per instance, mean and max routing regret, the 10 worst routing decisions.
    #[arg(long)]
    pub summarize_trace: bool,

    /// KV thrashing window of the anomaly counters: a prompt block needed within this long
    /// of its eviction from the prefix cache counts (a duration: 1s, 50ms, or bare
    /// microseconds).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration_ns)]
    pub thrash_window: u64,
}

impl From<DiagnosticArgs> for Diagnostics {
    fn from(a: DiagnosticArgs) -> Diagnostics {
        Diagnostics {
            trace_level: a.trace_level,
            trace_output: a.trace_output,
            counterfactual_k: a.counterfactual_k,
            summarize_trace: a.summarize_trace,
            thrash_window_ns: a.thrash_window,
        }
    }
}
