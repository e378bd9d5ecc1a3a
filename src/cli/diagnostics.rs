//! Flags of the policy-research diagnostics: decision traces and the anomaly counters'
//! thrash window.

use crate::choice::Choice;
use crate::config::ConfigError;
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

impl DiagnosticArgs {
    /// The diagnostics of the run; the trace flags need a trace level.
    pub fn resolve(self) -> Result<Diagnostics, ConfigError> {
        let traced = self.trace_level != TraceLevel::None;
        let needs_level = |flag: &str| ConfigError::Invalid {
            source_name: "command line".into(),
            field: flag.into(),
            message: "needs --trace-level decisions or detailed".into(),
        };
        if !traced && self.trace_output.is_some() {
            return Err(needs_level("--trace-output"));
        }
        if !traced && self.summarize_trace {
            return Err(needs_level("--summarize-trace"));
        }
        if traced && self.trace_output.is_none() && !self.summarize_trace {
            return Err(ConfigError::Invalid {
                source_name: "command line".into(),
                field: "--trace-level".into(),
                message: "traces nothing without --trace-output or --summarize-trace".into(),
            });
        }
        Ok(Diagnostics {
            trace_level: self.trace_level,
            trace_output: self.trace_output,
            counterfactual_k: self.counterfactual_k,
            summarize_trace: self.summarize_trace,
            thrash_window_ns: self.thrash_window,
        })
    }
}
