//! `blis-cosim calibrate`: real vLLM runs of one GPU in, a hardware file out whose roofline
//! kernel constants are fitted to them (at most five, each within the range real GPUs have;
//! see [`fit`]). Each run is read and set up once ([`Rehearsal`]); the fit then simulates the
//! runs many times in memory. Runs given as held out are never fitted: their error before
//! and after is reported apart from the fit's residual, as the evidence of transfer.

pub mod distance;
pub mod fit;
pub mod meta;
mod report;

pub use fit::{SCALARS, Scalar, SearchLimits};
pub use meta::Recorded;

use crate::config::{Calibration, CalibrationRun, Dtype, Hardware, KernelSpec};
use crate::evaluation::sha256_hex;
use crate::latency::kernel_constants;
use crate::metrics::{Samples, VllmArrival, diff_table, real_run_samples};
use crate::runner::Rehearsal;
use crate::setup::{self, RunOptions};
use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use std::cell::RefCell;
use std::path::PathBuf;

/// Engine settings given on the command line; `None`: from the run's `meta.json`, else the
/// default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineFlags {
    pub max_num_seqs: Option<u32>,
    pub max_num_batched_tokens: Option<u32>,
    pub dtype: Option<Dtype>,
    pub kv_cache_fp8: Option<bool>,
    pub async_scheduling: Option<bool>,
}

/// One real run and the simulation that reproduces it (workload and deployment; its engine
/// settings come from [`EngineFlags`] and the run's `meta.json`).
#[derive(Debug, Clone)]
pub struct RealRun {
    /// The run's vLLM bench `requests.jsonl`.
    pub vllm: PathBuf,
    pub options: RunOptions,
}

/// What `calibrate` is asked to do.
#[derive(Debug, Clone)]
pub struct CalibrateOptions {
    /// The runs the constants are fitted to.
    pub fit: Vec<RealRun>,
    /// Runs only checked, never fitted.
    pub held_out: Vec<RealRun>,
    pub engine: EngineFlags,
    pub vllm_arrival: VllmArrival,
    /// The scalars to fit (keys of [`SCALARS`]); `None`: every one the fitted runs exercise.
    pub scalars: Option<Vec<String>>,
    /// The date written into `[calibrated]` (`YYYY-MM-DD`); `None`: today (UTC).
    pub date: Option<String>,
    pub limits: SearchLimits,
}

/// A fitted hardware file and the report of the fit.
#[derive(Debug, Clone)]
pub struct Calibrated {
    pub hardware: Hardware,
    /// The report, as printed (tables, fitted values with bounds and sensitivities).
    pub report: String,
}

/// A run read, checked and set up once.
struct Prepared {
    vllm: PathBuf,
    sha256: String,
    real: Samples,
    distribution: distance::RealDistribution,
    rehearsal: Rehearsal,
}

impl Prepared {
    fn new(run: &RealRun, options: &CalibrateOptions) -> anyhow::Result<Prepared> {
        let context = || format!("--vllm {}", run.vllm.display());
        let recorded = meta::read_beside(&run.vllm).with_context(context)?;
        let mut sim = run.options.clone();
        sim.engine = meta::engine(&options.engine, recorded.as_ref()).with_context(context)?;
        if sim.num_reqs.is_none() {
            sim.num_reqs = recorded.as_ref().and_then(|r| r.num_requests);
        }
        let config = setup::resolve(sim).with_context(context)?;
        if let Some(recorded) = &recorded {
            meta::check(&config, recorded).with_context(context)?;
        }
        let bytes = std::fs::read(&run.vllm).with_context(context)?;
        let real = real_run_samples(&run.vllm, options.vllm_arrival)?;
        let rehearsal = Rehearsal::new(config).with_context(context)?;
        Ok(Prepared {
            vllm: run.vllm.clone(),
            sha256: sha256_hex(&bytes),
            distribution: distance::RealDistribution::new(&real),
            real,
            rehearsal,
        })
    }

    /// The run simulated with `kernels`.
    fn simulate(&mut self, kernels: &KernelSpec) -> anyhow::Result<Samples> {
        self.rehearsal
            .simulate(kernels)
            .with_context(|| format!("simulating {}", self.vllm.display()))
    }

    /// `validate`'s Diff% table of the run simulated with `kernels`.
    fn table(&mut self, kernels: &KernelSpec) -> anyhow::Result<[[f64; 5]; 3]> {
        let sim = self.simulate(kernels)?;
        Ok(diff_table(&self.real, &sim))
    }

    fn hardware(&self) -> &Hardware {
        &self.rehearsal.config().instances[0].hardware
    }

    fn has_moe(&self) -> bool {
        self.rehearsal
            .config()
            .instances
            .iter()
            .any(|i| i.model.moe.is_some())
    }
}

