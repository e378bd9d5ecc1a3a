//! `--export-best DIR`: the sweep's best configuration as what a deployment reads. Its point's
//! run is resolved again, as the main command resolves it, and its control plane and routing
//! written as a policy bundle (`policy.yaml`, the `--export-policy` bundle), beside the cluster
//! config it ran on (`cluster.json`, when it had one) and the point itself (`point.json`: id,
//! config, seed, parameters and its own flags). Fed back as `--policy-config` (and
//! `--cluster-config`) with the sweep's other flags, the bundle reruns the point byte for byte.

use super::exec::Flags;
use super::points::Point;
use super::results::Folder;
use super::run::{point_args, write_file};
use anyhow::{Context, bail};
use std::path::{Path, PathBuf};

/// Writes the bundle, cluster config and description of configuration `config`'s first point
/// into `dir`; returns the files written.
pub fn export(
    dir: &Path,
    config: usize,
    points: &[Point],
    folder: &Folder,
    flags: &dyn Flags,
) -> anyhow::Result<Vec<PathBuf>> {
    let Some(point) = points.iter().find(|p| p.config == config) else {
        bail!("--export-best: the best configuration ({config}) is not among the spec's points");
    };
    let args = point_args(point, folder);
    let options = flags.options(&args)?;
    let resolved = crate::setup::resolve(options)
        .with_context(|| format!("--export-best: resolving point {}", point.id))?;
    let mut written = Vec::new();
    let mut write = |name: &str, text: &str| -> anyhow::Result<()> {
        let path = dir.join(name);
        write_file(&path, text)?;
        written.push(path);
        Ok(())
    };
    let bundle = crate::control::export::bundle_text(&resolved.routing, &resolved.control);
    write("policy.yaml", &bundle)?;
    if let Some(cluster) = cluster_config(&args) {
        let text = crate::paths::read_text(&cluster)
            .with_context(|| format!("--export-best: reading {}", cluster.display()))?;
        write("cluster.json", &text)?;
    }
    write("point.json", &(serde_json::to_string_pretty(point)? + "\n"))?;
    Ok(written)
}

/// The cluster config a point's flags name (the last `--cluster-config`), if any.
fn cluster_config(args: &[String]) -> Option<PathBuf> {
    args.windows(2)
        .rev()
        .find(|w| w[0] == "--cluster-config")
        .map(|w| PathBuf::from(&w[1]))
}
