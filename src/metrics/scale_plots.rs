//! The pictures of an autoscaled run (`--plots`): replicas by state over time, and the load
//! the autoscaler saw.

use super::plots::{Chart, PlotFormat, Series, write_charts};
use crate::autoscale::{AutoscaleReport, ReplicaState};
use crate::output::StagedDir;
use plotters::prelude::SeriesLabelPosition;
use std::path::PathBuf;

/// Draws `autoscale_replicas` and `autoscale_load` into the staged folder `dir`; returns the
/// paths they will have.
pub fn write_autoscale_plots(
    report: &AutoscaleReport,
    title: &str,
    dir: &StagedDir,
    format: PlotFormat,
) -> anyhow::Result<Vec<PathBuf>> {
    let at = |f: &dyn Fn(&crate::autoscale::ScaleSample) -> f64| -> Vec<(f64, f64)> {
        report
            .series
            .iter()
            .map(|s| (s.t_ns as f64 / 1e9, f(s)))
            .collect()
    };
    let count = |states: &'static [ReplicaState]| {
        move |s: &crate::autoscale::ScaleSample| {
            states
                .iter()
                .map(|st| f64::from(s.replicas[st.index()]))
                .sum::<f64>()
        }
    };
    const STARTING: &[ReplicaState] = &[
        ReplicaState::Pending,
        ReplicaState::Loading,
        ReplicaState::WarmingUp,
    ];
    let replicas = Chart {
        name: "autoscale_replicas",
        title: format!("{title}: replicas ({} autoscaling)", report.policy),
        x_desc: "time (s)",
        y_desc: "replicas",
        legend: SeriesLabelPosition::UpperRight,
        y_integer: true,
        series: vec![
            Series::solid("ready", at(&count(&[ReplicaState::Ready]))).stepped(),
            Series::dashed(
                "starting (pending, loading, warming up)",
                at(&count(STARTING)),
            )
            .stepped(),
            Series::dashed("draining", at(&count(&[ReplicaState::Draining]))).stepped(),
        ],
    };
    let load = Chart {
        name: "autoscale_load",
        title: format!("{title}: load the autoscaler saw"),
        x_desc: "time (s)",
        y_desc: "requests/s; utilization x 10",
        legend: SeriesLabelPosition::UpperRight,
        y_integer: false,
        series: vec![
            Series::solid("arrivals (requests/s)", at(&|s| s.arrival_rate)),
            Series::dashed(
                "mean utilization of ready replicas x 10",
                at(&|s| s.utilization * 10.0),
            ),
        ],
    };
    write_charts(dir, format, &[replicas, load])
}
