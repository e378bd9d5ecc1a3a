//! Flags of routing's scorers and of what the router sees and how stale.

use crate::router::{RoutingSpecError, ScorerSet, parse_duration_ns};
use clap::Args;

/// Routing scorers and signal staleness (flattened into the main job's flags).
#[derive(Debug, Args)]
#[command(next_help_heading = "Cluster")]
pub struct RoutingArgs {
    /// Scorers of --request-routing-policy weighted and their weights, BLIS's way:
    /// NAME:W,... with names prefix-affinity, precise-prefix-cache, queue-depth,
    /// kv-utilization, load-balance, running-requests, active-requests, vllm-dp,
    /// load-aware, no-hit-lru, recent-ttft, recent-tpot, estimated-wait, cache-hit-rate,
    /// cpu-kv-utilization, transfer-queue, pending-offloads, pending-reloads (weights normalised to sum to 1), e.g. prefix-affinity:2,queue-depth:1,kv-utilization:1.
    /// Instead of --routing-weights.
    #[arg(long, value_name = "NAME:W,...", value_parser = parse_scorers)]
    pub routing_scorers: Option<ScorerSet>,

    /// How stale the router's load signals are (BLIS): queue depth, running requests, KV use
    /// and hit rate are re-read at a routing decision once this old (a duration: 50ms, or a
    /// bare number in microseconds); 0 = live [default: 0].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub snapshot_refresh_interval: Option<u64>,

    /// How stale the router's view of the instances' prefix caches is (BLIS): re-read at a
    /// routing decision once this old (50ms, or bare microseconds); 0 = live [default: 0].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub cache_signal_delay: Option<u64>,

    /// Refresh mode per router signal, over the two flags above: SIGNAL=MODE,... with signals
    /// queue, running, kv, hit-rate, ttft, tpot, wait, prefix and modes immediate,
    /// periodic:DURATION, on-demand [default: load signals immediate, hit-rate
    /// periodic:10ms, ttft, tpot and wait periodic:100ms].
    #[arg(long, value_name = "SIGNAL=MODE,...")]
    pub signal_refresh: Option<String>,
}

fn parse_scorers(s: &str) -> Result<ScorerSet, RoutingSpecError> {
    s.parse()
}
