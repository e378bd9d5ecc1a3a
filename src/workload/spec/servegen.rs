//! BLIS's `servegen_data`: a ServeGen data directory (Alibaba's ServeGen, `data/language/*`,
//! `data/reason/*`, `data/multimodal/*`) read as clients, one per chunk, as BLIS's per-chunk
//! conversion builds them (or, with `window_duration_secs` / `drain_timeout_secs`, as BLIS's
//! multi-period cohorts: [`super::servegen_periods`]).
//!
//! A chunk is `chunk-<id>-trace.csv` (rows `start_s,rate,cv,pattern,shape,scale`, one per
//! 600 s window: the chunk's request rate, the burstiness and the fitted Gamma or Weibull
//! gap distribution; an empty pattern is Poisson) and `chunk-<id>-dataset.json` (per time
//! stamp, every 6 hours, `input_tokens` and `output_tokens` length PDFs written as Python
//! dicts, `"{224: 0.0003, ...}"`). Chunk `<id>` becomes client `servegen-chunk-<id>` (tenant
//! `chunk-<id>`, SLO class `standard`, streaming) with one lifecycle window per trace row of
//! positive rate inside the span that has a dataset entry at or before it: the window's
//! `trace_rate` is the row's rate, its arrival process the row's (the fitted shape when
//! given, else the cv), its lengths the nearest preceding dataset entry's PDFs, sampled as
//! they are (BLIS fits a log-normal to them; ServeGen's own generator samples them). The
//! windows are shifted so that the earliest starts at 0 and the spec is in absolute-rate
//! mode. `time_window` picks day 1's `midnight` (0:00-0:30), `morning` (8:00-8:30) or
//! `afternoon` (14:00-14:30); `span_start` and `span_end` pick rows by start, in seconds (as
//! BLIS's code compares them). Trace files are read line by line.
//!
//! Multimodal data (entries of `text_tokens`, `output_tokens`, and `<m>_tokens` / `<m>_count`
//! for image, audio and video), which BLIS cannot read, gives each window multimodal prompts
//! as ServeGen's `construct.py` draws them: text tokens plus, per modality, a drawn count of
//! items each of drawn tokens, all counted into the prompt.

use super::arrival::ArrivalError;
use super::dist::{CountDist, LengthDist};
use super::extras::Multimodal;
use super::servegen_error::{EntryProblem, PdfError, RowProblem, ServeGenError};
use super::servegen_periods::Periods;
use super::window::{WindowParams, WindowSpans, window_arrival_process};
use super::{ArrivalProcess, ClientSpec, Lifecycle, SloClass};
use crate::workload::MAX_TOKENS;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The `servegen_data` block.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServeGen {
    path: PathBuf,
    #[serde(default)]
    time_window: Option<String>,
    #[serde(default)]
    span_start: Option<i64>,
    #[serde(default)]
    span_end: Option<i64>,
    /// BLIS's multi-period conversion: each period's length, s (see [`super::servegen_periods`]).
    #[serde(default)]
    window_duration_secs: Option<i64>,
    /// BLIS's multi-period conversion: the gap after each period, s.
    #[serde(default)]
    drain_timeout_secs: Option<i64>,
}

/// The clients of a ServeGen directory.
pub(super) struct ServeGenClients {
    pub(super) clients: Vec<ClientSpec>,
    /// Whether the data is ServeGen's reasoning data (`reason_ratio` PDFs, read and unused).
    pub(super) reasoning: bool,
    /// Whether the data is ServeGen's multimodal data (`text_tokens`, `image_tokens`, ...).
    pub(super) multimodal: bool,
}

/// A ServeGen window's length, s.
pub(super) const WINDOW_S: f64 = 600.0;

/// Rows picked by start time, s: `[start, end)`, an unset bound (0) open.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    /// Start, s.
    pub start: f64,
    /// End, s (0: open).
    pub end: f64,
}

impl Span {
    fn contains(&self, t: f64) -> bool {
        t >= self.start && (self.end <= 0.0 || t < self.end)
    }
}

