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
    #[error("{}: {field}: {message}", path.display())]
    Meta {
        path: PathBuf,
        field: String,
        message: String,
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
