//! BLIS's multi-period ServeGen conversion (`servegen_data` with `window_duration_secs` or
//! `drain_timeout_secs`; BLIS's `blis convert servegen`): a ServeGen directory read as three
//! periods of five SLO-class cohorts.
//!
//! Every chunk's active rows are read over the whole trace (as [`super::servegen`] reads
//! them). Each period of day 1 — midnight (0:00), morning (8:00), afternoon (14:00) — picks
//! one of its first three 600 s windows at random (the seeded `servegen_periods` ChaCha
//! stream, so the pick differs from BLIS's Go `math/rand` for the same seed); a chunk joins
//! the period when it has an active row at that time of day on any day. A period's chunks
//! are shuffled (same stream) and dealt round-robin to `critical`, `standard`, `batch`,
//! `sheddable`, `background`. Each class's chunks make cohort `<period>-<class>` (cohorts in
//! period order, then class names sorted), whose members — one per chunk — are active for
//! one window `[p × (W + D), p × (W + D) + W)` s (period `p` = 0, 1, 2; `W` the window length,
//! default 600 s; `D` the drain gap, default 0 s, 180 s when negative, as BLIS) and share the
//! cohort's rate: per chunk, the mean rate of its rows at the picked time of day, summed. The
//! lengths are log-normal: per chunk, BLIS's fit (the PDF's mean and standard deviation of
//! ln tokens) of every dataset entry at the time of day of the entry at or before the picked
//! window, averaged, then averaged over the chunks (BLIS's normal fallback, 512 ± 128 and
//! 128 ± 32 tokens, when none fits). The arrival process is the majority of the rows'
//! patterns (Weibull if more rows are Weibull than Gamma, else Gamma) with the rows' mean
//! fitted shape, or the shape of their mean cv (Poisson for a Gamma shape below 0.01). A
//! cohort with rate 0 is left out.

use super::arrival::ArrivalError;
use super::cohort::CohortSpec;
use super::dist::LengthDist;
use super::servegen::{
    Entry, Row, ServeGenClients, Span, WINDOW_S, active_rows, parse_pdf_counts, read_dataset,
    sorted_chunks,
};
use super::servegen_error::ServeGenError;
use super::window::{WindowParams, window_arrival_process};
use super::{ArrivalProcess, ClientSpec, Lifecycle, SloClass};
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The three periods of day 1: name and the start of their first window, s.
const PERIODS: [(&str, i64); 3] = [("midnight", 0), ("morning", 28_800), ("afternoon", 50_400)];

/// The SLO classes chunks are dealt to, in dealing order.
const CLASSES: [(&str, SloClass); 5] = [
    ("critical", SloClass::Critical),
    ("standard", SloClass::Standard),
    ("batch", SloClass::Batch),
    ("sheddable", SloClass::Sheddable),
    ("background", SloClass::Background),
];

const DAY_S: i64 = 86_400;

/// The period layout: window length and drain gap, s.
#[derive(Debug, Clone, Copy)]
pub(super) struct Periods {
    window_s: u64,
    drain_s: u64,
}

/// One chunk with an active row at a picked window: its dataset entries at the times of day
/// the picked windows fit from, and its active rows at the picked times of day.
pub struct Chunk {
    /// The dataset file the entries come from.
    pub dataset: PathBuf,
    /// Dataset entries by time of day, s.
    pub entries: BTreeMap<i64, Entry>,
    /// Active rows at the picked times of day.
    pub rows: Vec<Row>,
}

/// Seconds since midnight of a row's start, as BLIS compares them (whole seconds).
fn time_of_day(row: &Row) -> i64 {
    ((row.start_s * 1e6) as i64 / 1_000_000) % DAY_S
}

impl Periods {
    /// BLIS's defaults: a window length ≤ 0 or unset is 600 s; a negative drain is 180 s, an
    /// unset one 0 s.
    pub(super) fn new(window_s: Option<i64>, drain_s: Option<i64>) -> Periods {
        let window_s = window_s.filter(|&w| w > 0).unwrap_or(600) as u64;
        let drain_s = match drain_s.unwrap_or(0) {
            d if d < 0 => 180,
            d => d as u64,
        };
        Periods { window_s, drain_s }
    }

