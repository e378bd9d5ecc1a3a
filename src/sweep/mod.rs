//! `blis-cosim sweep`: many runs of the main command from one spec, in parallel worker threads
//! of this process, into one results table; then the Pareto front and the SLO answer.
//!
//! [`spec`] reads the YAML, [`points`] expands it, [`exec`] runs one point, `run` runs them
//! all, [`results`] keeps the table, [`report`] and [`pareto`] answer from it.

mod console;
pub mod exec;
pub mod expr;
pub mod pareto;
mod plot;
pub mod points;
pub mod report;
pub mod results;
mod run;
pub mod spec;

use crate::metrics::PlotFormat;
use anyhow::{Context, bail};
use clap::{ArgGroup, Args};
use std::path::PathBuf;

/// Flags of `blis-cosim sweep`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("mode").required(true).args(["space", "report"])))]
pub struct SweepArgs {
    /// The sweep spec (YAML): base run, axes, method, repeats, derived fields, constraints
    /// (see the guide's Sweeps chapter).
    #[arg(long, value_name = "PATH")]
    pub space: Option<PathBuf>,

    /// Folder of the sweep's outputs (results.csv, timings.csv, points/, configs/,
    /// sweep.log); a rerun into the same folder skips the points already finished.
    #[arg(long, value_name = "DIR", required_unless_present_any = ["report", "list_points"])]
    pub out: Option<PathBuf>,

    /// Points run at once, one per worker thread [default: the number of cores].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub jobs: Option<u32>,

    /// Mark and draw the Pareto front of these columns: COLUMN:min|max,... (e.g.
    /// p99_ttft_ms:min,output_throughput:max,gpus:min).
    #[arg(long, value_name = "LIST")]
    pub objectives: Option<String>,

    /// Keep the configurations meeting every rule COLUMN<=N (or <, >=, >), comma-separated,
    /// and name the cheapest by --cost.
    #[arg(long, value_name = "RULES")]
    pub slo: Option<String>,

    /// The column --slo minimises to name the cheapest configuration.
    #[arg(long, value_name = "COLUMN", default_value = "gpus")]
    pub cost: String,

    /// Picture format of the Pareto plots: svg or png.
    #[arg(long, value_name = "FORMAT", default_value = "svg", value_parser = ["svg", "png"])]
    pub plot_format: String,

    /// Redo the report of the sweep in DIR from its results.csv (no run): sort, mark the
    /// front and the SLO, draw.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["space", "out", "jobs", "list_points", "only_points"])]
    pub report: Option<PathBuf>,

    /// Print the spec's points as JSON lines (id, config, seed, params, args) and exit.
    #[arg(long, requires = "space", conflicts_with = "out")]
    pub list_points: bool,

    /// Run only these point ids: a comma-separated list of ids and ranges (0-9,15).
    #[arg(long, value_name = "IDS")]
    pub only_points: Option<String>,
}

/// Runs `blis-cosim sweep`.
pub fn main(args: &SweepArgs) -> anyhow::Result<()> {
    let opts = report::ReportOptions {
        objectives: args
            .objectives
            .as_deref()
            .map(pareto::parse_objectives)
            .transpose()?,
        slo: args.slo.as_deref().map(pareto::parse_slo).transpose()?,
        cost: args.cost.clone(),
        format: if args.plot_format == "png" {
            PlotFormat::Png
        } else {
            PlotFormat::Svg
        },
    };
    if let Some(dir) = &args.report {
        let folder = results::Folder { dir: dir.clone() };
        print!("{}", report::finalize(&folder, &opts)?);
        return Ok(());
    }
    let space = args.space.as_ref().context("--space is required")?;
    let spec = spec::Spec::load(space)?;
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
    let out = args.out.as_ref().context("--out is required")?;
    let jobs = args.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, usize::from),
        |j| j as usize,
    );
    let folder = results::Folder { dir: out.clone() };
    let failed = run::run_all(&spec, &points, only.as_deref(), &folder, jobs)?;
    print!("{}", report::finalize(&folder, &opts)?);
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
            Some((a, b)) => ids.extend(parse(a)?..=parse(b)?),
            None => ids.push(parse(item)?),
        }
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

#[cfg(test)]
mod tests;
