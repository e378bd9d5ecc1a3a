//! The one place the sweep meets the main command: what its flags are (from its clap
//! definition) and how a point's flag list becomes a run ([`run_point`]), exactly as
//! `blis-cosim FLAGS...` would run it, in this process.

use crate::cli::Cli;
use crate::metrics::Summary;
use anyhow::{Context, bail};
use clap::{ArgAction, CommandFactory, Parser};
use serde_json::Value;
use std::path::Path;

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

/// The flag `name` of the main command (a long name or an alias), if it exists.
pub fn flag_info(name: &str) -> Option<FlagInfo> {
    let cmd = Cli::command();
    let arg = cmd.get_arguments().find(|a| {
        a.get_long() == Some(name) || a.get_all_aliases().is_some_and(|al| al.contains(&name))
    })?;
    let long = arg.get_long()?.to_owned();
    let is_bool = matches!(arg.get_action(), ArgAction::SetTrue);
    let has_no = is_bool
        && cmd
            .get_arguments()
            .any(|a| a.get_long() == Some(&format!("no-{long}")));
    let value_name = arg
        .get_value_names()
        .and_then(|v| v.first())
        .map(|s| s.as_str());
    let path = match value_name {
        Some("PATH" | "DIR" | "FILE") => PathKind::Path,
        Some("NAME|PATH") => PathKind::NameOrPath,
        _ => PathKind::No,
    };
    Some(FlagInfo {
        long,
        is_bool,
        has_no,
        path,
    })
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

/// Runs the main command with the flags `args` (no program name) in this process, as
/// `blis-cosim ARGS...` would: parse, check the paths, resolve the config, simulate.
pub fn run_point(args: &[String]) -> anyhow::Result<PointRun> {
    let argv = std::iter::once("blis-cosim").chain(args.iter().map(String::as_str));
    let cli = Cli::try_parse_from(argv).map_err(|e| {
        let text = e.render().to_string();
        let first = text.lines().next().unwrap_or("invalid flags").to_owned();
        anyhow::anyhow!("{}", first.trim_start_matches("error: "))
    })?;
    if cli.command.is_some() {
        bail!("a point's flags name a subcommand");
    }
    crate::paths::check(&cli.run.paths())?;
    let config = cli
        .run
        .into_config()
        .context("resolving the run's config")?;
    let gpus = config
        .instances
        .iter()
        .map(|i| u64::from(i.tp) * u64::from(i.pp))
        .sum();
    let summary = crate::runner::run(&config)?;
    Ok(PointRun { summary, gpus })
}

/// The default value of the main command's flag `long`, as text (empty when it has none).
pub fn default_value(long: &str) -> String {
    let cmd = Cli::command();
    cmd.get_arguments()
        .find(|a| a.get_long() == Some(long))
        .and_then(|a| a.get_default_values().first())
        .map(|v| v.to_string_lossy().into_owned())
        .unwrap_or_default()
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
            .map_err(|(key, message)| anyhow::anyhow!("policy bundle: {key}: {message}"))?;
    }
    Ok(())
}
