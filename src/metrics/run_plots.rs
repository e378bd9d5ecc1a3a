//! Pictures of a run (`--plots DIR`): throughput, running and waiting requests and KV cache
//! use over time, from the run's [`TimeSeries`], and the TTFT, TPOT and end-to-end latency
//! CDFs of its requests; every chart titled with the run.

use crate::output::StagedDir;
use std::path::PathBuf;

use plotters::chart::SeriesLabelPosition;

use super::plots::{self, Chart, PlotFormat, Series};
use super::stats::NS_PER_MS;
use super::{RequestRecord, TimeSeries};

/// At most this many instances get a KV line of their own; more are drawn as their mean.
const KV_LINES: usize = 8;

/// The latencies a run's pictures need.
#[derive(Debug)]
pub struct RunPlots {
    /// What the run was (model, hardware, workload), the first line of every title.
    title: String,
    ttft_ms: Vec<f64>,
    tpot_ms: Vec<f64>,
    e2e_ms: Vec<f64>,
}

impl RunPlots {
    /// Pictures of the run described by `title`.
    pub fn new(title: String) -> RunPlots {
        RunPlots {
            title,
            ttft_ms: Vec::new(),
            tpot_ms: Vec::new(),
            e2e_ms: Vec::new(),
        }
    }

    /// Records a completed request.
    pub fn record(&mut self, r: &RequestRecord<'_>) {
        let ms = |ns: u64| ns as f64 / NS_PER_MS;
        let ttft = r.first_token_ns - r.arrival_ns;
        let e2e = r.end_ns - r.arrival_ns;
        self.ttft_ms.push(ms(ttft));
        self.e2e_ms.push(ms(e2e));
        if r.output_toks > 1 {
            self.tpot_ms
                .push(ms(e2e - ttft) / f64::from(r.output_toks - 1));
        }
    }

    /// Draws every chart into the staged folder `dir` and returns the files it will hold.
    pub fn write(
        mut self,
        series: &TimeSeries,
        dir: &StagedDir,
        format: PlotFormat,
    ) -> anyhow::Result<Vec<PathBuf>> {
        let [prompt, generated, running, waiting] = series.totals();
        let chart = |name, what: &str, y_desc, legend, series| Chart {
            name,
            title: format!("{what}: {}", self.title),
            x_desc: "Time (s)",
            y_desc,
            legend,
            y_integer: false,
            series,
        };
        let upper = SeriesLabelPosition::UpperRight;
        let mut charts = vec![
            chart(
                "throughput",
                "Throughput",
                "Tokens/s",
                upper.clone(),
                vec![
                    Series::solid("prompt", prompt),
                    Series::solid("generated", generated),
                ],
            ),
            Chart {
                y_integer: true,
                ..chart(
                    "requests",
                    "Requests",
                    "Requests",
                    upper.clone(),
                    vec![
                        Series::solid("running", running),
                        Series::solid("waiting", waiting),
                    ],
                )
            },
            chart(
                "kv_cache",
                "KV cache use",
                "KV blocks held (%)",
                upper,
                kv_series(series.kv_use()),
            ),
        ];
        for (name, what, x_desc, values) in [
            ("ttft_cdf", "TTFT", "TTFT (ms)", &mut self.ttft_ms),
            ("tpot_cdf", "TPOT", "TPOT (ms)", &mut self.tpot_ms),
            (
                "e2e_cdf",
                "End-to-end latency",
                "End-to-end latency (ms)",
                &mut self.e2e_ms,
            ),
        ] {
            values.sort_by(f64::total_cmp);
            charts.push(Chart {
                name,
                title: format!("{what} CDF: {}", self.title),
                x_desc,
                y_desc: "CDF",
                legend: SeriesLabelPosition::LowerRight,
                y_integer: false,
                series: vec![Series::solid(what, cdf(values))],
            });
        }
        plots::write_charts(dir, format, &charts)
    }
}

/// One KV line per instance, or their mean when there are more than [`KV_LINES`].
fn kv_series(per_instance: Vec<Vec<(f64, f64)>>) -> Vec<Series> {
    if per_instance.len() <= KV_LINES {
        let single = per_instance.len() == 1;
        return per_instance
            .into_iter()
            .enumerate()
            .map(|(i, points)| {
                let label = if single {
                    "KV cache".to_owned()
                } else {
                    format!("instance {i}")
                };
                Series::solid(label, points)
            })
            .collect();
    }
    let n = per_instance.len() as f64;
    let mean = (0..per_instance[0].len())
        .map(|k| {
            let t = per_instance[0][k].0;
            (t, per_instance.iter().map(|s| s[k].1).sum::<f64>() / n)
        })
        .collect();
    vec![Series::solid(format!("mean of {n} instances"), mean)]
}

/// The empirical CDF of ascending `values`: `(value, fraction ≤ it)`.
fn cdf(values: &[f64]) -> Vec<(f64, f64)> {
    let n = values.len() as f64;
    values
        .iter()
        .enumerate()
        .map(|(i, &v)| (v, (i + 1) as f64 / n))
        .collect()
}
