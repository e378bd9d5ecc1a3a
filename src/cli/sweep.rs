//! The flags of `blis-cosim sweep`, and what the sweep knows of the main command's flags
//! ([`MainFlags`]: the sweep's [`sweep::Flags`], read from the clap definition).

use super::Cli;
use crate::metrics::PlotFormat;
use crate::setup::RunOptions;
use crate::sweep::exec::{FlagInfo, PathKind};
use crate::sweep::{self, SweepOptions};
use anyhow::bail;
use clap::{ArgAction, ArgGroup, Args, CommandFactory, Parser};
use std::path::PathBuf;

/// Flags of `blis-cosim sweep`.
#[derive(Debug, Clone, Args)]
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
    #[arg(long, value_name = "COLUMN", default_value = sweep::DEFAULT_COST)]
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

    /// Write the best configuration (with --slo the cheapest meeting it, else the best of a
    /// single --objectives column) into DIR: policy.yaml (its policy bundle, for
    /// --policy-config), cluster.json (its cluster config, when it has one), point.json.
    #[arg(
        long,
        value_name = "DIR",
        requires = "space",
        conflicts_with = "list_points"
    )]
    pub export_best: Option<PathBuf>,
}

impl From<SweepArgs> for SweepOptions {
    fn from(a: SweepArgs) -> SweepOptions {
        SweepOptions {
            space: a.space,
            out: a.out,
            jobs: a.jobs,
            objectives: a.objectives,
            slo: a.slo,
            cost: a.cost,
            plot_format: if a.plot_format == "png" {
                PlotFormat::Png
            } else {
                PlotFormat::Svg
            },
            report: a.report,
            list_points: a.list_points,
            only_points: a.only_points,
            export_best: a.export_best,
        }
    }
}

/// The main command's flags, as the sweep sees them.
#[derive(Debug, Clone, Copy, Default)]
pub struct MainFlags;

impl sweep::Flags for MainFlags {
    fn flag(&self, name: &str) -> Option<FlagInfo> {
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

    fn default_value(&self, long: &str) -> String {
        let cmd = Cli::command();
        cmd.get_arguments()
            .find(|a| a.get_long() == Some(long))
            .and_then(|a| a.get_default_values().first())
            .map(|v| v.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    fn options(&self, args: &[String]) -> anyhow::Result<RunOptions> {
        let argv = std::iter::once("blis-cosim").chain(args.iter().map(String::as_str));
        let cli = Cli::try_parse_from(argv).map_err(|e| {
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or("invalid flags").to_owned();
            anyhow::anyhow!("{}", first.trim_start_matches("error: "))
        })?;
        if cli.command.is_some() {
            bail!("a point's flags name a subcommand");
        }
        Ok(cli.run.into_options()?)
    }
}