/// An error: (field path under `servegen_data`, message).
impl RawServeGen {
    /// Reads the directory: one client per chunk with an active window, in the order of the
    /// trace file names (as BLIS sorts them); with `window_duration_secs` or
    /// `drain_timeout_secs`, BLIS's multi-period cohorts instead, picked with `seed`.
    pub(super) fn load(self, seed: i64) -> Result<ServeGenClients, ServeGenError> {
        if self.window_duration_secs.is_some() || self.drain_timeout_secs.is_some() {
            return self.load_periods(seed);
        }
        let span = self.span()?;
        let dir = &self.path;
        let traces = sorted_chunks(dir)?;
        let mut out = ServeGenClients {
            clients: Vec::new(),
            reasoning: false,
            multimodal: false,
        };
        for (name, id) in &traces {
            let dataset = dir.join(format!("chunk-{id}-dataset.json"));
            let entries = read_dataset(&dataset, span, &mut out.reasoning)?;
            out.multimodal |= entries.values().any(|e| e.media.is_some());
            let client = chunk_client(id, &dir.join(name), &entries, span)?;
            out.clients.extend(client);
        }
        if out.clients.is_empty() {
            return Err(ServeGenError::NoActiveWindow { dir: dir.clone() });
        }
        shift_to_zero(&mut out.clients);
        Ok(out)
    }

    /// BLIS's multi-period conversion of the directory (no `time_window` or span with it).
    fn load_periods(self, seed: i64) -> Result<ServeGenClients, ServeGenError> {
        let single = [
            ("time_window", self.time_window.is_some()),
            ("span_start", self.span_start.is_some()),
            ("span_end", self.span_end.is_some()),
        ];
        if let Some(&(field, _)) = single.iter().find(|(_, given)| *given) {
            return Err(ServeGenError::SinglePeriodField { field });
        }
        let periods = Periods::new(self.window_duration_secs, self.drain_timeout_secs);
        periods.load(&self.path, seed)
    }

    /// The span of rows to read: `time_window`'s, else `span_start` / `span_end`.
    fn span(&self) -> Result<Span, ServeGenError> {
        let bound = |field, v: Option<i64>| match v {
            Some(s) if s < 0 => Err(ServeGenError::NegativeSpan { field, value: s }),
            v => Ok(v.unwrap_or(0) as f64),
        };
        let (start, end) = (
            bound("span_start", self.span_start)?,
            bound("span_end", self.span_end)?,
        );
        let Some(name) = &self.time_window else {
            return Ok(Span { start, end });
        };
        if self.span_start.is_some() || self.span_end.is_some() {
            return Err(ServeGenError::WindowAndSpan);
        }
        let (start, end) = match name.as_str() {
            "midnight" => (0.0, 1800.0),
            "morning" => (28_800.0, 30_600.0),
            "afternoon" => (50_400.0, 52_200.0),
            other => {
                return Err(ServeGenError::UnknownWindow {
                    name: other.to_owned(),
                });
            }
        };
        Ok(Span { start, end })
    }
}

/// The chunks of `dir`, sorted by trace file name (as BLIS sorts them).
pub(super) fn sorted_chunks(dir: &Path) -> Result<Vec<(String, String)>, ServeGenError> {
    let mut traces = chunk_ids(dir)?;
    traces.sort();
    Ok(traces)
}

/// The chunks of `dir`: (trace file name, chunk id) of every `chunk-<id>-trace.csv`.
fn chunk_ids(dir: &Path) -> Result<Vec<(String, String)>, ServeGenError> {
    let entries = std::fs::read_dir(dir).map_err(|source| ServeGenError::ReadDir {
        dir: dir.to_owned(),
        source,
    })?;
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| ServeGenError::ReadDirEntry {
            dir: dir.to_owned(),
            source,
        })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(id) = name
            .strip_prefix("chunk-")
            .and_then(|rest| rest.strip_suffix("-trace.csv"))
        {
            out.push((name.clone(), id.to_owned()));
        }
    }
    if out.is_empty() {
        return Err(ServeGenError::NoChunks {
            dir: dir.to_owned(),
        });
    }
    Ok(out)
}

/// One dataset entry: the prompt and output length PDFs, parsed when first used.
pub struct Entry {
    /// `input_tokens`, or multimodal data's `text_tokens`.
    pub(super) input: String,
    pub(super) output: String,
    /// Multimodal data: per image, audio, video the `<m>_tokens` (per item) and `<m>_count`
    /// PDFs.
    pub(super) media: Option<[(String, String); 3]>,
    parsed: std::cell::OnceCell<Dists>,
}

/// An entry's distributions: prompt (text) and output lengths, and multimodal prompts.
type Dists = (Arc<LengthDist>, Arc<LengthDist>, Option<Arc<Multimodal>>);

/// Fields of a language or reasoning entry.
const LANGUAGE_FIELDS: [&str; 3] = ["input_tokens", "output_tokens", "reason_ratio"];