    /// The cohorts' members read from `dir`, windows picked and chunks dealt with `seed`.
    pub(super) fn load(self, dir: &Path, seed: i64) -> Result<ServeGenClients, ServeGenError> {
        let key = xxhash_rust::xxh3::xxh3_64_with_seed(b"servegen_periods", seed as u64);
        let mut rng = ChaCha8Rng::seed_from_u64(key);
        let picked: Vec<i64> = PERIODS
            .iter()
            .map(|&(_, start)| start + rng.random_range(0..3i64) * WINDOW_S as i64)
            .collect();
        let chunks = read_chunks(dir, &picked)?;
        let mut clients = Vec::new();
        for (p, &window) in picked.iter().enumerate() {
            let mut members: Vec<&Chunk> = chunks
                .iter()
                .filter(|c| c.rows.iter().any(|r| time_of_day(r) == window))
                .collect();
            members.shuffle(&mut rng);
            let mut classes: Vec<usize> = (0..CLASSES.len()).collect();
            classes.sort_by_key(|&k| CLASSES[k].0);
            for k in classes {
                let dealt: Vec<&Chunk> = members.iter().skip(k).step_by(5).copied().collect();
                if let Some(cohort) = self.cohort(p, k, &dealt, window)? {
                    cohort.expand(&mut clients);
                }
            }
        }
        if clients.is_empty() {
            return Err(ServeGenError::NoPositiveRate {
                dir: dir.to_owned(),
                picked,
            });
        }
        Ok(ServeGenClients {
            clients,
            reasoning: false,
            multimodal: false,
        })
    }

    /// Cohort `<period>-<class>` of the chunks dealt to class `k` of period `p` at the
    /// picked `window` (s since midnight), or `None` when it has no chunk or no rate.
    fn cohort(
        self,
        p: usize,
        k: usize,
        chunks: &[&Chunk],
        window: i64,
    ) -> Result<Option<CohortSpec>, ServeGenError> {
        let rate: f64 = chunks.iter().map(|c| mean_rate(c, window)).sum();
        if chunks.is_empty() || rate <= 0.0 {
            return Ok(None);
        }
        let id = format!("{}-{}", PERIODS[p].0, CLASSES[k].0);
        let (input, output) = cohort_lengths(chunks, window)?;
        let arrival =
            cohort_arrival(chunks, window).map_err(|source| ServeGenError::CohortArrival {
                id: id.clone(),
                source,
            })?;
        let population = chunks.len() as u32;
        let start_us = p as u64 * (self.window_s + self.drain_s) * 1_000_000;
        let params = vec![WindowParams {
            trace_rate: Some(rate / f64::from(population)),
            ..WindowParams::default()
        }];
        let lifecycle =
            Lifecycle::with_params(&[(start_us, start_us + self.window_s * 1_000_000)], params)
                .map_err(|source| ServeGenError::CohortLifecycle {
                    id: id.clone(),
                    source,
                })?;
        let template = ClientSpec {
            slo_class: Some(CLASSES[k].1),
            streaming: 1.0,
            lifecycle: Some(lifecycle),
            ..ClientSpec::of_requests(id.clone(), arrival, input, output)
        };
        Ok(Some(CohortSpec {
            id,
            population,
            per_member_prefix: false,
            template,
        }))
    }
}

/// Every chunk of `dir` with an active row at a `picked` time of day, in trace-name order,
/// keeping only what the cohorts read. ServeGen's reasoning data is refused (BLIS converts
/// it into one reasoning window instead).
fn read_chunks(dir: &Path, picked: &[i64]) -> Result<Vec<Chunk>, ServeGenError> {
    let open = Span {
        start: 0.0,
        end: 0.0,
    };
    let mut chunks = Vec::new();
    for (name, id) in sorted_chunks(dir)? {
        let dataset = dir.join(format!("chunk-{id}-dataset.json"));
        let mut reasoning = false;
        let mut entries = read_dataset(&dataset, open, &mut reasoning)?;
        let refused = match (reasoning, entries.values().any(|e| e.media.is_some())) {
            (true, _) => Some("reasoning data (reason_ratio)"),
            (_, true) => Some("multimodal data (text_tokens, image_tokens, ...)"),
            _ => None,
        };
        if let Some(what) = refused {
            return Err(ServeGenError::NoPeriods { dataset, what });
        }
        let mut rows = Vec::new();
        active_rows(&dir.join(name), &entries, open, |_, row, _, _| {
            if picked.contains(&time_of_day(&row)) {
                rows.push(row);
            }
            Ok(())
        })?;
        let fitted: Vec<i64> = picked
            .iter()
            .filter_map(|&w| entries.range(..=w).next_back().map(|(t, _)| t % DAY_S))
            .collect();
        entries.retain(|t, _| fitted.contains(&(t % DAY_S)));
        if !rows.is_empty() {
            chunks.push(Chunk {
                dataset,
                entries,
                rows,
            });
        }
    }
    Ok(chunks)
}

/// A chunk's mean rate over its rows at time of day `window` (0 when it has none).
fn mean_rate(chunk: &Chunk, window: i64) -> f64 {
    let rates: Vec<f64> = chunk
        .rows
        .iter()
        .filter(|r| time_of_day(r) == window)
        .map(|r| r.rate)
        .collect();
    match rates.is_empty() {
        true => 0.0,
        false => rates.iter().sum::<f64>() / rates.len() as f64,
    }
}

/// Log-normal (µ, σ) of prompt and output lengths, summed over fitted chunks, and their count.
#[derive(Default)]
struct FitSum {
    input: (f64, f64),
    output: (f64, f64),
    chunks: u32,
}

