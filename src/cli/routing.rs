//! Flags of routing's scorers and of what the router sees and how stale.

use crate::config::ConfigError;
use crate::router::{RoutingPolicy, ScorerSet, SignalConfig, parse_duration_ns};
use clap::Args;

/// Routing scorers and signal staleness (flattened into the main job's flags).
#[derive(Debug, Args)]
#[command(next_help_heading = "Cluster")]
pub struct RoutingArgs {
    /// Scorers of --request-routing-policy weighted and their weights, BLIS's way:
    /// NAME:W,... with names prefix-affinity, precise-prefix-cache, queue-depth,
    /// kv-utilization, load-balance, running-requests, active-requests, vllm-dp,
    /// load-aware, no-hit-lru (weights normalised to sum to 1), e.g. prefix-affinity:2,queue-depth:1,kv-utilization:1.
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

impl RoutingArgs {
    /// The routing policy (`policy`, from `--request-routing-policy` and
    /// `--routing-weights`, given or not as `weights_given`, with the scorers) and what the
    /// router sees.
    pub fn resolve(
        self,
        policy: RoutingPolicy,
        weights_given: bool,
    ) -> Result<(RoutingPolicy, SignalConfig), ConfigError> {
        let invalid = |field: &str, message: String| ConfigError::Invalid {
            source_name: "command line".into(),
            field: field.into(),
            message,
        };
        let policy = match (policy, self.routing_scorers) {
            (RoutingPolicy::Weighted(_), Some(set)) => {
                if weights_given {
                    let message = "give either --routing-weights or --routing-scorers".into();
                    return Err(invalid("--routing-scorers", message));
                }
                RoutingPolicy::Scorers(set)
            }
            (_, Some(_)) => {
                let message = "applies only to --request-routing-policy weighted".into();
                return Err(invalid("--routing-scorers", message));
            }
            (policy, None) => policy,
        };
        let mut signals = SignalConfig::default()
            .with_snapshot_refresh(self.snapshot_refresh_interval.unwrap_or(0))
            .with_cache_signal_delay(self.cache_signal_delay.unwrap_or(0));
        if let Some(spec) = &self.signal_refresh {
            signals = signals
                .with_overrides(spec)
                .map_err(|e| invalid("--signal-refresh", e))?;
        }
        Ok((policy, signals))
    }
}

fn parse_scorers(s: &str) -> Result<ScorerSet, String> {
    s.parse()
}