/// Fields of a multimodal entry (ServeGen's `data/multimodal`), all required.
const MULTIMODAL_FIELDS: [&str; 8] = [
    "text_tokens",
    "output_tokens",
    "image_tokens",
    "image_count",
    "audio_tokens",
    "audio_count",
    "video_tokens",
    "video_count",
];

/// A chunk's dataset: entries by time stamp (s) before the span's end, empty ones skipped
/// (as BLIS and ServeGen skip them; a multimodal entry with any empty PDF, as ServeGen).
/// Sets `reasoning` when an entry has `reason_ratio`.
pub fn read_dataset(
    path: &Path,
    span: Span,
    reasoning: &mut bool,
) -> Result<BTreeMap<i64, Entry>, ServeGenError> {
    let file = std::fs::File::open(path).map_err(|source| ServeGenError::ReadDataset {
        path: path.to_owned(),
        source,
    })?;
    let raw: BTreeMap<String, BTreeMap<String, String>> =
        serde_json::from_reader(BufReader::new(file)).map_err(|source| {
            ServeGenError::NotDataset {
                path: path.to_owned(),
                source,
            }
        })?;
    let mut out = BTreeMap::new();
    for (stamp, fields) in raw {
        let at = |problem| ServeGenError::Entry {
            path: path.to_owned(),
            stamp: stamp.clone(),
            problem,
        };
        *reasoning |= fields.contains_key("reason_ratio");
        let t: f64 = stamp
            .parse()
            .ok()
            .filter(|t: &f64| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| at(EntryProblem::Stamp))?;
        if span.end > 0.0 && t >= span.end {
            continue;
        }
        if let Some(entry) = entry(fields).map_err(at)? {
            out.insert(t as i64, entry);
        }
    }
    Ok(out)
}

/// The entry of one time stamp's `fields`, `None` when a PDF is empty (`"{}"`).
fn entry(mut fields: BTreeMap<String, String>) -> Result<Option<Entry>, EntryProblem> {
    let multimodal = fields.contains_key("text_tokens");
    let known: &'static [&'static str] = match multimodal {
        true => &MULTIMODAL_FIELDS,
        false => &LANGUAGE_FIELDS,
    };
    if let Some(other) = fields.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(EntryProblem::UnknownField {
            field: other.clone(),
            multimodal,
            known,
        });
    }
    let empty = |s: &str| s.trim().is_empty() || s.trim() == "{}";
    let take =
        |fields: &mut BTreeMap<String, String>, k: &str| fields.remove(k).unwrap_or_default();
    if !multimodal {
        let (input, output) = (
            take(&mut fields, "input_tokens"),
            take(&mut fields, "output_tokens"),
        );
        if empty(&input) || empty(&output) {
            return Ok(None);
        }
        return Ok(Some(Entry::new(input, output, None)));
    }
    if let Some(&field) = MULTIMODAL_FIELDS.iter().find(|k| !fields.contains_key(**k)) {
        return Err(EntryProblem::MissingMultimodal { field });
    }
    if fields.values().any(|v| empty(v)) {
        return Ok(None);
    }
    let (input, output) = (
        take(&mut fields, "text_tokens"),
        take(&mut fields, "output_tokens"),
    );
    let media = ["image", "audio", "video"].map(|m| {
        let tokens = take(&mut fields, &format!("{m}_tokens"));
        (tokens, take(&mut fields, &format!("{m}_count")))
    });
    Ok(Some(Entry::new(input, output, Some(media))))
}

impl Entry {
    fn new(input: String, output: String, media: Option<[(String, String); 3]>) -> Entry {
        Entry {
            input,
            output,
            media,
            parsed: std::cell::OnceCell::new(),
        }
    }

    /// The entry's distributions; `what` names it in errors.
    fn dists(&self, at: &dyn Fn(&str, PdfError) -> ServeGenError) -> Result<Dists, ServeGenError> {
        if let Some(d) = self.parsed.get() {
            return Ok(d.clone());
        }
        let lengths = |name: &str, text: &str| {
            parse_pdf(text)
                .and_then(|bins| Ok(LengthDist::from_pmf(&bins)?))
                .map_err(|problem| at(name, problem))
        };
        let input_name = if self.media.is_some() {
            "text_tokens"
        } else {
            "input_tokens"
        };
        let input = lengths(input_name, &self.input)?;
        let output = Arc::new(lengths("output_tokens", &self.output)?);
        let multimodal = match &self.media {
            None => None,
            Some(media) => Some(Arc::new(multimodal(media, input.clone(), at)?)),
        };
        let d = (Arc::new(input), output, multimodal);
        Ok(self.parsed.get_or_init(|| d).clone())
    }
}

