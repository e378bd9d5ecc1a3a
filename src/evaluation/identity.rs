//! Who a run is: its policy and its workload, named by content hashes (SHA-256, hex).

use anyhow::Context;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::Path;

use crate::config::run::{SimConfig, WorkloadSource};
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

/// The policy: the bundle file's name and hash (when given), and a hash of every resolved
/// policy setting (bundle and flags: control plane, routing and its signals).
pub fn policy(config: &SimConfig) -> anyhow::Result<Value> {
    let bundle = match &config.evaluation.policy_config {
        Some(path) => {
            json!({"file": file_name(path), "sha256": file_hash(path, "the policy bundle")?})
        }
        None => Value::Null,
    };
    let settings = format!(
        "{:?}|{}|{:?}",
        config.control, config.routing, config.signals
    );
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
    };
    Ok(json!({"source": kind, "name": name, "sha256": hash}))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sha256_of_known_text() {
        // FIPS 180-2 example: SHA-256("abc").
        assert_eq!(
            super::sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
