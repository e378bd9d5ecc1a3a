//! Validation against a real vLLM run, as LLMServingSim's `python -m bench validate` does it:
//! TTFT, TPOT and end-to-end latency from vLLM's `requests.jsonl` and from a simulator's
//! per-request CSV, their mean and tail percentiles side by side with the relative difference,
//! and plots of both runs.

pub mod matching;

use super::plots::{self, Chart, PlotFormat, Series};
use super::stats::{NS_PER_MS, mean, percentile};
use crate::output::StagedDir;
use crate::workload::MAX_TOKENS;
use anyhow::{Context, bail};
use matching::Served;
use plotters::chart::SeriesLabelPosition;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};

/// Two timestamps further apart than this, in seconds, are on different clocks (vLLM's
/// `arrival_time` is epoch time, its engine timestamps are monotonic).
const SAME_CLOCK_MAX_GAP_S: f64 = 100_000.0;
/// Longest run the throughput series accept, in seconds (one bucket per second).
const MAX_RUN_S: f64 = 1e7;
/// The table's metrics: row label and JSON key.
const METRICS: [(&str, &str); 3] = [("TTFT", "ttft"), ("TPOT", "tpot"), ("Latency", "latency")];
/// The table's statistics: row label, JSON key, and percentile (`None` for the mean).
const STATS: [(&str, &str, Option<f64>); 5] = [
    ("Mean", "mean", None),
    ("Median", "median", Some(50.0)),
    ("P90", "p90", Some(90.0)),
    ("P95", "p95", Some(95.0)),
    ("P99", "p99", Some(99.0)),
];
/// Where a real request's TTFT and latency start when its `arrival_time` is on another clock
/// than the engine timestamps (as in vLLM's bench runs: epoch vs monotonic).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VllmArrival {
    /// At `queued_ts`, LLMServingSim's rule. That is when the engine core took the request
    /// from its input queue, so the wait there (up to a step under async scheduling) is left
    /// out of vLLM's TTFT while a simulator's TTFT counts it.
    #[default]
    Queued,
    /// At `arrival_time` moved onto the engine clock by the smallest `queued_ts −
    /// arrival_time` of the run (the request that waited least is taken to have waited
    /// nothing): the TTFT a client sees, the quantity the simulator reports.
    Client,
}

/// The simulator CSV columns the comparison reads.
const SIM_COLUMNS: [&str; 5] = ["arrival", "latency", "TTFT", "TPOT", "ITL"];

/// A real vLLM run compared with a simulated one: per-run samples and the Diff% table.
#[derive(Debug, Clone)]
pub struct Validation {
    real: Run,
    sim: Run,
    /// `[metric][statistic]`, in [`METRICS`] × [`STATS`] order.
    table: [[Cell; 5]; 3],
    /// See [`Validation::clock_offset_s`].
    clock_offset_s: Option<f64>,
    /// See [`Validation::differences`].
    differences: Vec<String>,
    /// What was compared, for the plots' titles: see [`case_name`].
    case: String,
}

/// What the plots and the request counts need of one run.
#[derive(Debug, Clone)]
struct Run {
    requests: usize,
    /// End-to-end latencies, ms, ascending.
    latency_ms: Vec<f64>,
    /// Generated tokens per second: `(end of the 1 s bucket, tokens/s)`.
    gen_throughput: Vec<(f64, f64)>,
}

/// One statistic of one metric on both sides, ms.
#[derive(Debug, Clone, Copy)]
pub struct Cell {
    /// The vLLM run's value.
    pub real_ms: f64,
    /// The simulator's value.
    pub sim_ms: f64,
}

impl Cell {
    /// `(sim − vLLM) / vLLM × 100`; NaN when the vLLM value is 0 or NaN.
    pub fn diff_pct(self) -> f64 {
        if self.real_ms == 0.0 {
            f64::NAN
        } else {
            (self.sim_ms - self.real_ms) / self.real_ms * 100.0
        }
    }
}

/// TTFT, TPOT and latency samples of one run, ms, in [`METRICS`] order.
pub type Samples = [Vec<f64>; 3];

/// A real vLLM run's TTFT, TPOT and latency samples, ms, read once (`calibrate` compares
/// many simulations with one real run).
pub fn real_run_samples(path: &Path, arrival: VllmArrival) -> anyhow::Result<Samples> {
    let (requests, _) = read_real_requests(path, arrival)?;
    Ok(real_samples(&requests))
}

