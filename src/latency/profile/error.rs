//! Errors of loading a profile bundle.

use std::path::PathBuf;

/// Why a bundle could not be loaded. Every variant names the file, and the line, column,
/// field or layer where one applies.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// A file or folder exists but could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The bundle folder does not exist; `listing` says what the nearest existing folder holds.
    #[error("no profile bundle at {} ({listing})", path.display())]
    MissingBundle { path: PathBuf, listing: String },
    /// The bundle has no folder for the requested TP degree.
    #[error("profile bundle {} has no tp{tp}/ folder (TP folders there: {available})", bundle.display())]
    MissingTp {
        bundle: PathBuf,
        tp: u32,
        available: String,
    },
    /// A file the bundle needs does not exist.
    #[error("missing profile file {}", path.display())]
    MissingFile { path: PathBuf },
    /// `meta.yaml` has a key of the wrong shape.
    #[error("{}: {field}: {problem}", path.display())]
    Meta {
        path: PathBuf,
        field: String,
        problem: MetaProblem,
    },
    /// The architecture YAML is invalid or does not fit the model.
    #[error("architecture {file}: {message}")]
    Architecture { file: String, message: String },
    /// No bundled architecture for the model type, and none was given.
    #[error(
        "no bundled layer sequence for model_type `{model_type}` (bundled: {known}); \
         give an architecture YAML"
    )]
    UnknownModelType { model_type: String, known: String },
    /// A CSV row or header that cannot be read.
    #[error("{}, line {line}, column `{column}`: {message}", path.display())]
    Malformed {
        path: PathBuf,
        line: u64,
        column: String,
        message: String,
    },
    /// A `dense.csv` or `per_sequence.csv` layer that the catalog does not file there.
    #[error(
        "{}, line {line}: layer `{layer}` is not in the {category} catalog of {architecture}",
        path.display()
    )]
    UnknownLayer {
        path: PathBuf,
        line: u64,
        layer: String,
        category: &'static str,
        architecture: String,
    },
    /// A grid point that comes before the previous one.
    #[error("{}, line {line}: {message}", path.display())]
    Unsorted {
        path: PathBuf,
        line: u64,
        message: String,
    },
    /// A grid point given twice.
    #[error("{}, line {line}: duplicate grid point {point}", path.display())]
    DuplicatePoint {
        path: PathBuf,
        line: u64,
        point: String,
    },
    /// A table whose grid lacks a shape the lookups need (see `shape`).
    #[error("{}: {message}", path.display())]
    Grid { path: PathBuf, message: String },
    /// An attention or MoE table without data rows.
    #[error("{} has no data rows", path.display())]
    Empty { path: PathBuf },
    /// A prologue or head layer with no rows in its table (LLMServingSim fails on these too;
    /// block layers without rows are skipped with a warning instead).
    #[error(
        "{} has no rows for layer `{layer}`, which the {section} of {architecture} runs",
        path.display()
    )]
    MissingLayer {
        path: PathBuf,
        layer: String,
        section: &'static str,
        architecture: String,
    },
}

/// What is wrong with one key of a bundle's `meta.yaml`. Each variant renders to the message
/// after the key's name.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetaProblem {
    /// The YAML parser's message (which names the line and column where it has them).
    #[error("{0}")]
    Syntax(String),
    /// A file with no document.
    #[error(
        "empty: a bundle's meta.yaml records model, architecture, tp_degrees and \
         engine_effective"
    )]
    Empty,
    /// A document that is not a mapping.
    #[error("not a mapping of keys")]
    NotMapping,
    /// A key every bundle records is absent.
    #[error(
        "missing: LLMServingSim's profiler records model, architecture, tp_degrees and \
         engine_effective's max_num_batched_tokens and max_num_seqs in every bundle; without \
         them the bundle cannot be checked against the run"
    )]
    Missing,
    /// A count of 0 where at least 1 is needed.
    #[error("0: must be at least 1")]
    Zero,
    /// A skew alpha that is not finite or past `max` either way.
    #[error("alpha {} is outside [-{max:e}, {max:e}]", shown(*.value))]
    AlphaOutOfRange { value: f64, max: f64 },
    /// `tp_degrees` without the TP degree whose folder the run uses.
    #[error("{degrees:?} does not list tp {tp}, whose tp{tp}/ folder is used")]
    TpNotListed { degrees: Vec<u32>, tp: u32 },
    /// A bucket axis (`axis`: its bins' key) whose bins are not one more than its labels.
    #[error(
        "{axis}: {bins} bins for {labels} labels (expected one more bin than labels, at least \
         one label)"
    )]
    AxisShape {
        axis: String,
        bins: usize,
        labels: usize,
    },
    /// A `bucket_table` path that leaves the bundle.
    #[error("`{table}` must be a relative path inside the bundle, without `..`")]
    OutsideBundle { table: String },
    /// A bundle profiled for another architecture than the one in use (`in_use` says which).
    #[error(
        "the bundle was profiled for `{profiled}`, but {in_use}: its tables would price \
         another layer sequence"
    )]
    OtherArchitecture { profiled: String, in_use: String },
    /// A checksum that is not 64 hex digits.
    #[error("`{text}` is not a SHA-256 (64 hex digits)")]
    NotSha256 { text: String },
}

/// A number as the alpha error shows it: plain, or in exponent form when huge.
fn shown(a: f64) -> String {
    if a.abs() < 1e15 {
        a.to_string()
    } else {
        format!("{a:e}")
    }
}
