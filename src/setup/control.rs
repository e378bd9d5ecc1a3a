//! The control plane and routing of a run: the policy bundle (`--policy-config`) read, the
//! settings given over it (the flags) laid on top, defaults under both; the routing policy
//! with its weights or scorers, and what the router sees of the instances.

use crate::config::{COMMAND_LINE, ConfigError, Problem};
use crate::control::ControlConfig;
use crate::control::bundle::{Bundle, BundleError, Settings, read_bundle};
use crate::control::section::{KeyError, Layer};
use crate::router::{RoutingPolicy, RoutingWeights, ScorerSet, SignalConfig};
use serde_yaml_ng::Value;
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

/// Reads the bundle, lays the given settings over it and resolves routing: the routing
/// flags (policy, weights, scorers) are one more layer over the bundle's `routing`; the
/// default policy (`LOAD`) yields to the bundle's.
pub(super) fn resolve(
    control: &ControlOptions,
    routing: &RoutingOptions,
) -> Result<Resolved, ConfigError> {
    if routing.weights.is_some() && routing.scorers.is_some() {
        return Err(ConfigError::flag(
            "--routing-scorers",
            Problem::disagrees(
                "given",
                "so is --routing-weights: give either --routing-weights or --routing-scorers",
            ),
        ));
    }
    let (bundle, source_name) = match &control.policy_config {
        Some(path) => {
            let bundle = read_bundle(path).map_err(bundle_error)?;
            (Some(bundle), path.display().to_string())
        }
        None => (None, COMMAND_LINE.to_owned()),
    };
    let file = bundle
        .as_ref()
        .map(|b| b.settings.clone())
        .unwrap_or_default();
    let mut flags = control.settings.clone();
    flags.routing = routing_layer(routing);
    let settings = flags.over(file);
    // An error the bundle's own settings give alike is the bundle's: placed on its line.
    let invalid = |e: KeyError, alone: &dyn Fn(Settings) -> Option<KeyError>| {
        let e = match &bundle {
            Some(b) if e.line.is_none() && alone(b.settings.clone()).as_ref() == Some(&e) => {
                placed(b, e)
            }
            _ => e,
        };
        key_error(&source_name, e)
    };
    let routing_policy = (settings.routing.resolve("routing"))
        .map_err(|e| invalid(e, &|file| file.routing.resolve("routing").err()))?;
    if !matches!(routing_policy, RoutingPolicy::Weighted(_)) {
        for (flag, given) in [
            ("--routing-weights", routing.weights.is_some()),
            ("--routing-scorers", routing.scorers.is_some()),
        ] {
            if given {
                return Err(ConfigError::flag(
                    flag,
                    Problem::only_with("--request-routing-policy weighted"),
                ));
            }
        }
    }
    let config = settings
        .build()
        .map_err(|e| invalid(e, &|file| file.build().err()))?;
    Ok(Resolved {
        control: config,
        routing: routing_policy,
        signals: signals(routing)?,
    })
}

/// A bundle that cannot be used, as the error naming its file (once), the line and the key.
fn bundle_error(e: BundleError) -> ConfigError {
    match e {
        BundleError::Io { path, source } => ConfigError::FlagFile {
            what: "policy config",
            flag: "--policy-config",
            path,
            source,
        },
        BundleError::Invalid { path, error } => key_error(&path.display().to_string(), error),
    }
}

/// `e`, on the line of its key in `bundle` when the key is written there.
fn placed(bundle: &Bundle, e: KeyError) -> KeyError {
    let line = bundle.line_of(&e.key);
    KeyError { line, ..e }
}

/// `e`, a key of `source_name` (the bundle, or the command line for the flags' settings).
fn key_error(source_name: &str, e: KeyError) -> ConfigError {
    ConfigError::Invalid {
        source_name: source_name.to_owned(),
        line: e.line,
        field: e.key,
        problem: e.problem,
    }
}

/// The routing the flags give: the policy, unless the default, and its weights or scorers.
fn routing_layer(routing: &RoutingOptions) -> Layer<RoutingPolicy> {
    let named = (routing.policy != RoutingPolicy::default()).then(|| routing.policy.clone());
    let mut layer = Layer::named(named);
    let value = |v: Result<Value, _>| v.expect("weights and scorers serialise");
    if let Some(w) = &routing.weights {
        layer.set("weights", value(serde_yaml_ng::to_value(w)));
    }
    if let Some(set) = &routing.scorers {
        layer.set("scorers", value(serde_yaml_ng::to_value(set)));
    }
    layer
}

/// What the router sees, and how stale.
fn signals(routing: &RoutingOptions) -> Result<SignalConfig, ConfigError> {
    let mut signals = SignalConfig::default()
        .with_snapshot_refresh(routing.snapshot_refresh_ns)
        .with_cache_signal_delay(routing.cache_signal_delay_ns);
    if let Some(spec) = &routing.signal_refresh {
        signals = signals
            .with_overrides(spec)
            .map_err(|e| ConfigError::flag("--signal-refresh", Problem::Routing(e)))?;
    }
    Ok(signals)
}