/// `validate`'s Diff% table of a simulation's samples `sim` against a real run's `real`:
/// `[metric][statistic]`, TTFT, TPOT, latency × mean, median, P90, P95, P99 (labels:
/// [`diff_label`]).
pub fn diff_table(real: &Samples, sim: &Samples) -> [[f64; 5]; 3] {
    std::array::from_fn(|m| {
        std::array::from_fn(|s| {
            let (mut r, mut x) = (real[m].clone(), sim[m].clone());
            Cell {
                real_ms: statistic(&mut r, STATS[s].2),
                sim_ms: statistic(&mut x, STATS[s].2),
            }
            .diff_pct()
        })
    })
}

/// The label of cell `[metric][statistic]` of [`diff_table`], e.g. `TTFT median`.
pub fn diff_label(metric: usize, statistic: usize) -> String {
    let stat = STATS[statistic].1;
    format!("{} {stat}", METRICS[metric].0)
}

impl Validation {
    /// Reads a real run's vLLM `requests.jsonl` and a simulator per-request CSV
    /// (our/LLMServingSim format).
    ///
    /// The real throughput series comes from the `timeseries.csv` beside `requests.jsonl` when
    /// there is one, else from spreading each request's tokens evenly between its first and
    /// last token. `arrival` says where real TTFTs and latencies start when vLLM's arrival
    /// times are on another clock.
    pub fn compare(
        real_requests: &Path,
        sim_csv: &Path,
        arrival: VllmArrival,
    ) -> anyhow::Result<Validation> {
        let (requests, clock_offset_s) = read_real_requests(real_requests, arrival)?;
        let timeseries = real_requests.with_file_name("timeseries.csv");
        let real_throughput = if timeseries.is_file() {
            read_timeseries(&timeseries)?
        } else {
            spread_real_tokens(&requests, real_requests)?
        };
        let mut real = real_samples(&requests);
        let (mut sim, sim_throughput, sim_served) = read_sim_csv(sim_csv)?;
        let real_served: Vec<Served> = requests.iter().map(|r| r.served).collect();
        let differences = match sim_served {
            Some(sim_served) => matching::differences(&real_served, &sim_served),
            None if real_served.len() != sim[0].len() => vec![format!(
                "the vLLM run has {} requests, the simulation {}",
                real_served.len(),
                sim[0].len()
            )],
            None => Vec::new(),
        };
        let table = std::array::from_fn(|m| {
            std::array::from_fn(|s| Cell {
                real_ms: statistic(&mut real[m], STATS[s].2),
                sim_ms: statistic(&mut sim[m], STATS[s].2),
            })
        });
        let [_, _, mut real_latency] = real;
        let [_, _, mut sim_latency] = sim;
        real_latency.sort_by(f64::total_cmp);
        sim_latency.sort_by(f64::total_cmp);
        Ok(Validation {
            real: Run {
                requests: requests.len(),
                latency_ms: real_latency,
                gen_throughput: real_throughput,
            },
            sim: Run {
                requests: sim_latency.len(),
                latency_ms: sim_latency,
                gen_throughput: sim_throughput,
            },
            table,
            clock_offset_s,
            differences,
            case: case_name(real_requests, sim_csv),
        })
    }

    /// How the two runs' requests differ (counts, ids, token counts); empty when they served
    /// the same requests. The table compares each run's own requests regardless.
    pub fn differences(&self) -> &[String] {
        &self.differences
    }

    /// With [`VllmArrival::Client`] on a run whose arrivals are on another clock: the shift,
    /// s, that put `arrival_time` onto the engine clock.
    pub fn clock_offset_s(&self) -> Option<f64> {
        self.clock_offset_s
    }

    /// The Diff% table, same layout as LLMServingSim's validation/summary.txt (Metric, vLLM,
    /// Sim, Diff%; TTFT/TPOT/Latency × Mean, Median, P90, P95, P99; values in ms, 1 decimal).
    pub fn render(&self) -> String {
        let mut out = format!(
            "{:<25}{:>12}{:>12}{:>10}\n",
            "Metric", "vLLM", "Sim", "Diff%"
        );
        out.push_str(&"-".repeat(59));
        out.push('\n');
        for (m, ((metric, _), cells)) in METRICS.iter().zip(&self.table).enumerate() {
            if m > 0 {
                out.push('\n');
            }
            for ((stat, _, _), cell) in STATS.iter().zip(cells) {
                let _ = writeln!(
                    out,
                    "{:<25}{:>12}{:>12}{:>9}%",
                    format!("{metric} {stat}"),
                    python_fixed(cell.real_ms, false),
                    python_fixed(cell.sim_ms, false),
                    python_fixed(cell.diff_pct(), true),
                );
            }
        }
        out
    }

