//! What is wrong with a `servegen_data` block or the ServeGen directory it names, as typed
//! values that render to the messages users see; [`ServeGenError::field`] says which field of
//! the block the error is reported at.

use super::arrival::ArrivalError;
use super::dist::DistError;
use super::extras::ExtrasError;
use std::path::PathBuf;

/// A `servegen_data` block that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ServeGenError {
    /// `span_start` or `span_end` negative.
    #[error("must be a number of seconds ≥ 0, got {value}")]
    NegativeSpan { field: &'static str, value: i64 },
    /// `time_window` beside a span.
    #[error("give time_window or span_start/span_end, not both")]
    WindowAndSpan,
    /// `time_window` none of the three.
    #[error("unknown window `{name}`; known: midnight, morning, afternoon")]
    UnknownWindow { name: String },
    /// A field of the single-period conversion with the multi-period one.
    #[error(
        "picks the rows of the single-period conversion; it cannot be combined with \
         window_duration_secs / drain_timeout_secs (BLIS's multi-period conversion)"
    )]
    SinglePeriodField { field: &'static str },
    /// The directory cannot be listed.
    #[error("cannot read ServeGen directory {}: {source}", dir.display())]
    ReadDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An entry of the directory cannot be read.
    #[error("cannot read {}: {source}", dir.display())]
    ReadDirEntry {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A directory without chunks.
    #[error(
        "no chunk-*-trace.csv files in {} (a ServeGen data directory such as \
         data/language/m-large)",
        dir.display()
    )]
    NoChunks { dir: PathBuf },
    /// A dataset file that cannot be opened.
    #[error("cannot read ServeGen dataset {}: {source}", path.display())]
    ReadDataset {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A dataset file that is not the JSON of a dataset.
    #[error(
        "{}:{}:{}: not a ServeGen dataset (an object of time stamps, each an object of PDF \
         strings): {source}",
        path.display(),
        source.line(),
        source.column()
    )]
    NotDataset {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// A dataset entry (at time stamp `stamp`, as written) that cannot be used.
    #[error("{}: entry \"{stamp}\": {problem}", path.display())]
    Entry {
        path: PathBuf,
        stamp: String,
        problem: EntryProblem,
    },
    /// A PDF of a dataset entry (`field` of the entry at `stamp` s).
    #[error("{} entry \"{stamp}\": {field}: {problem}", dataset.display())]
    Pdf {
        dataset: PathBuf,
        stamp: i64,
        field: String,
        /// What is wrong (boxed: errors stay small on the `Ok` path).
        problem: Box<PdfError>,
    },
    /// A trace file that cannot be opened.
    #[error("cannot read ServeGen trace {}: {source}", path.display())]
    ReadTrace {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A trace line (1-based) that cannot be read.
    #[error("{}:{line}: {source}", path.display())]
    TraceLine {
        path: PathBuf,
        line: usize,
        #[source]
        source: std::io::Error,
    },
    /// A trace row (line, 1-based) that is no row.
    #[error("{}:{line}: {problem}", path.display())]
    Row {
        path: PathBuf,
        line: usize,
        problem: RowProblem,
    },
    /// A trace row whose arrival process cannot be built.
    #[error("{}:{line}: arrival: {source}", path.display())]
    Arrival {
        path: PathBuf,
        line: usize,
        #[source]
        source: ArrivalError,
    },
    /// A chunk's windows (from its trace `path`) that make no lifecycle.
    #[error("{}: {source}", path.display())]
    Lifecycle {
        path: PathBuf,
        #[source]
        source: ExtrasError,
    },
    /// No chunk sends anything.
    #[error(
        "{}: no chunk has an active window (a trace row of positive rate in the span with a \
         dataset entry at or before it)",
        dir.display()
    )]
    NoActiveWindow { dir: PathBuf },
    /// Reasoning or multimodal data (`what`) read by the multi-period conversion.
    #[error(
        "{}: ServeGen's {what} has no multi-period conversion here; read it with time_window \
         or span_start/span_end",
        dataset.display()
    )]
    NoPeriods {
        dataset: PathBuf,
        what: &'static str,
    },
    /// A multi-period cohort's arrival process.
    #[error("cohort {id}: {source}")]
    CohortArrival {
        id: String,
        #[source]
        source: ArrivalError,
    },
    /// A multi-period cohort's window.
    #[error("cohort {id}: {source}")]
    CohortLifecycle {
        id: String,
        #[source]
        source: ExtrasError,
    },
    /// A multi-period cohort's fitted log-normal lengths.
    #[error("{0}")]
    CohortLengths(DistError),
    /// No multi-period cohort sends anything.
    #[error(
        "{}: no cohort has a positive rate at the picked windows {picked:?} s",
        dir.display()
    )]
    NoPositiveRate { dir: PathBuf, picked: Vec<i64> },
}

impl ServeGenError {
    /// The field of the `servegen_data` block the error is reported at.
    pub fn field(&self) -> &'static str {
        match self {
            ServeGenError::NegativeSpan { field, .. } => field,
            ServeGenError::SinglePeriodField { field } => field,
            ServeGenError::WindowAndSpan | ServeGenError::UnknownWindow { .. } => "time_window",
            ServeGenError::NoPeriods { .. } => "window_duration_secs",
            _ => "path",
        }
    }
}

/// What is wrong with a dataset entry.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EntryProblem {
    /// A time stamp that is no time.
    #[error("the time stamp must be a number of seconds ≥ 0")]
    Stamp,
    /// A field none of the data's (`known`: its fields; `multimodal`: which data).
    #[error(
        "field `{field}` is not a field of ServeGen's {} data ({})",
        if *multimodal { "multimodal" } else { "language or reasoning" },
        known.join(", ")
    )]
    UnknownField {
        field: String,
        multimodal: bool,
        known: &'static [&'static str],
    },
    /// A multimodal entry without one of its fields.
    #[error("multimodal data: missing field `{field}`")]
    MissingMultimodal { field: &'static str },
}

/// What is wrong with a PDF written as a Python dict.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PdfError {
    /// Not `{...}`.
    #[error("expected a dict `{{tokens: probability, ...}}`")]
    NotDict,
    /// An entry without `:`.
    #[error("`{pair}` is not `tokens: probability`")]
    NotPair { pair: String },
    /// A key that is no token count.
    #[error("key `{key}` must be a token count in [0, {limit}]")]
    Key { key: String, limit: u32 },
    /// A probability that is no number ≥ 0.
    #[error("probability `{value}` of {key} must be a number ≥ 0")]
    Probability { value: String, key: String },
    /// Bins that make no distribution.
    #[error(transparent)]
    Dist(#[from] DistError),
}

/// What is wrong with a trace row.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RowProblem {
    /// Fewer than four columns.
    #[error("expected at least 4 columns (start, rate, cv, pattern[, shape, scale]), got {got}")]
    Columns { got: usize },
    /// A column (1-based) that is no number ≥ 0.
    #[error("column {column} ({name}): expected a number ≥ 0, got `{got}`")]
    NotNumber {
        column: usize,
        name: &'static str,
        got: String,
    },
}
