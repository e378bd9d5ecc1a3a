//! Every file and folder a run reads and writes, named by the flag that gives it: the one
//! list [`crate::paths::check`] checks before any work.

use super::{Deployment, RunOptions, WorkloadSource};
use crate::paths::{CommandPath, Role};
use std::path::Path;

/// `name` as the path of `flag`, when it names a file.
fn named<'a>(flag: &'static str, name: Option<&'a str>) -> Option<CommandPath<'a>> {
    name.map(Path::new)
        .filter(|p| p.is_file())
        .map(|p| CommandPath::new(flag, p, Role::Input))
}

impl RunOptions {
    /// The files and folders the run reads and writes. `--model` and `--hardware` count when
    /// they name files.
    pub fn paths(&self) -> Vec<CommandPath<'_>> {
        let (dataset, spec) = match &self.workload {
            WorkloadSource::Dataset(path, _) => (Some(path.as_path()), None),
            WorkloadSource::Spec(path) => (None, Some(path.as_path())),
            WorkloadSource::Scenario(_) => (None, None),
        };
        let (cluster, model, hardware) = match &self.deployment {
            Deployment::ClusterConfig(path) => (Some(path.as_path()), None, None),
            Deployment::Standalone {
                model, hardware, ..
            } => (None, model.as_deref(), hardware.as_deref()),
        };
        let flags: [(&'static str, Option<&Path>, Role); 15] = [
            ("--dataset", dataset, Role::Input),
            ("--workload-spec", spec, Role::Input),
            ("--cluster-config", cluster, Role::Input),
            ("--architecture", self.architecture.as_deref(), Role::Input),
            (
                "--network-config",
                self.astra.network_config.as_deref(),
                Role::Input,
            ),
            ("--astra-sim", self.astra.astra_sim.as_deref(), Role::Input),
            (
                "--policy-config",
                self.control.policy_config.as_deref(),
                Role::Input,
            ),
            ("--output", self.output.as_deref(), Role::Output),
            ("--summary-json", self.summary_json.as_deref(), Role::Output),
            (
                "--evaluation-json",
                self.evaluation.json.as_deref(),
                Role::Output,
            ),
            (
                "--timeseries",
                self.timeseries.as_ref().map(|t| t.path.as_path()),
                Role::Output,
            ),
            (
                "--sessions-output",
                self.sessions_output.as_deref(),
                Role::Output,
            ),
            (
                "--trace-output",
                self.diagnostics.trace_output.as_deref(),
                Role::Output,
            ),
            (
                "--emit-et",
                self.emit_et.as_ref().map(|e| e.dir.as_path()),
                Role::OutputDir,
            ),
            (
                "--plots",
                self.plots.as_ref().map(|p| p.dir.as_path()),
                Role::OutputDir,
            ),
        ];
        flags
            .into_iter()
            .filter_map(|(flag, path, role)| path.map(|p| CommandPath::new(flag, p, role)))
            .chain(named("--model", model))
            .chain(named("--hardware", hardware))
            .collect()
    }
}
