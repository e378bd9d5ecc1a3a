//! Flags of the main job for sessions and replay modes.

use crate::config::{Bound, Problem};
use crate::setup::ReplayMode;
use clap::Args;
use std::path::PathBuf;

/// Session output and replay-mode flags (flattened into the main job's flags).
#[derive(Debug, Args)]
#[command(next_help_heading = "Workload replay")]
pub struct ReplayArgs {
    /// Per-session CSV to write (workloads with sessions), replaced atomically.
    #[arg(long, value_name = "PATH")]
    pub sessions_output: Option<PathBuf>,

    /// Trace mode: divide the gaps between the arrivals known before the run (flat requests,
    /// session starts) and the first one by F (2 = twice as fast); tool and think times are
    /// kept.
    #[arg(long, value_name = "F", value_parser = parse_speedup, conflicts_with = "max_in_flight")]
    pub arrival_speedup: Option<f64>,

    /// Concurrency mode: keep at most N requests in the cluster, ignoring the spacing of
    /// the arrivals known before the run (each enters when there is room); later session
    /// steps still wait for their tool and think times.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_in_flight: Option<u64>,
}

impl ReplayArgs {
    /// The replay mode the flags select.
    pub fn mode(&self) -> ReplayMode {
        match (self.arrival_speedup, self.max_in_flight) {
            (_, Some(n)) => ReplayMode::Concurrency(usize::try_from(n).unwrap_or(usize::MAX)),
            (Some(f), None) => ReplayMode::Speedup(f),
            (None, None) => ReplayMode::Trace,
        }
    }
}

/// Slowest and fastest replay `--arrival-speedup` accepts.
const SPEEDUP_RANGE: std::ops::RangeInclusive<f64> = 1e-3..=1e6;

fn parse_speedup(s: &str) -> Result<f64, Problem> {
    Bound::closed(*SPEEDUP_RANGE.start(), *SPEEDUP_RANGE.end(), "").parse(s)
}