    /// The same numbers as JSON: `{"ttft": {"mean": {"real_ms":..,"sim_ms":..,"diff_pct":..},
    /// ...}, "tpot": .., "latency": .., "num_requests": {"real":..,"sim":..}}`. A number that
    /// does not exist (a side without values, or a Diff% over a vLLM value of 0) is `null`.
    pub fn to_json(&self) -> Value {
        let mut root = Map::new();
        for ((_, metric), cells) in METRICS.iter().zip(&self.table) {
            let stats = STATS
                .iter()
                .zip(cells)
                .map(|((_, stat, _), cell)| {
                    let entry = json!({
                        "real_ms": cell.real_ms,
                        "sim_ms": cell.sim_ms,
                        "diff_pct": cell.diff_pct(),
                    });
                    (stat.to_string(), entry)
                })
                .collect();
            root.insert(metric.to_string(), Value::Object(stats));
        }
        root.insert(
            "num_requests".into(),
            json!({"real": self.real.requests, "sim": self.sim.requests}),
        );
        root.insert(
            "gen_throughput_series_error_pct".into(),
            json!(self.gen_series_error_pct()),
        );
        Value::Object(root)
    }

    /// The generated-token series' error: the weighted absolute percentage error of the
    /// simulated tokens per second against vLLM's, second by second, `Σ|sim − vLLM| / Σ vLLM ×
    /// 100` over every second either run has (a second one lacks counts 0); NaN when vLLM
    /// generated nothing.
    pub fn gen_series_error_pct(&self) -> f64 {
        series_error_pct(&self.real.gen_throughput, &self.sim.gen_throughput)
    }

    /// Largest |Diff%| over the 15 numbers. Differences that do not exist (see
    /// [`Validation::to_json`]) are skipped.
    pub fn worst_abs_diff_pct(&self) -> f64 {
        self.table
            .iter()
            .flatten()
            .map(|cell| cell.diff_pct().abs())
            .filter(|d| !d.is_nan())
            .fold(0.0, f64::max)
    }

    /// Writes `latency_cdf.<ext>` and `throughput.<ext>` into `dir` (created if missing; both
    /// appear together or neither does) and returns their paths; ext = svg or png per `format`.
    pub fn write_plots(&self, dir: &Path, format: PlotFormat) -> anyhow::Result<Vec<PathBuf>> {
        let charts = [
            Chart {
                name: "latency_cdf",
                title: format!("End-to-end latency CDF: {}", self.case),
                x_desc: "Latency (s)",
                y_desc: "CDF",
                legend: SeriesLabelPosition::LowerRight,
                y_integer: false,
                series: vec![
                    Series::solid("vLLM", latency_cdf(&self.real.latency_ms)),
                    Series::dashed("Sim", latency_cdf(&self.sim.latency_ms)),
                ],
            },
            Chart {
                name: "throughput",
                title: format!("Generation throughput: {}", self.case),
                x_desc: "Time (s)",
                y_desc: "Generation tokens/s",
                legend: SeriesLabelPosition::UpperRight,
                y_integer: false,
                series: vec![
                    Series::solid("vLLM", self.real.gen_throughput.clone()),
                    Series::dashed("Sim", self.sim.gen_throughput.clone()),
                ],
            },
        ];
        let staged = StagedDir::create(dir)?;
        let paths = plots::write_charts(&staged, format, &charts)?;
        staged.commit()?;
        Ok(paths)
    }
}

