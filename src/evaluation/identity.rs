//! Who a run is: its policy and its workload, named by content hashes (SHA-256, hex).

use anyhow::Context;
use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::path::Path;

use crate::control::ControlConfig;
use crate::router::{RoutingPolicy, SignalConfig};
use crate::setup::{SimConfig, WorkloadSource};
use crate::workload::spec::scenario;

/// SHA-256 of `bytes`, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn file_hash(path: &Path, what: &str) -> anyhow::Result<String> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("--evaluation-json: reading {what} {}", path.display()))?;
    Ok(sha256_hex(&bytes))
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// The settings that define a policy, whatever their source (bundle or flags): what
/// `settings_sha256` hashes. Output paths, the seed, the workload and the deployment are
/// not in it.
#[derive(Serialize)]
pub struct PolicySettings<'a> {
    /// `--request-routing-policy` with its weights or scorers.
    pub routing: &'a RoutingPolicy,
    /// Each routing signal's refresh mode.
    pub signals: &'a SignalConfig,
    /// Admission, priority, SLO priorities and targets, gateway queue, control-plane
    /// latencies, instance scheduling and preemption, autoscaling.
    pub control: &'a ControlConfig,
}

/// The canonical serialisation of policy settings: compact JSON, every object's keys
/// sorted, policies and modes named in kebab case, durations in ns.
pub fn canonical_settings(settings: &PolicySettings<'_>) -> anyhow::Result<String> {
    let value = serde_json::to_value(settings).context("serialising the policy settings")?;
    Ok(sorted(value).to_string())
}

/// `value` with the keys of every object in sorted order.
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let map: Map<String, Value> =
                entries.into_iter().map(|(k, v)| (k, sorted(v))).collect();
            Value::Object(map)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// The policy: the bundle file's name and hash (when given), and the hash of the canonical
/// serialisation of every resolved policy setting ([`canonical_settings`]).
pub fn policy(config: &SimConfig) -> anyhow::Result<Value> {
    let bundle = match &config.policy_config {
        Some(path) => {
            json!({"file": file_name(path), "sha256": file_hash(path, "the policy bundle")?})
        }
        None => Value::Null,
    };
    let settings = canonical_settings(&PolicySettings {
        routing: &config.routing,
        signals: &config.signals,
        control: &config.control,
    })?;
    Ok(json!({
        "routing_policy": config.routing.to_string(),
        "bundle": bundle,
        "settings_sha256": sha256_hex(settings.as_bytes()),
    }))
}

/// The workload: its source kind, its file or scenario name, and the hash of its file (the
/// scenario's built-in spec).
pub fn workload(source: &WorkloadSource) -> anyhow::Result<Value> {
    let (kind, name, hash) = match source {
        WorkloadSource::Dataset(path, _) => {
            ("dataset", file_name(path), file_hash(path, "the dataset")?)
        }
        WorkloadSource::Spec(path) => (
            "spec",
            file_name(path),
            file_hash(path, "the workload spec")?,
        ),
        WorkloadSource::Scenario(name) => {
            let yaml = scenario(name).map_or("", |s| s.yaml);
            ("scenario", name.clone(), sha256_hex(yaml.as_bytes()))
        }
        WorkloadSource::Synthetic(quick) => {
            let yaml = quick.yaml();
            (
                "synthetic",
                "--rate".to_owned(),
                sha256_hex(yaml.as_bytes()),
            )
        }
    };
    Ok(json!({"source": kind, "name": name, "sha256": hash}))
}