/// The fit's residual, as the report and the file give it: the root mean square of every
/// Diff% number of every table (`validate`'s error; the search minimises [`objective`]).
pub fn rms(tables: &[[[f64; 5]; 3]]) -> f64 {
    let values: Vec<f64> = tables
        .iter()
        .flat_map(|t| t.iter().flatten())
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    if values.is_empty() {
        return f64::INFINITY;
    }
    (values.iter().map(|v| v * v).sum::<f64>() / values.len() as f64).sqrt()
}

/// The fit's objective at `kernels`: the distance of `runs`' simulated distributions from
/// their real ones (see [`distance`]).
fn objective(runs: &mut [Prepared], kernels: &KernelSpec) -> anyhow::Result<f64> {
    let squared = runs
        .iter_mut()
        .map(|r| {
            let sim = r.simulate(kernels)?;
            Ok(r.distribution.squared_distances(&sim))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(distance::rms(&squared))
}

/// The tables of `runs` simulated with `kernels`.
fn tables(runs: &mut [Prepared], kernels: &KernelSpec) -> anyhow::Result<Vec<[[f64; 5]; 3]>> {
    runs.iter_mut().map(|r| r.table(kernels)).collect()
}

/// Fits the constants to `options.fit` and checks them on `options.held_out`.
pub fn calibrate(options: &CalibrateOptions) -> anyhow::Result<Calibrated> {
    if options.fit.is_empty() {
        bail!("--vllm: give at least one real run to fit");
    }
    let mut fitted_runs = prepare(&options.fit, options)?;
    let mut held_out = prepare(&options.held_out, options)?;
    let base = fitted_runs[0].hardware().clone();
    for run in fitted_runs.iter().chain(&held_out) {
        for inst in &run.rehearsal.config().instances {
            if !inst.hardware.name.eq_ignore_ascii_case(&base.name) {
                bail!(
                    "--vllm {}: runs on {} and {}: a hardware file describes one GPU; \
                     calibrate each GPU on its own runs",
                    run.vllm.display(),
                    base.name,
                    inst.hardware.name
                );
            }
        }
    }
    let start = kernel_constants(&base);
    let before = tables(&mut fitted_runs, &start)?;
    let start_value = rms(&before);
    let scalars = chosen_scalars(options, &mut fitted_runs, &start, &before)?;
    let found = {
        let starts = fit::starts(&scalars.fitted, &start, fit::EXTRA_STARTS);
        let bar = progress_bar(options.limits.max_evaluations * starts.len());
        let runs = RefCell::new(&mut fitted_runs);
        let mut objective = |k: &KernelSpec| objective(&mut runs.borrow_mut(), k);
        let mut response_at = |k: &KernelSpec| {
            if *k == start {
                return Ok(fit::Response {
                    effects: scalars.effects.clone(),
                    numbers: numbers(&before),
                });
            }
            response(&scalars.fitted, &mut runs.borrow_mut(), k)
        };
        let found = fit::search_from_starts(
            &scalars.fitted,
            &starts,
            options.limits,
            &mut response_at,
            &mut objective,
            &mut || bar.inc(1),
        )?;
        bar.finish_and_clear();
        found
    };
    let after = tables(&mut fitted_runs, &found.kernels)?;
    let residual = rms(&after);
    let sensitivities = sensitivities(&scalars.fitted, &found, residual, &mut fitted_runs)?;
    let held_before = tables(&mut held_out, &start)?;
    let held_after = tables(&mut held_out, &found.kernels)?;
    let mut hardware = base.clone();
    for s in &scalars.fitted {
        s.set(&mut hardware.kernels, s.get(&found.kernels).unwrap_or(s.lo));
    }
    hardware.calibrated = Some(Calibration {
        date: options.date.clone().unwrap_or_else(today_utc),
        base: base.name.clone(),
        fitted: scalars
            .fitted
            .iter()
            .map(|s| format!("kernels.{}", s.key))
            .collect(),
        residual_pct: round3(residual),
        initial_residual_pct: round3(start_value),
        vllm_arrival: arrival_name(options.vllm_arrival).to_owned(),
        runs: fitted_runs
            .iter()
            .map(|r| CalibrationRun {
                path: r.vllm.display().to_string(),
                sha256: r.sha256.clone(),
                requests: r.real[0].len() as u64,
            })
            .collect(),
    });
    let report = report::render(&report::Report {
        start: &start,
        found: &found,
        scalars: &scalars,
        sensitivities: &sensitivities,
        fitted: report::Runs::new(&fitted_runs, &before, &after),
        held_out: report::Runs::new(&held_out, &held_before, &held_after),
    });
    Ok(Calibrated { hardware, report })
}

fn prepare(runs: &[RealRun], options: &CalibrateOptions) -> anyhow::Result<Vec<Prepared>> {
    runs.iter().map(|r| Prepared::new(r, options)).collect()
}

/// The scalars a fit moves, and those it leaves (with why).
pub(crate) struct Chosen {
    fitted: Vec<Scalar>,
    /// How the runs' numbers move when each fitted scalar moves one width.
    effects: Vec<Vec<f64>>,
    left: Vec<(Scalar, String)>,
}

/// The share of a constant's effect on the runs' Diff% numbers that the constants chosen
/// before it cannot produce, below which the runs cannot tell it from them (its effect is
/// then more than 97% alike theirs: a fit could trade one for the other along a valley and
/// end a few per cent from the truth with the same residual).
const MIN_OWN_EFFECT: f64 = 0.25;

/// The scalars asked for (all by default, the fused-MoE one only when a fitted run has a MoE
/// model), less those that do not move the runs' numbers at all (the runs do not exercise
/// them: a fit would leave them anywhere) and those the runs cannot tell apart from a
/// constant with a larger effect ([`identifiable`]).
fn chosen_scalars(
    options: &CalibrateOptions,
    runs: &mut [Prepared],
    start: &KernelSpec,
    before: &[[[f64; 5]; 3]],
) -> anyhow::Result<Chosen> {
    let asked: Vec<Scalar> = match &options.scalars {
        Some(keys) => keys
            .iter()
            .map(|k| {
                fit::scalar(k).with_context(|| {
                    let known: Vec<&str> = SCALARS.iter().map(|s| s.key).collect();
                    format!("--fit {k}: no such constant (known: {})", known.join(", "))
                })
            })
            .collect::<anyhow::Result<_>>()?,
        None => SCALARS.to_vec(),
    };
    let moe = runs.iter().any(Prepared::has_moe);
    let mut chosen = Chosen {
        fitted: Vec::new(),
        effects: Vec::new(),
        left: Vec::new(),
    };
    let mut exercised = Vec::new();
    for s in SCALARS {
        if !asked.contains(&s) {
            chosen.left.push((s, "not asked for (--fit)".into()));
            continue;
        }
        if s.key == "moe_memory_efficiency" && !moe {
            chosen
                .left
                .push((s, "no fitted run has a MoE model".into()));
            continue;
        }
        let (effect, per_width) = probe(&s, runs, start, before)?;
        if effect.iter().all(|d| *d == 0.0) {
            chosen
                .left
                .push((s, "the fitted runs do not depend on it".into()));
        } else {
            exercised.push((s, effect, per_width));
        }
    }
    identifiable(exercised, &mut chosen);
    if chosen.fitted.is_empty() {
        bail!("nothing to fit: the runs depend on none of the constants asked for");
    }
    Ok(chosen)
}

/// How the runs' Diff% numbers (`before` at `at`) move when `s` moves 5% of its range from
/// `at` (inwards at a bound), and the factor that scales that move to one width up: negative
/// when the move was down, so that a scaled effect is always that of a move up (a response
/// measured at the upper bound once had its sign reversed there, and its Gauss–Newton step
/// pushed that constant further into the bound).
fn probe(
    s: &Scalar,
    runs: &mut [Prepared],
    at: &KernelSpec,
    before: &[[[f64; 5]; 3]],
) -> anyhow::Result<(Vec<f64>, f64)> {
    let now = s.get(at).unwrap_or(s.lo);
    let mut moved = at.clone();
    s.set(
        &mut moved,
        s.round(now + 0.05 * (s.hi - s.lo) * direction_inside(s, now)),
    );
    let effect = effect(before, &tables(runs, &moved)?);
    let step = s.get(&moved).unwrap_or(s.lo) - now;
    Ok((effect, s.width / step))
}

/// How the runs' Diff% numbers respond at `at` to each of `scalars` (what the search's
/// axes and Gauss–Newton step follow from there).
fn response(
    scalars: &[Scalar],
    runs: &mut [Prepared],
    at: &KernelSpec,
) -> anyhow::Result<fit::Response> {
    let before = tables(runs, at)?;
    let effects = scalars
        .iter()
        .map(|s| {
            let (effect, per_width) = probe(s, runs, at, &before)?;
            Ok(effect.iter().map(|x| x * per_width).collect())
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(fit::Response {
        effects,
        numbers: numbers(&before),
    })
}

/// Every Diff% number of `tables`, in [`effect`]'s order (0 where one does not exist).
fn numbers(tables: &[[[f64; 5]; 3]]) -> Vec<f64> {
    let flat = tables.iter().flatten().flatten();
    flat.map(|v| if v.is_finite() { *v } else { 0.0 }).collect()
}

/// How every Diff% number of the runs moved from `before` to `after` (0 where one of the
/// two does not exist).
fn effect(before: &[[[f64; 5]; 3]], after: &[[[f64; 5]; 3]]) -> Vec<f64> {
    let flat = |t: &[[[f64; 5]; 3]]| t.iter().flatten().flatten().copied().collect::<Vec<_>>();
    let (b, a) = (flat(before), flat(after));
    b.iter()
        .zip(&a)
        .map(|(b, a)| if (a - b).is_finite() { a - b } else { 0.0 })
        .collect()
}

/// Chooses, among the constants the runs exercise (each with its `effect` on their numbers
/// for a step of 5% of its range), those the runs identify jointly: in order of decreasing
/// effect, a constant is fitted when at least [`MIN_OWN_EFFECT`] of its effect is its own
/// (orthogonal to the effects of those fitted before it); the others keep their measured
/// values and the report says which constant they cannot be told from.
fn identifiable(exercised: Vec<(Scalar, Vec<f64>, f64)>, chosen: &mut Chosen) {
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let mut order: Vec<usize> = (0..exercised.len()).collect();
    order.sort_by(|&i, &j| norm(&exercised[j].1).total_cmp(&norm(&exercised[i].1)));
    let mut basis: Vec<Vec<f64>> = Vec::new();
    let mut fitted: Vec<&str> = Vec::new();
    for i in order {
        let (s, e, per_width) = &exercised[i];
        let mut own = e.clone();
        for b in &basis {
            let along: f64 = own.iter().zip(b).map(|(x, y)| x * y).sum();
            own.iter_mut().zip(b).for_each(|(x, y)| *x -= along * y);
        }
        let (length, share) = (norm(&own), norm(&own) / norm(e));
        if share >= MIN_OWN_EFFECT {
            basis.push(own.iter().map(|x| x / length).collect());
            fitted.push(s.key);
            chosen.fitted.push(*s);
            chosen
                .effects
                .push(e.iter().map(|x| x * per_width).collect());
        } else {
            let why = format!(
                "these runs cannot tell it from {}: only {:.0}% of its effect on their \
                 numbers is its own, so it keeps its measured value (add a run that \
                 exercises it differently)",
                fitted.join(" and "),
                100.0 * share
            );
            chosen.left.push((*s, why));
        }
    }
    let rank = |s: &Scalar| SCALARS.iter().position(|t| t == s);
    let mut fitted: Vec<(Scalar, Vec<f64>)> = chosen
        .fitted
        .drain(..)
        .zip(chosen.effects.drain(..))
        .collect();
    fitted.sort_by_key(|(s, _)| rank(s));
    (chosen.fitted, chosen.effects) = fitted.into_iter().unzip();
}

/// +1 when a step up stays within `s`'s bounds from `value`, else −1.
fn direction_inside(s: &Scalar, value: f64) -> f64 {
    if value + 0.05 * (s.hi - s.lo) <= s.hi {
        1.0
    } else {
        -1.0
    }
}

/// Per fitted scalar: the change of the residual (`validate`'s RMS, `residual` at the fitted
/// values), in percentage points, when it moves 1% up (or down at its upper bound) from the
/// fitted value.
fn sensitivities(
    scalars: &[Scalar],
    found: &fit::Found,
    residual: f64,
    runs: &mut [Prepared],
) -> anyhow::Result<Vec<f64>> {
    scalars
        .iter()
        .map(|s| {
            let v = s.get(&found.kernels).unwrap_or(s.lo);
            let moved = if v * 1.01 <= s.hi { v * 1.01 } else { v * 0.99 };
            let mut k = found.kernels.clone();
            s.set(&mut k, moved);
            Ok(rms(&tables(runs, &k)?) - residual)
        })
        .collect()
}

fn progress_bar(len: usize) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    if let Ok(style) =
        ProgressStyle::with_template("calibrating {bar:40} {pos}/{len} simulations ({elapsed})")
    {
        bar.set_style(style);
    }
    bar
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// The `--vllm-arrival` value of `arrival`.
pub fn arrival_name(arrival: VllmArrival) -> &'static str {
    match arrival {
        VllmArrival::Queued => "queued",
        VllmArrival::Client => "client",
    }
}

/// Today's date, UTC, `YYYY-MM-DD`.
fn today_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    civil_date(i64::try_from(secs / 86_400).unwrap_or(0))
}

/// The proleptic Gregorian date `days` after 1970-01-01 (H. Hinnant's `civil_from_days`).
pub fn civil_date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The hardware file of `calibrated`, as written: a header, then the TOML.
pub fn hardware_file(calibrated: &Hardware) -> anyhow::Result<String> {
    let body = toml::to_string(calibrated).context("writing the hardware file")?;
    Ok(format!(
        "# {} calibrated by `blis-cosim calibrate`: [kernels] holds the fitted roofline \
         constants,\n# [calibrated] the runs they were fitted to. Use it with --hardware \
         (or a cluster config's \"hardware\").\n{body}",
        calibrated.name
    ))
}