/// The multimodal prompts of an entry with `media` PDFs and text lengths `text`.
fn multimodal(
    media: &[(String, String); 3],
    text: LengthDist,
    at: &dyn Fn(&str, PdfError) -> ServeGenError,
) -> Result<Multimodal, ServeGenError> {
    let mut parts = Vec::with_capacity(3);
    for ((tokens, count), m) in media.iter().zip(["image", "audio", "video"]) {
        let per_item = parse_pdf(tokens)
            .and_then(|b| Ok(LengthDist::from_pmf(&b)?))
            .map_err(|e| at(&format!("{m}_tokens"), e))?;
        let items = parse_pdf_counts(count)
            .and_then(|b| Ok(CountDist::from_pmf(&b)?))
            .map_err(|e| at(&format!("{m}_count"), e))?;
        parts.push((per_item, items));
    }
    let media: [(LengthDist, CountDist); 3] = parts.try_into().expect("three modalities");
    Ok(Multimodal::from_parts(text, media))
}

/// A Python dict of token count → probability, `"{224: 0.0003, 225: 1e-4, }"`: the counts
/// (a `.0` suffix allowed; a count of 0 is read as 1, every request having a token) and
/// probabilities, as given.
pub(super) fn parse_pdf(text: &str) -> Result<Vec<(u32, f64)>, PdfError> {
    let mut bins = parse_pdf_counts(text)?;
    for bin in &mut bins {
        bin.0 = bin.0.max(1);
    }
    Ok(bins)
}

/// `parse_pdf`'s bins with the counts as written (whole part; 0 kept).
pub fn parse_pdf_counts(text: &str) -> Result<Vec<(u32, f64)>, PdfError> {
    let body = text
        .trim()
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .ok_or(PdfError::NotDict)?;
    let limit = MAX_TOKENS as u32;
    let mut bins = Vec::new();
    for pair in body.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once(':').ok_or_else(|| PdfError::NotPair {
            pair: pair.to_owned(),
        })?;
        let tokens: f64 = key
            .trim()
            .parse()
            .ok()
            .filter(|t: &f64| t.is_finite() && *t >= 0.0 && *t <= f64::from(limit))
            .ok_or_else(|| PdfError::Key {
                key: key.trim().to_owned(),
                limit,
            })?;
        let p: f64 = value
            .trim()
            .parse()
            .ok()
            .filter(|p: &f64| p.is_finite() && *p >= 0.0)
            .ok_or_else(|| PdfError::Probability {
                value: value.trim().to_owned(),
                key: key.trim().to_owned(),
            })?;
        bins.push((tokens as u32, p));
    }
    Ok(bins)
}

/// One trace row.
pub struct Row {
    /// Start time, s.
    pub start_s: f64,
    /// Requests per second.
    pub rate: f64,
    /// Coefficient of variation of the inter-arrival gaps.
    pub cv: f64,
    /// Lower case: `gamma`, `weibull`, or another (Poisson).
    pub pattern: String,
    /// The fitted shape and scale (both positive), when the row has them.
    pub fitted: Option<(f64, f64)>,
}

/// Parses trace line `text`; errors name the column.
fn parse_row(text: &str) -> Result<Row, RowProblem> {
    let fields: Vec<&str> = text.split(',').map(str::trim).collect();
    if fields.len() < 4 {
        return Err(RowProblem::Columns { got: fields.len() });
    }
    let number = |k: usize, name| {
        fields[k]
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| RowProblem::NotNumber {
                column: k + 1,
                name,
                got: fields[k].to_owned(),
            })
    };
    let fitted = match fields.len() >= 6 {
        true => {
            Some((number(4, "shape")?, number(5, "scale")?)).filter(|&(k, s)| k > 0.0 && s > 0.0)
        }
        false => None,
    };
    Ok(Row {
        start_s: number(0, "start")?,
        rate: number(1, "rate")?,
        cv: number(2, "cv")?,
        pattern: fields[3].to_ascii_lowercase(),
        fitted,
    })
}

/// A row's arrival process: Gamma or Weibull with the fitted shape (else from the cv),
/// Poisson for an empty or other pattern (as BLIS).
fn row_arrival(row: &Row) -> Result<ArrivalProcess, ArrivalError> {
    match row.pattern.as_str() {
        p @ ("gamma" | "weibull") => window_arrival_process(
            p,
            Some(row.cv).filter(|&cv| cv > 0.0 && row.fitted.is_none()),
            row.fitted.map(|(shape, _)| shape),
        ),
        _ => Ok(ArrivalProcess::Poisson),
    }
}

