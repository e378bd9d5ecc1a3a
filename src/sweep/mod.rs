//! `blis-cosim sweep`: many runs of the main command from one spec, in parallel worker threads
//! of this process, into one results table; then the Pareto front and the SLO answer.
//!
//! [`spec`] reads the YAML, [`points`] expands it, [`exec`] runs one point, `run` runs them
//! all, [`results`] keeps the table, [`report`] and [`pareto`] answer from it; `best` writes
//! the best configuration as a policy bundle and cluster config (`--export-best`).

mod best;
mod console;
pub mod exec;
pub mod expr;
pub mod pareto;
pub mod plot;
pub mod points;
pub mod report;
pub mod results;
mod run;
pub mod spec;

pub use exec::{Flags, Runner};

use crate::metrics::PlotFormat;
use anyhow::{Context, bail};
use std::path::PathBuf;

/// What `blis-cosim sweep` is asked to do (its flags, plain; see their help).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SweepOptions {
    /// The sweep spec.
    pub space: Option<PathBuf>,
    /// Folder of the sweep's outputs.
    pub out: Option<PathBuf>,
    /// Points run at once; `None`: the number of cores.
    pub jobs: Option<u32>,
    /// Columns of the Pareto front, `COLUMN:min|max,...`.
    pub objectives: Option<String>,
    /// SLO rules, `COLUMN<=N,...`.
    pub slo: Option<String>,
    /// The column the SLO answer minimises.
    pub cost: String,
    /// Picture format of the Pareto plots.
    pub plot_format: PlotFormat,
    /// Redo the report of the sweep in this folder (no run).
    pub report: Option<PathBuf>,
    /// Print the points as JSON lines and exit.
    pub list_points: bool,
    /// Run only these point ids (`0-9,15`).
    pub only_points: Option<String>,
    /// Write the best configuration's policy bundle, cluster config and point into this folder.
    pub export_best: Option<PathBuf>,
}

/// The column `--slo` minimises by default.
pub const DEFAULT_COST: &str = "gpus";

/// Runs `blis-cosim sweep`: its spec's flags are the main command's (`flags`), and each point
/// runs by `runner`.
pub fn main(args: &SweepOptions, flags: &dyn Flags, runner: &Runner) -> anyhow::Result<()> {
    let opts = report::ReportOptions {
        objectives: args
            .objectives
            .as_deref()
            .map(pareto::parse_objectives)
            .transpose()?,
        slo: args.slo.as_deref().map(pareto::parse_slo).transpose()?,
        cost: args.cost.clone(),
        format: args.plot_format,
    };
    if let Some(dir) = &args.report {
        let folder = results::Folder { dir: dir.clone() };
        print!("{}", report::finalize(&folder, &opts)?);
        return Ok(());
    }
    let space = args.space.as_ref().context("--space is required")?;
    let spec = spec::Spec::load(space, flags)?;
    let points =
        points::expand(&spec).with_context(|| format!("sweep spec {}", space.display()))?;
    if args.list_points {
        return list(&points);
    }
    let only = args
        .only_points
        .as_deref()
        .map(|s| parse_ids(s, points.len()))
        .transpose()?;
    opts.check_columns(&results::header(&spec.param_names()))?;
    if args.export_best.is_some() {
        opts.check_best()?;
    }
    let out = args.out.as_ref().context("--out is required")?;
    let jobs = args.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, usize::from),
        |j| j as usize,
    );
    let folder = results::Folder { dir: out.clone() };
    let failed = run::run_all(
        &spec,
        &points,
        only.as_deref(),
        &folder,
        jobs,
        (flags, runner),
    )?;
    print!("{}", report::finalize(&folder, &opts)?);
    if let Some(dir) = &args.export_best {
        let Some(config) = report::best_config(&folder, &opts)? else {
            bail!("--export-best: no configuration qualifies (none ok, or none meets the SLO)");
        };
        for path in best::export(dir, config, &points, &folder, flags)? {
            println!("wrote {}", path.display());
        }
    }
    if failed > 0 {
        bail!(
            "{failed} point(s) failed (status `failed` in {}; their messages in its error column)",
            folder.results().display()
        );
    }
    Ok(())
}

fn list(points: &[points::Point]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for p in points {
        serde_json::to_writer(&mut out, p)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Parses `0-9,15` into sorted ids, each below `count`.
pub fn parse_ids(text: &str, count: usize) -> anyhow::Result<Vec<usize>> {
    let mut ids = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let parse = |s: &str| -> anyhow::Result<usize> {
            let id: usize = s
                .trim()
                .parse()
                .with_context(|| format!("--only-points: `{s}` is not a point id"))?;
            if id >= count {
                bail!("--only-points: point {id} does not exist (the sweep has {count})");
            }
            Ok(id)
        };
        match item.split_once('-') {
            Some((a, b)) => {
                let (first, last) = (parse(a)?, parse(b)?);
                if first > last {
                    bail!("--only-points: `{item}`: the range ends before it starts");
                }
                ids.extend(first..=last);
            }
            None => ids.push(parse(item)?),
        }
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}
