//! The one place the sweep meets the main command: what its flags are and the run options a
//! point's flags give ([`Flags`], provided by the command line, so that the sweep knows no
//! command-line parser), and how a point's options become a run ([`run_point`]), exactly as
//! `blis-cosim FLAGS...` would run them, in this process, by the runner it is given.

use crate::metrics::Summary;
use crate::setup::{RunOptions, SimConfig};
use anyhow::{Context, bail};
use serde_json::Value;
use std::path::Path;

/// What the sweep knows of the main command: its flags and their defaults, and the run
/// options a list of its flags gives. The command line provides it (`cli::MainFlags`).
pub trait Flags: Sync {
    /// The flag `name` (a long name or an alias), if the main command has it.
    fn flag(&self, name: &str) -> Option<FlagInfo>;
    /// The default value of the flag `long`, as text (empty when it has none).
    fn default_value(&self, long: &str) -> String;
    /// The options of a run with the flags `args` (no program name), as `blis-cosim ARGS...`
    /// would take them.
    fn options(&self, args: &[String]) -> anyhow::Result<RunOptions>;
}

/// What runs a resolved configuration and gives its summary (the main job's runner).
pub type Runner = dyn Fn(&SimConfig) -> anyhow::Result<Summary> + Sync;

/// What a sweep needs to know about one flag of the main command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagInfo {
    /// Its long name, without `--` (the canonical one, not an alias).
    pub long: String,
    /// An on/off flag (`--x`), whose `false` is `--no-x` when that exists, else absent.
    pub is_bool: bool,
    /// Whether `--no-<long>` exists.
    pub has_no: bool,
    /// Whether its value is a path (`PATH`, `DIR`) or a name or path (`NAME|PATH`).
    pub path: PathKind,
}

/// Whether a flag's value is a path, resolved against the spec's folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    /// Not a path.
    No,
    /// Always a path.
    Path,
    /// A built-in name, or a path when a file of that name exists.
    NameOrPath,
}

impl FlagInfo {
    /// Checks that `value` suits the flag: a boolean for an on/off flag, else a string or a
    /// number. Returns the value with a path resolved against `dir`.
    pub fn check_value(&self, value: &Value, dir: &Path) -> anyhow::Result<Value> {
        match value {
            Value::Bool(_) if self.is_bool => Ok(value.clone()),
            _ if self.is_bool => {
                bail!("--{} is on/off: give true or false, not {value}", self.long)
            }
            Value::String(_) | Value::Number(_) => Ok(Value::String(self.resolve(value, dir))),
            _ => bail!("--{}: give a string or a number, not {value}", self.long),
        }
    }

    /// The flag's arguments for `value` (already checked): `--x`, `--no-x`, nothing, or
    /// `--x VALUE` with a path resolved against `dir`.
    pub fn args(&self, value: &Value, dir: &Path) -> Vec<String> {
        match value {
            Value::Bool(true) => vec![format!("--{}", self.long)],
            Value::Bool(false) if self.has_no => vec![format!("--no-{}", self.long)],
            Value::Bool(false) => Vec::new(),
            _ => vec![format!("--{}", self.long), self.resolve(value, dir)],
        }
    }

    fn resolve(&self, value: &Value, dir: &Path) -> String {
        let text = scalar_text(value);
        let joined = dir.join(&text);
        match self.path {
            PathKind::Path => joined.to_string_lossy().into_owned(),
            PathKind::NameOrPath if joined.exists() => joined.to_string_lossy().into_owned(),
            _ => text,
        }
    }
}

/// A scalar's text: a string as is, a number or a boolean as JSON writes it.
pub fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What one point's run gives.
#[derive(Debug)]
pub struct PointRun {
    /// The run summary.
    pub summary: Summary,
    /// GPUs the deployment uses: the sum over instances of TP × PP.
    pub gpus: u64,
}

/// Runs a point's `options` as the main command would (check the paths, resolve the
/// config, run it with `runner`), in this process.
pub fn run_point(options: RunOptions, runner: &Runner) -> anyhow::Result<PointRun> {
    options.check_paths()?;
    let config = crate::setup::resolve(options).context("resolving the run's config")?;
    let summary = runner(&config)?;
    Ok(PointRun {
        summary,
        gpus: config.gpus(),
    })
}

/// Checks a configuration's cluster config, workload spec and policy bundle as the main
/// command would read them, so that a bad value fails the sweep before any run.
pub fn check_documents(
    cluster: Option<&Value>,
    workload: Option<&Value>,
    policy: Option<&Value>,
) -> anyhow::Result<()> {
    if let Some(c) = cluster {
        crate::config::ClusterConfig::parse(&c.to_string(), "cluster config")?;
    }
    if let Some(w) = workload {
        let text = serde_yaml_ng::to_string(w)?;
        crate::workload::spec::WorkloadSpec::from_yaml(&text, "workload spec")?;
    }
    if let Some(p) = policy {
        let text = serde_yaml_ng::to_string(p)?;
        crate::control::bundle::parse_bundle(&text)
            .map_err(|e| anyhow::anyhow!("policy bundle: {e}"))?;
    }
    Ok(())
}
