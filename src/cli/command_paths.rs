//! The paths each command reads and writes, for [`crate::paths::check`].

use super::{GenerateArgs, RunArgs, ValidateArgs};
use crate::paths::{CommandPath, Role};
use std::path::Path;

impl RunArgs {
    /// The files and folders the run reads and writes. `--model` and `--hardware` count when
    /// they name files.
    pub fn paths(&self) -> Vec<CommandPath<'_>> {
        fn named<'a>(flag: &'static str, name: &'a Option<String>) -> Option<CommandPath<'a>> {
            name.as_deref()
                .map(Path::new)
                .filter(|p| p.is_file())
                .map(|p| CommandPath::new(flag, p, Role::Input))
        }
        let flags: [(&'static str, Option<&Path>, Role); 15] = [
            ("--dataset", self.dataset.as_deref(), Role::Input),
            (
                "--workload-spec",
                self.workload_spec.as_deref(),
                Role::Input,
            ),
            (
                "--cluster-config",
                self.cluster_config.as_deref(),
                Role::Input,
            ),
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
                self.evaluation_json.as_deref(),
                Role::Output,
            ),
            ("--timeseries", self.timeseries.as_deref(), Role::Output),
            (
                "--sessions-output",
                self.replay.sessions_output.as_deref(),
                Role::Output,
            ),
            (
                "--trace-output",
                self.diagnostics.trace_output.as_deref(),
                Role::Output,
            ),
            ("--emit-et", self.emit_et.as_deref(), Role::OutputDir),
            ("--plots", self.plots.as_deref(), Role::OutputDir),
        ];
        flags
            .into_iter()
            .filter_map(|(flag, path, role)| path.map(|p| CommandPath::new(flag, p, role)))
            .chain(named("--model", &self.model))
            .chain(named("--hardware", &self.hardware))
            .collect()
    }
}

impl GenerateArgs {
    /// The spec or trace read and the JSONL written.
    pub fn paths(&self) -> Vec<CommandPath<'_>> {
        let mut paths = vec![CommandPath::new("--output", &self.out, Role::Output)];
        if let Some(spec) = &self.workload_spec {
            paths.insert(0, CommandPath::new("--workload-spec", spec, Role::Input));
        }
        if let Some(dataset) = &self.dataset {
            paths.insert(0, CommandPath::new("--dataset", dataset, Role::Input));
        }
        paths
    }
}

impl ValidateArgs {
    /// The two runs read, the JSON and plots written.
    pub fn paths(&self) -> Vec<CommandPath<'_>> {
        let mut paths = vec![
            CommandPath::new("--vllm", &self.vllm, Role::Input),
            CommandPath::new("--sim", &self.sim, Role::Input),
        ];
        if let Some(json) = &self.json {
            paths.push(CommandPath::new("--json", json, Role::Output));
        }
        if let Some(dir) = &self.plots {
            paths.push(CommandPath::new("--plots", dir, Role::OutputDir));
        }
        paths
    }
}
