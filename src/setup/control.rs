//! The control plane and routing of a run: the policy bundle (`--policy-config`) read, the
//! settings given over it (the flags) laid on top, defaults under both; the routing policy
//! with its weights or scorers, and what the router sees of the instances.

use crate::config::ConfigError;
use crate::control::ControlConfig;
use crate::control::bundle::{Settings, read_bundle};
use crate::router::{RoutingPolicy, RoutingWeights, ScorerSet, SignalConfig};
use std::path::PathBuf;

/// The control plane as a run asks for it: a policy bundle and the settings given over it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ControlOptions {
    /// The policy bundle file (`--policy-config`), BLIS's format.
    pub policy_config: Option<PathBuf>,
    /// Settings given over the bundle (the flags); a setting given neither here nor in the
    /// bundle takes its default.
    pub settings: Settings,
}

/// Routing as a run asks for it (see the flags' help).
#[derive(Debug, Clone, PartialEq)]
pub struct RoutingOptions {
    /// The routing policy given (`--request-routing-policy`); the default, `LOAD`, yields to
    /// a policy the bundle names.
    pub policy: RoutingPolicy,
    /// Weights of the `weighted` policy (`--routing-weights`).
    pub weights: Option<RoutingWeights>,
    /// Scorers of the `weighted` policy, BLIS's way (`--routing-scorers`).
    pub scorers: Option<ScorerSet>,
    /// How stale the router's load signals are, ns (0: live).
    pub snapshot_refresh_ns: u64,
    /// How stale the router's view of the prefix caches is, ns (0: live).
    pub cache_signal_delay_ns: u64,
    /// Refresh modes per signal (`--signal-refresh`), over the two above.
    pub signal_refresh: Option<String>,
}

impl Default for RoutingOptions {
    /// LLMServingSim's `LOAD`, live signals.
    fn default() -> Self {
        RoutingOptions {
            policy: RoutingPolicy::Load,
            weights: None,
            scorers: None,
            snapshot_refresh_ns: 0,
            cache_signal_delay_ns: 0,
            signal_refresh: None,
        }
    }
}

/// A run's control plane, routing policy and router signals, resolved.
pub(super) struct Resolved {
    pub control: ControlConfig,
    pub routing: RoutingPolicy,
    pub signals: SignalConfig,
}

/// Reads the bundle, lays the given settings over it and resolves routing: weights go with
/// the given `weighted` policy; the default policy yields to the bundle's; scorers go with
/// `weighted` (given or from the bundle).
pub(super) fn resolve(
    control: &ControlOptions,
    routing: &RoutingOptions,
) -> Result<Resolved, ConfigError> {
    let policy = match (&routing.policy, routing.weights) {
        (RoutingPolicy::Weighted(_), Some(w)) => RoutingPolicy::Weighted(w),
        (_, Some(_)) => {
            return Err(command_line(
                "--routing-weights",
                "applies only to --request-routing-policy weighted".into(),
            ));
        }
        (policy, None) => policy.clone(),
    };
    let (file, source_name) = match &control.policy_config {
        Some(path) => {
            let settings = read_bundle(path).map_err(|message| ConfigError::Invalid {
                source_name: path.display().to_string(),
                field: "--policy-config".into(),
                message,
            })?;
            (settings, path.display().to_string())
        }
        None => (Settings::default(), "command line".to_owned()),
    };
    let policy = match (&policy, &file.routing) {
        (RoutingPolicy::Load, Some(from_file)) => from_file.clone(),
        _ => policy,
    };
    let config = control
        .settings
        .clone()
        .over(file)
        .build()
        .map_err(|(field, message)| ConfigError::Invalid {
            source_name,
            field,
            message,
        })?;
    let (routing_policy, signals) = routing_and_signals(policy, routing)?;
    Ok(Resolved {
        control: config,
        routing: routing_policy,
        signals,
    })
}

/// The routing policy `policy` with the scorers given, and what the router sees.
fn routing_and_signals(
    policy: RoutingPolicy,
    routing: &RoutingOptions,
) -> Result<(RoutingPolicy, SignalConfig), ConfigError> {
    let policy = match (policy, &routing.scorers) {
        (RoutingPolicy::Weighted(_), Some(set)) => {
            if routing.weights.is_some() {
                return Err(command_line(
                    "--routing-scorers",
                    "give either --routing-weights or --routing-scorers".into(),
                ));
            }
            RoutingPolicy::Scorers(set.clone())
        }
        (_, Some(_)) => {
            return Err(command_line(
                "--routing-scorers",
                "applies only to --request-routing-policy weighted".into(),
            ));
        }
        (policy, None) => policy,
    };
    let mut signals = SignalConfig::default()
        .with_snapshot_refresh(routing.snapshot_refresh_ns)
        .with_cache_signal_delay(routing.cache_signal_delay_ns);
    if let Some(spec) = &routing.signal_refresh {
        signals = signals
            .with_overrides(spec)
            .map_err(|e| command_line("--signal-refresh", e))?;
    }
    Ok((policy, signals))
}

/// An error of the command line's `flag`.
fn command_line(flag: &str, message: String) -> ConfigError {
    ConfigError::Invalid {
        source_name: "command line".into(),
        field: flag.into(),
        message,
    }
}