/// The cohort's prompt and output lengths (see the module doc).
fn cohort_lengths(
    chunks: &[&Chunk],
    window: i64,
) -> Result<(LengthDist, LengthDist), ServeGenError> {
    let mut sum = FitSum::default();
    for chunk in chunks {
        chunk_fit(chunk, window, &mut sum)?;
    }
    if sum.chunks == 0 {
        return Ok((
            LengthDist::gaussian_tokens(512.0, 128.0, 1.0, 32_768.0),
            LengthDist::gaussian_tokens(128.0, 32.0, 1.0, 32_768.0),
        ));
    }
    let n = f64::from(sum.chunks);
    let dist = |(mu, sigma): (f64, f64)| {
        LengthDist::lognormal_tokens(mu / n, sigma / n).map_err(ServeGenError::CohortLengths)
    };
    Ok((dist(sum.input)?, dist(sum.output)?))
}

/// Adds one chunk's fit to `sum`: the mean over its dataset entries at the time of day of
/// the entry at or before `window` (BLIS counts an entry when its output PDF fits).
fn chunk_fit(chunk: &Chunk, window: i64, sum: &mut FitSum) -> Result<(), ServeGenError> {
    let Some((&nearest, _)) = chunk.entries.range(..=window).next_back() else {
        return Ok(());
    };
    let (mut input, mut output, mut count) = ((0.0, 0.0), (0.0, 0.0), 0u32);
    for (stamp, entry) in &chunk.entries {
        if stamp % DAY_S != nearest % DAY_S {
            continue;
        }
        let fit = |field: &str, text: &str| {
            parse_pdf_counts(text)
                .map(|bins| fit_lognormal(&bins))
                .map_err(|problem| ServeGenError::Pdf {
                    dataset: chunk.dataset.clone(),
                    stamp: *stamp,
                    field: field.to_owned(),
                    problem: Box::new(problem),
                })
        };
        if let Some((mu, sigma)) = fit("input_tokens", &entry.input)? {
            input = (input.0 + mu, input.1 + sigma);
        }
        if let Some((mu, sigma)) = fit("output_tokens", &entry.output)? {
            output = (output.0 + mu, output.1 + sigma);
            count += 1;
        }
    }
    if count > 0 {
        let n = f64::from(count);
        sum.input = (sum.input.0 + input.0 / n, sum.input.1 + input.1 / n);
        sum.output = (sum.output.0 + output.0 / n, sum.output.1 + output.1 / n);
        sum.chunks += 1;
    }
    Ok(())
}

/// BLIS's log-normal fit of a length PDF: the probability-weighted mean µ and standard
/// deviation σ of ln(tokens) over counts ≥ 1; `None` when no such count has probability.
pub fn fit_lognormal(bins: &[(u32, f64)]) -> Option<(f64, f64)> {
    let mut sorted: Vec<(u32, f64)> = bins.iter().copied().filter(|b| b.0 > 0).collect();
    sorted.sort_by_key(|b| b.0);
    let (mut mass, mut sum_ln, mut sum_ln2) = (0.0, 0.0, 0.0);
    for (tokens, p) in sorted.into_iter().filter(|b| b.1 > 0.0) {
        let ln = f64::from(tokens).ln();
        mass += p;
        sum_ln += p * ln;
        sum_ln2 += p * ln * ln;
    }
    if mass <= 0.0 {
        return None;
    }
    let mu = sum_ln / mass;
    let variance = (sum_ln2 / mass - mu * mu).max(0.0);
    Some((mu, variance.sqrt()))
}

/// The cohort's arrival process (see the module doc).
pub fn cohort_arrival(chunks: &[&Chunk], window: i64) -> Result<ArrivalProcess, ArrivalError> {
    let (mut cv, mut shape, mut scale, mut n) = (0.0, 0.0, 0.0, 0u32);
    let (mut gamma, mut weibull) = (0u32, 0u32);
    let rows = chunks.iter().flat_map(|c| c.rows.iter());
    for row in rows.filter(|r| time_of_day(r) == window) {
        n += 1;
        let shaped = match row.pattern.as_str() {
            "gamma" => {
                gamma += 1;
                true
            }
            "weibull" => {
                weibull += 1;
                true
            }
            _ => false,
        };
        if shaped && row.cv > 0.0 {
            cv += row.cv;
        }
        if let Some((k, s)) = row.fitted.filter(|_| shaped) {
            shape += k;
            scale += s;
        }
    }
    let n = f64::from(n.max(1));
    let (cv, shape, scale) = (cv / n, shape / n, scale / n);
    let process = if weibull > gamma { "weibull" } else { "gamma" };
    if shape > 0.0 && scale > 0.0 {
        return window_arrival_process(process, None, Some(shape));
    }
    let cv = if cv > 0.0 { cv } else { 1.0 };
    if process == "gamma" && 1.0 / (cv * cv) < 0.01 {
        return Ok(ArrivalProcess::Poisson);
    }
    window_arrival_process(process, Some(cv), None)
}