/// The case a validation compares, named by its files: the vLLM run's folder (its last two
/// parts, leaving out a last `vllm`, as in LLMServingSim's `bench/examples/<GPU>/<model>/vllm`)
/// and the simulated CSV's name, e.g. `RTXPRO6000/Llama-3.1-8B: vLLM vs out.csv`.
pub fn case_name(real_requests: &Path, sim_csv: &Path) -> String {
    let folder = real_requests.parent().unwrap_or(Path::new(""));
    let mut parts: Vec<String> = folder
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(p) => Some(p.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    if parts.last().is_some_and(|p| p == "vllm") {
        parts.pop();
    }
    let real = match parts.len() {
        0 => real_requests.display().to_string(),
        n => parts[n.saturating_sub(2)..].join("/"),
    };
    let sim = sim_csv.file_name().map_or_else(
        || sim_csv.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    format!("{real}: vLLM vs {sim}")
}

/// `Σ|sim − real| / Σ real × 100` over the seconds (`t` rounded) either series has.
pub fn series_error_pct(real: &[(f64, f64)], sim: &[(f64, f64)]) -> f64 {
    // Both series' points by second (a stable sort: within a second, the real points in
    // order, then the simulated ones), then each second's two sums, in order of the seconds.
    let mut points: Vec<(i64, f64, bool)> = real
        .iter()
        .map(|&(t, v)| (t.round() as i64, v, true))
        .chain(sim.iter().map(|&(t, v)| (t.round() as i64, v, false)))
        .collect();
    points.sort_by_key(|&(second, _, _)| second);
    let (mut total, mut error) = (0.0, 0.0);
    for same_second in points.chunk_by(|a, b| a.0 == b.0) {
        let (mut r, mut s) = (0.0, 0.0);
        for &(_, v, is_real) in same_second {
            if is_real {
                r += v;
            } else {
                s += v;
            }
        }
        total += r;
        error += f64::abs(s - r);
    }
    if total > 0.0 {
        error / total * 100.0
    } else {
        f64::NAN
    }
}

/// The empirical CDF of ascending latencies in ms: `(latency s, fraction ≤ it)`.
pub fn latency_cdf(sorted_ms: &[f64]) -> Vec<(f64, f64)> {
    let n = sorted_ms.len() as f64;
    sorted_ms
        .iter()
        .enumerate()
        .map(|(i, &ms)| (ms / 1000.0, (i + 1) as f64 / n))
        .collect()
}

/// Mean (`q = None`) or `q`-th percentile of `values`; NaN for no values, as Python's
/// validation prints it. Reorders `values`.
pub fn statistic(values: &mut [f64], q: Option<f64>) -> f64 {
    match q {
        _ if values.is_empty() => f64::NAN,
        None => mean(values, |v| v),
        Some(q) => percentile(values, q, f64::total_cmp, |v| v),
    }
}

/// `value` as Python's `f"{value:.1f}"` (`plus`: `f"{value:+.1f}"`), `nan` included.
pub fn python_fixed(value: f64, plus: bool) -> String {
    match (value.is_nan(), plus) {
        (true, false) => "nan".into(),
        (true, true) => "+nan".into(),
        (false, false) => format!("{value:.1}"),
        (false, true) => format!("{value:+.1}"),
    }
}

/// One line of vLLM's `requests.jsonl` (timestamps in seconds).
#[derive(Debug, Deserialize)]
pub struct RealRequest {
    /// `bench-<n>` in LLMServingSim's bench runs: the request's id is the number.
    #[serde(default)]
    pub request_id: Option<String>,
    /// Prompt tokens.
    #[serde(default)]
    pub input_toks: Option<u64>,
    /// Generated tokens.
    pub output_toks: u64,
    /// Epoch time in current vLLM, so usually on a different clock from the rest.
    pub arrival_time: Option<f64>,
    /// Engine (monotonic) clock, like the token timestamps.
    pub queued_ts: Option<f64>,
    /// When the first token came (engine clock).
    pub first_token_ts: f64,
    /// When the last token came (engine clock).
    pub last_token_ts: f64,
}

/// A [`RealRequest`] with its arrival on the engine clock.
#[derive(Debug)]
pub struct RealTimes {
    /// The request's id and token counts, for matching with the simulated ones.
    pub served: Served,
    /// Generated tokens.
    pub output_toks: u64,
    /// Arrival, engine clock, seconds.
    pub arrival: f64,
    /// First token, engine clock, seconds.
    pub first_token: f64,
    /// Last token, engine clock, seconds.
    pub last_token: f64,
}

/// The most bytes of a real run's requests file `validate` reads (1 GiB: millions of
/// requests); a larger one, or an endless file, is refused rather than read whole.
const MAX_RUN_FILE_BYTES: u64 = 1 << 30;

/// Reads `requests.jsonl`, resolving each arrival with [`engine_arrival`]; with
/// [`VllmArrival::Client`], arrivals on another clock are then moved onto the engine clock by
/// [`client_clock_offset`], which is returned.
fn read_real_requests(
    path: &Path,
    arrival: VllmArrival,
) -> anyhow::Result<(Vec<RealTimes>, Option<f64>)> {
    let text = crate::paths::read_text_at_most(path, MAX_RUN_FILE_BYTES)
        .with_context(|| format!("reading {}", path.display()))?;
    let mut raw = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{} line {}", path.display(), i + 1);
        let r: RealRequest = serde_json::from_str(line).with_context(at)?;
        check_tokens(&r).with_context(at)?;
        let engine = engine_arrival(&r).with_context(at)?;
        raw.push((i + 1, r, engine));
    }
    if raw.is_empty() {
        bail!("{}: no requests", path.display());
    }
    let shift = match arrival {
        VllmArrival::Queued => None,
        VllmArrival::Client => client_clock_offset(&raw)
            .with_context(|| format!("{}: --vllm-arrival client", path.display()))?,
    };
    let offset = shift.map(|s| s.offset);
    let requests = raw
        .into_iter()
        .enumerate()
        .map(|(k, (line, r, engine))| {
            let times = RealTimes {
                served: Served {
                    id: r
                        .request_id
                        .as_deref()
                        .and_then(matching::trailing_id)
                        .unwrap_or(k as u64),
                    input: r.input_toks,
                    output: r.output_toks,
                },
                output_toks: r.output_toks,
                arrival: match (offset, r.arrival_time) {
                    (Some(offset), Some(arrival_time)) => arrival_time + offset,
                    _ => engine,
                },
                first_token: r.first_token_ts,
                last_token: r.last_token_ts,
            };
            let [ttft, tpot, latency] = times.samples_ms();
            check_request(ttft, tpot, latency)
                .map_err(|e| match shift {
                    Some(shift) => e.context(moved_by(shift, line)),
                    None => e,
                })
                .with_context(|| format!("{} line {line}", path.display()))?;
            Ok(times)
        })
        .collect::<anyhow::Result<_>>()?;
    Ok((requests, offset))
}

/// How `--vllm-arrival client` moves a run's `arrival_time`s onto the engine clock.
#[derive(Debug, Clone, Copy)]
struct ClockShift {
    /// Seconds added to each `arrival_time`.
    offset: f64,
    /// The line whose `queued_ts − arrival_time` it is (the smallest).
    line: usize,
}

/// How the arrival of the request on `line` was moved by `shift`: where its times fail
/// because another line's arrival is wrong, that line is the one to check.
fn moved_by(shift: ClockShift, line: usize) -> String {
    let whose = match shift.line == line {
        true => "its own".to_owned(),
        false => format!("line {}'s", shift.line),
    };
    format!(
        "arrival_time moved onto the engine clock by {} s, {whose} queued_ts − arrival_time \
         (the smallest of the file's)",
        shift.offset
    )
}

/// The shift onto the engine clock of a run whose `arrival_time`s are on another clock: the
/// smallest `queued_ts − arrival_time`, and the line that has it. `None` when the arrivals
/// already are on the engine clock (`engine` equals `arrival_time` for every request). Each
/// entry is `(line, request, its arrival per [`engine_arrival`])`.
fn client_clock_offset(raw: &[(usize, RealRequest, f64)]) -> anyhow::Result<Option<ClockShift>> {
    let on_engine_clock =
        |(_, r, engine): &&(usize, RealRequest, f64)| r.arrival_time == Some(*engine);
    match (
        raw.iter().find(on_engine_clock),
        raw.iter().find(|e| !on_engine_clock(e)),
    ) {
        (_, None) => return Ok(None),
        (Some((same, ..)), Some((other, ..))) => {
            bail!("`arrival_time` is on the engine clock on line {same} but not on line {other}")
        }
        (None, Some(_)) => {}
    }
    let mut shift = ClockShift {
        offset: f64::INFINITY,
        line: 0,
    };
    for &(line, ref r, _) in raw {
        let (Some(arrival), Some(queued)) = (r.arrival_time, r.queued_ts) else {
            bail!("line {line}: needs both `arrival_time` and `queued_ts`");
        };
        if queued - arrival < shift.offset {
            shift = ClockShift {
                offset: queued - arrival,
                line,
            };
        }
    }
    Ok(Some(shift))
}

/// The arrival on the clock of the token timestamps, per LLMServingSim's rule: `arrival_time`
/// when it is within [`SAME_CLOCK_MAX_GAP_S`] of both token timestamps, else `queued_ts` when it
/// is within that of either. Unlike LLMServingSim, which then falls back to `arrival_time`,
/// an arrival on neither clock is an error.
pub fn engine_arrival(r: &RealRequest) -> anyhow::Result<f64> {
    let near = |a: f64, b: f64| (a - b).abs() < SAME_CLOCK_MAX_GAP_S;
    if let Some(arrival) = r.arrival_time
        && near(arrival, r.first_token_ts)
        && near(arrival, r.last_token_ts)
    {
        return Ok(arrival);
    }
    match r.queued_ts {
        Some(queued) if near(queued, r.first_token_ts) || near(queued, r.last_token_ts) => {
            Ok(queued)
        }
        _ => bail!(
            "neither `arrival_time` nor `queued_ts` is on the clock of \
             `first_token_ts`/`last_token_ts` (within {SAME_CLOCK_MAX_GAP_S} s)"
        ),
    }
}

impl RealTimes {
    /// TTFT, TPOT (`None` for a request with one output token) and latency, ms.
    fn samples_ms(&self) -> [Option<f64>; 3] {
        let tpot = (self.output_toks > 1)
            .then(|| (self.last_token - self.first_token) / (self.output_toks - 1) as f64 * 1000.0);
        [
            Some((self.first_token - self.arrival) * 1000.0),
            tpot,
            Some((self.last_token - self.arrival) * 1000.0),
        ]
    }
}

/// TTFT, TPOT (requests with more than one output token) and latency of the real run, ms.
fn real_samples(requests: &[RealTimes]) -> Samples {
    let mut samples: Samples = Default::default();
    for r in requests {
        for (metric, value) in samples.iter_mut().zip(r.samples_ms()) {
            metric.extend(value);
        }
    }
    samples
}

/// Refuses the times of a request that no run can have, alike for both runs: a TTFT, TPOT or
/// latency (ms, `None` when there is none) that is negative or longer than [`MAX_RUN_S`], or
/// a first token after the end of the request.
fn check_request(ttft: Option<f64>, tpot: Option<f64>, latency: Option<f64>) -> anyhow::Result<()> {
    for (name, value) in [("TTFT", ttft), ("TPOT", tpot), ("latency", latency)] {
        if let Some(ms) = value {
            check_time(name, ms)?;
        }
    }
    if let (Some(ttft), Some(latency)) = (ttft, latency)
        && ttft > latency
    {
        bail!("TTFT {ttft} ms is longer than the latency {latency} ms");
    }
    Ok(())
}

/// Refuses token counts above what a request may have ([`MAX_TOKENS`], as in a dataset).
fn check_tokens(r: &RealRequest) -> anyhow::Result<()> {
    for (name, count) in [
        ("input_toks", r.input_toks),
        ("output_toks", Some(r.output_toks)),
    ] {
        if let Some(n) = count.filter(|&n| n > MAX_TOKENS) {
            bail!("{name} {n} is above the most a request may have ({MAX_TOKENS})");
        }
    }
    Ok(())
}

/// Refuses a time `ms` (named `name`) that is negative or longer than [`MAX_RUN_S`].
fn check_time(name: &str, ms: f64) -> anyhow::Result<()> {
    if !(0.0..=MAX_RUN_S * 1000.0).contains(&ms) {
        bail!("{name} {ms} ms is outside 0 to {MAX_RUN_S} s");
    }
    Ok(())
}

/// The real run's generation throughput with each request's tokens spread evenly from its
/// first to its last token, time measured from the earliest arrival.
pub fn spread_real_tokens(requests: &[RealTimes], path: &Path) -> anyhow::Result<Vec<(f64, f64)>> {
    let start = requests
        .iter()
        .map(|r| r.arrival)
        .fold(f64::INFINITY, f64::min);
    let mut counts = Vec::new();
    for r in requests {
        let gap = (r.last_token - r.first_token) / r.output_toks.saturating_sub(1).max(1) as f64;
        let token_at = |k: u64| r.first_token + k as f64 * gap - start;
        count_per_second(&mut counts, r.output_toks, token_at)
            .with_context(|| format!("{}: token timestamps", path.display()))?;
    }
    Ok(per_second_series(counts))
}

/// Adds the times `time_at(k)`, `k` in `0..n`, to `counts` (how many fall in each whole
/// second), as [`per_second`] counts them one by one. The times never decrease with `k` (a
/// request's tokens, evenly spread: each operation rounds monotonically), so each second's
/// last one is found by a binary search: the work grows with the seconds a request's tokens
/// fall in, not with its tokens.
fn count_per_second(
    counts: &mut Vec<u64>,
    n: u64,
    time_at: impl Fn(u64) -> f64,
) -> anyhow::Result<()> {
    let mut k = 0;
    while k < n {
        let t = time_at(k);
        let bucket = second_of(t)?;
        // The first token from `k` on at or past the next second (`n` if none).
        let next_second = (bucket + 1) as f64;
        let (mut lo, mut hi) = (k + 1, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            // (No NaN: a request's TTFT and latency were checked finite when it was read.)
            if time_at(mid) >= next_second {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        if bucket >= counts.len() {
            counts.resize(bucket + 1, 0);
        }
        counts[bucket] += lo - k;
        k = lo;
    }
    Ok(())
}

/// The whole second `t` falls in, refusing a time outside `0..MAX_RUN_S`.
fn second_of(t: f64) -> anyhow::Result<usize> {
    if !(0.0..MAX_RUN_S).contains(&t) {
        bail!("time {t} s is outside 0 to {MAX_RUN_S} s from the start of the run");
    }
    Ok(t as usize)
}

/// Reads `t` and `gen_throughput` of vLLM's `timeseries.csv`.
fn read_timeseries(path: &Path) -> anyhow::Result<Vec<(f64, f64)>> {
    let (mut reader, columns) = open_csv(path, &["t", "gen_throughput"])?;
    let mut series = Vec::new();
    for record in reader.records() {
        let record = record.with_context(|| format!("reading {}", path.display()))?;
        let [t, gen_throughput] = std::array::from_fn(|i| number(&record, columns[i]));
        series.push((
            t.with_context(|| field_at(path, &record, "t"))?,
            gen_throughput.with_context(|| field_at(path, &record, "gen_throughput"))?,
        ));
    }
    Ok(series)
}

/// Reads a simulator per-request CSV: TTFT, TPOT (zeros included) and latency in ms, and the
/// generation throughput rebuilt from each request's first token (arrival + TTFT) and ITLs.
/// The simulated run's samples, throughput series and, when the CSV has the `request id`,
/// `input` and `output` columns, its requests.
fn read_sim_csv(path: &Path) -> anyhow::Result<SimRun> {
    let (mut reader, columns) = open_csv(path, &SIM_COLUMNS)?;
    let header = reader.headers()?.clone();
    let find = |name: &str| header.iter().position(|h| h == name);
    let end_column = find("end_time");
    let id_columns = match (find("request id"), find("input"), find("output")) {
        (Some(id), Some(input), Some(output)) => Some([id, input, output]),
        _ => None,
    };
    let mut served = Vec::new();
    let mut samples: Samples = Default::default();
    let mut token_times_ns = Vec::new();
    for record in reader.records() {
        let record = record.with_context(|| format!("reading {}", path.display()))?;
        let value = |i: usize| {
            number(&record, columns[i]).with_context(|| field_at(path, &record, SIM_COLUMNS[i]))
        };
        let (arrival, latency, ttft, tpot) = (value(0)?, value(1)?, value(2)?, value(3)?);
        check_sim_row(&record, end_column, [arrival, latency, ttft, tpot])
            .with_context(|| format!("{} line {}", path.display(), line_of(&record)))?;
        if let Some([id, input, output]) = id_columns {
            let int = |c: usize, name: &str| -> anyhow::Result<u64> {
                let text = record.get(c).unwrap_or_default();
                text.trim()
                    .parse()
                    .with_context(|| field_at(path, &record, name))
            };
            served.push(Served {
                id: int(id, "request id")?,
                input: Some(int(input, "input")?),
                output: int(output, "output")?,
            });
        }
        samples[0].push(ttft / NS_PER_MS);
        samples[1].push(tpot / NS_PER_MS);
        samples[2].push(latency / NS_PER_MS);
        let mut t = arrival + ttft;
        token_times_ns.push(t);
        let itl = record.get(columns[4]).unwrap_or_default();
        for gap in parse_list(itl).with_context(|| field_at(path, &record, "ITL"))? {
            check_time("an ITL gap", gap / NS_PER_MS)
                .with_context(|| field_at(path, &record, "ITL"))?;
            t += gap;
            token_times_ns.push(t);
        }
    }
    if samples[0].is_empty() {
        bail!("{}: no requests", path.display());
    }
    let throughput = per_second(token_times_ns.into_iter().map(|ns| ns / 1e9))
        .with_context(|| format!("{}: token times", path.display()))?;
    Ok((samples, throughput, id_columns.map(|_| served)))
}

/// Checks a simulated request as a real one is checked ([`check_request`]), and its own
/// columns: an arrival from 0 to [`MAX_RUN_S`], an `end_time` (when the CSV has one) equal to
/// arrival + latency. `times` are `arrival`, `latency`, `TTFT` and `TPOT`, ns.
fn check_sim_row(
    record: &csv::StringRecord,
    end_column: Option<usize>,
    [arrival, latency, ttft, tpot]: [f64; 4],
) -> anyhow::Result<()> {
    check_time("arrival", arrival / NS_PER_MS)?;
    check_request(
        Some(ttft / NS_PER_MS),
        Some(tpot / NS_PER_MS),
        Some(latency / NS_PER_MS),
    )?;
    if let Some(column) = end_column {
        let end = number(record, column).context("column `end_time`")?;
        if (end - (arrival + latency)).abs() > END_TIME_TOLERANCE_NS {
            bail!("end_time {end} ns is not arrival + latency ({arrival} + {latency} ns)");
        }
    }
    Ok(())
}

/// The line of `record` in its file.
fn line_of(record: &csv::StringRecord) -> u64 {
    record.position().map_or(0, |p| p.line())
}

/// How far a simulated CSV's `end_time` may be from arrival + latency, ns (rounding of a
/// simulator that prints floats).
const END_TIME_TOLERANCE_NS: f64 = 1_000.0;

/// What [`read_sim_csv`] reads: samples, throughput series, requests (with their ids).
type SimRun = (Samples, Vec<(f64, f64)>, Option<Vec<Served>>);

/// Opens a CSV file with a header row; the index of each of `names` in it.
fn open_csv(path: &Path, names: &[&str]) -> anyhow::Result<(csv::Reader<File>, Vec<usize>)> {
    let mut reader =
        csv::Reader::from_path(path).with_context(|| format!("opening {}", path.display()))?;
    let header = reader
        .headers()
        .with_context(|| format!("reading the header of {}", path.display()))?
        .clone();
    let columns = names
        .iter()
        .map(|&name| match header.iter().position(|h| h == name) {
            Some(i) => Ok(i),
            None => bail!(
                "{}: no `{name}` column (header: {})",
                path.display(),
                header.iter().collect::<Vec<_>>().join(",")
            ),
        })
        .collect::<anyhow::Result<_>>()?;
    Ok((reader, columns))
}

/// Field `column` of `record` as a finite number.
fn number(record: &csv::StringRecord, column: usize) -> anyhow::Result<f64> {
    let text = record.get(column).unwrap_or_default();
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => bail!("not a number: {text:?}"),
    }
}

/// The location of one field for error messages: `<path> line <n>, column <name>`.
fn field_at(path: &Path, record: &csv::StringRecord, name: &str) -> String {
    let line = record.position().map_or(0, |p| p.line());
    format!("{} line {line}, column `{name}`", path.display())
}

/// A Python list repr of numbers, `[a, b, c]`.
pub fn parse_list(text: &str) -> anyhow::Result<Vec<f64>> {
    let Some(inner) = text
        .trim()
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
    else {
        bail!("not a list: {text:?}");
    };
    if inner.trim().is_empty() {
        return Ok(Vec::new());
    }
    inner
        .split(',')
        .map(|item| match item.trim().parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => bail!("not a number in the list: {item:?}"),
        })
        .collect()
}

/// Events per second in 1 s buckets of `times_s`, each labelled with its end (as vLLM's
/// timeseries are), with empty seconds as zeros.
pub fn per_second(times_s: impl Iterator<Item = f64>) -> anyhow::Result<Vec<(f64, f64)>> {
    let mut counts: Vec<u64> = Vec::new();
    for t in times_s {
        let bucket = second_of(t)?;
        if bucket >= counts.len() {
            counts.resize(bucket + 1, 0);
        }
        counts[bucket] += 1;
    }
    Ok(per_second_series(counts))
}

/// Counts per whole second as the series [`per_second`] returns: (end of the second, count).
fn per_second_series(counts: Vec<u64>) -> Vec<(f64, f64)> {
    counts
        .into_iter()
        .enumerate()
        .map(|(i, count)| ((i + 1) as f64, count as f64))
        .collect()
}
