//! Every file and folder a run reads and writes, named by the flag that gives it: the one
//! list [`crate::paths::check`] checks before any work.

use super::{Deployment, RunOptions, WorkloadSource};
use crate::config::{ClusterConfig, PimDevice};
use crate::paths::{CommandPath, Role};
use std::path::{Path, PathBuf};

/// A file named inside another input: a model config, a hardware file or a PIM INI that the
/// cluster config names, with where it names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedFile {
    /// Where it is named, e.g. `nodes[0].instances[1].model_name of --cluster-config`.
    pub named_at: String,
    pub path: PathBuf,
}

impl NamedFile {
    /// The file as one of the run's paths, for [`crate::paths::check`].
    pub fn as_path(&self) -> CommandPath<'_> {
        CommandPath::new(&self.named_at, &self.path, Role::Input)
    }
}

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
            WorkloadSource::Scenario(_) | WorkloadSource::Synthetic(_) => (None, None),
        };
        let (cluster, model, hardware) = match &self.deployment {
            Deployment::ClusterConfig(path) => (Some(path.as_path()), None, None),
            Deployment::Standalone {
                model, hardware, ..
            } => (None, model.as_deref(), hardware.as_deref()),
        };
        let flags: [(&'static str, Option<&Path>, Role); 17] = [
            ("--dataset", dataset, Role::Input),
            ("--profile-dir", self.profile_dir.as_deref(), Role::InputDir),
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
                "--export-policy",
                self.evaluation.export_policy.as_deref(),
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

    /// Checks every path of the run against the others before any work
    /// ([`crate::paths::check`]): its flags' and the files its cluster config names.
    pub fn check_paths(&self) -> anyhow::Result<()> {
        let named = self.named_files();
        let mut paths = self.paths();
        paths.extend(named.iter().map(NamedFile::as_path));
        crate::paths::check(&paths)
    }

    /// The files the cluster config names (instances' `model_name` and `hardware` that are
    /// files, nodes' `cpu_mem.pim_config` INIs where they are found), so that no output
    /// replaces them. A config that cannot be read names none here: resolving it says why.
    /// A policy bundle names no files.
    pub fn named_files(&self) -> Vec<NamedFile> {
        let Deployment::ClusterConfig(config_path) = &self.deployment else {
            return Vec::new();
        };
        cluster_named_files(
            "--cluster-config",
            config_path,
            self.pim.pim_config_dir.as_deref(),
        )
    }
}

/// The files the cluster config `config_path` (given by `flag`) names: its instances'
/// `model_name` and `hardware` that are files, its nodes' `cpu_mem.pim_config` INIs where they
/// are found (in `pim_dir` when given). A config that cannot be read names none here: resolving
/// it says why.
pub fn cluster_named_files(
    flag: &str,
    config_path: &Path,
    pim_dir: Option<&Path>,
) -> Vec<NamedFile> {
    let Ok(cluster) = ClusterConfig::load(config_path) else {
        return Vec::new();
    };
    let mut files = Vec::new();
    let mut add = |field: String, path: PathBuf| {
        files.push(NamedFile {
            named_at: format!("{field} of {flag}"),
            path,
        });
    };
    for (n, node) in cluster.nodes.iter().enumerate() {
        for (i, inst) in node.instances.iter().enumerate() {
            for (key, name) in [
                ("model_name", &inst.model_name),
                ("hardware", &inst.hardware),
            ] {
                if Path::new(name).is_file() {
                    add(format!("nodes[{n}].instances[{i}].{key}"), name.into());
                }
            }
        }
        if let Some(stem) = &node.cpu_mem.pim_config
            && let Ok(ini) = PimDevice::locate(stem, config_path, pim_dir)
        {
            add(format!("nodes[{n}].cpu_mem.pim_config"), ini);
        }
    }
    files
}
