//! The paths the subcommands read and write, for [`crate::paths::check`] (the main job's are
//! its options', [`crate::setup::RunOptions::paths`]).

use super::{GenerateArgs, SweepArgs, ValidateArgs};
use crate::paths::{CommandPath, Role};

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
        if let Some(summary) = &self.sim_summary {
            paths.push(CommandPath::new("--sim-summary", summary, Role::Input));
        }
        if let Some(json) = &self.json {
            paths.push(CommandPath::new("--json", json, Role::Output));
        }
        if let Some(dir) = &self.plots {
            paths.push(CommandPath::new("--plots", dir, Role::OutputDir));
        }
        if let Some(hardware) = &self.hardware {
            paths.push(CommandPath::new("--hardware", hardware, Role::Input));
        }
        paths
    }
}

impl SweepArgs {
    /// The spec read, and the folders written (`--out`, or the one `--report` rewrites, and
    /// `--export-best`).
    pub fn paths(&self) -> Vec<CommandPath<'_>> {
        let mut paths = Vec::new();
        if let Some(space) = &self.space {
            paths.push(CommandPath::new("--space", space, Role::Input));
        }
        if let Some(out) = &self.out {
            paths.push(CommandPath::new("--out", out, Role::OutputDir));
        }
        if let Some(dir) = &self.report {
            paths.push(CommandPath::new("--report", dir, Role::OutputDir));
        }
        if let Some(dir) = &self.export_best {
            paths.push(CommandPath::new("--export-best", dir, Role::OutputDir));
        }
        paths
    }
}