/// The client of one chunk, or `None` when no row makes a window.
fn chunk_client(
    id: &str,
    trace: &Path,
    entries: &BTreeMap<i64, Entry>,
    span: Span,
) -> Result<Option<ClientSpec>, ServeGenError> {
    let (windows, params) = chunk_windows(id, trace, entries, span)?;
    if windows.is_empty() {
        return Ok(None);
    }
    let input = LengthDist::clone(params[0].input.as_ref().expect("set"));
    let output = LengthDist::clone(params[0].output.as_ref().expect("set"));
    let lifecycle =
        Lifecycle::with_params(&windows, params).map_err(|source| ServeGenError::Lifecycle {
            path: trace.to_owned(),
            source,
        })?;
    let client = ClientSpec::of_requests(
        format!("servegen-chunk-{id}"),
        ArrivalProcess::Poisson,
        input,
        output,
    );
    Ok(Some(ClientSpec {
        tenant_id: Some(format!("chunk-{id}")),
        slo_class: Some(SloClass::Standard),
        streaming: 1.0,
        lifecycle: Some(lifecycle),
        ..client
    }))
}

/// A chunk's windows (µs) and their overrides, one per active row (see [`active_rows`]).
fn chunk_windows(
    id: &str,
    trace: &Path,
    entries: &BTreeMap<i64, Entry>,
    span: Span,
) -> Result<WindowSpans, ServeGenError> {
    let mut windows = Vec::new();
    let mut params = Vec::new();
    active_rows(trace, entries, span, |line, row, stamp, entry| {
        let at = |field: &str, problem| ServeGenError::Pdf {
            dataset: trace.with_file_name(format!("chunk-{id}-dataset.json")),
            stamp,
            field: field.to_owned(),
            problem: Box::new(problem),
        };
        let (input, output, multimodal) = entry.dists(&at)?;
        let arrival = row_arrival(&row).map_err(|source| ServeGenError::Arrival {
            path: trace.to_owned(),
            line,
            source,
        })?;
        let start_us = (row.start_s * 1e6) as u64;
        windows.push((start_us, start_us + (WINDOW_S * 1e6) as u64));
        params.push(WindowParams {
            trace_rate: Some(row.rate),
            arrival: Some(arrival),
            input: Some(input),
            output: Some(output),
            multimodal,
        });
        Ok(())
    })?;
    Ok((windows, params))
}

/// Calls `each(line, row, stamp, entry)` for every active row of a trace, read line by line:
/// a row of positive rate starting in the span with a dataset entry at or before its start
/// (the nearest such entry is passed). Errors name the file and line.
pub(super) fn active_rows(
    trace: &Path,
    entries: &BTreeMap<i64, Entry>,
    span: Span,
    mut each: impl FnMut(usize, Row, i64, &Entry) -> Result<(), ServeGenError>,
) -> Result<(), ServeGenError> {
    let file = std::fs::File::open(trace).map_err(|source| ServeGenError::ReadTrace {
        path: trace.to_owned(),
        source,
    })?;
    for (n, line) in BufReader::new(file).lines().enumerate() {
        let text = line.map_err(|source| ServeGenError::TraceLine {
            path: trace.to_owned(),
            line: n + 1,
            source,
        })?;
        if text.trim().is_empty() {
            continue;
        }
        let row = parse_row(&text).map_err(|problem| ServeGenError::Row {
            path: trace.to_owned(),
            line: n + 1,
            problem,
        })?;
        if !span.contains(row.start_s) || row.rate <= 0.0 {
            continue;
        }
        if let Some((&stamp, entry)) = entries.range(..=row.start_s as i64).next_back() {
            each(n + 1, row, stamp, entry)?;
        }
    }
    Ok(())
}

/// Shifts every client's windows so that the earliest starts at 0 (ServeGen's times are
/// seconds since midnight of day 1; BLIS shifts them the same way).
fn shift_to_zero(clients: &mut [ClientSpec]) {
    let lifecycles = || clients.iter().filter_map(|c| c.lifecycle.as_ref());
    let Some(first) = lifecycles()
        .flat_map(|l| l.windows().iter().map(|w| w.0))
        .min()
    else {
        return;
    };
    for c in clients.iter_mut() {
        if let Some(l) = c.lifecycle.take() {
            c.lifecycle = Some(l.shifted_back(first));
        }
    }
}
