//! `--dataset` files in any of the formats read: LLMServingSim JSONL, Mooncake traces, Azure
//! traces; the format named, or detected from the file's first line.

use super::azure::read_azure;
use super::flat::DATASET_MEMORY_BYTES;
use super::lines::for_each_line;
use super::mooncake::{MOONCAKE_BLOCK_SIZE, read_mooncake};
use super::{FieldProblem, Workload, WorkloadError, read_workload};
use std::path::Path;

/// The format of a dataset file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DatasetFormat {
    /// Detected from the first non-blank line.
    #[default]
    Auto,
    /// LLMServingSim JSONL (flat requests and sessions).
    LlmServingSim,
    /// Mooncake trace JSONL (`timestamp`, `input_length`, `output_length`, `hash_ids`).
    Mooncake,
    /// Azure LLM inference trace CSV (`TIMESTAMP`, `ContextTokens`, `GeneratedTokens`).
    Azure,
}

impl DatasetFormat {
    /// The name `--dataset-format` takes.
    pub fn name(self) -> &'static str {
        match self {
            DatasetFormat::Auto => "auto",
            DatasetFormat::LlmServingSim => "llmservingsim",
            DatasetFormat::Mooncake => "mooncake",
            DatasetFormat::Azure => "azure",
        }
    }

    /// The format of the file at `path`: this one, or under [`DatasetFormat::Auto`] the one
    /// its first line shows ([`detect_format`]).
    pub fn of(self, path: &Path) -> Result<DatasetFormat, WorkloadError> {
        match self {
            DatasetFormat::Auto => detect_format(path),
            named => Ok(named),
        }
    }
}

impl std::str::FromStr for DatasetFormat {
    type Err = crate::choice::UnknownName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const ALL: [DatasetFormat; 4] = [
            DatasetFormat::Auto,
            DatasetFormat::LlmServingSim,
            DatasetFormat::Mooncake,
            DatasetFormat::Azure,
        ];
        (ALL.into_iter())
            .find(|f| f.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| crate::choice::UnknownName {
                what: "format",
                name: s.to_owned(),
                expected: ALL.map(DatasetFormat::name).to_vec(),
                hint: None,
            })
    }
}

/// How to read a dataset file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatasetOptions {
    pub format: DatasetFormat,
    /// Tokens per `hash_ids` block of a Mooncake trace.
    pub trace_block_size: u32,
    /// Bytes of requests a run holds in memory before it reads the dataset as it goes
    /// ([`super::read_dataset_within`]).
    pub memory_bytes: usize,
}

impl Default for DatasetOptions {
    fn default() -> Self {
        DatasetOptions {
            format: DatasetFormat::Auto,
            trace_block_size: MOONCAKE_BLOCK_SIZE,
            memory_bytes: DATASET_MEMORY_BYTES,
        }
    }
}

/// The line saying which format `--dataset-format auto` read `path` as.
pub fn detected(path: &Path, format: DatasetFormat) -> String {
    format!(
        "dataset {}: read as {} (detected; --dataset-format names it)",
        path.display(),
        format.name()
    )
}

/// Reads the first `limit` entries (all when `None`) of the dataset at `path`, and returns
/// them with the format they were read as (the detected one under [`DatasetFormat::Auto`]).
pub fn read_dataset(
    path: &Path,
    options: DatasetOptions,
    limit: Option<usize>,
) -> Result<(Workload, DatasetFormat), WorkloadError> {
    let format = options.format.of(path)?;
    let flat = |requests| Workload {
        requests,
        sessions: Default::default(),
        classes: None,
    };
    let workload = match format {
        DatasetFormat::Auto | DatasetFormat::LlmServingSim => read_workload(path, limit)?,
        DatasetFormat::Mooncake => flat(read_mooncake(path, options.trace_block_size, limit)?),
        DatasetFormat::Azure => flat(read_azure(path, limit)?),
    };
    Ok((workload, format))
}

/// The format of the file at `path`, from its first non-blank line: a JSON object with
/// `hash_ids` or `input_length` is a Mooncake trace, another line starting with `{` is
/// LLMServingSim JSONL, a CSV header naming `TIMESTAMP` and `ContextTokens` is an Azure trace.
pub fn detect_format(path: &Path) -> Result<DatasetFormat, WorkloadError> {
    let mut found = None;
    for_each_line(path, |text, line| {
        found = Some(classify(text).ok_or_else(|| {
            WorkloadError::invalid(path, line, "(format)", FieldProblem::UnknownFormat)
        })?);
        Ok(false)
    })?;
    found.ok_or_else(|| WorkloadError::Empty {
        path: path.to_owned(),
    })
}

/// The format a first line belongs to, if any.
fn classify(text: &str) -> Option<DatasetFormat> {
    let text = text.trim();
    if text.starts_with('{') {
        let mooncake = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text)
            .is_ok_and(|m| m.contains_key("hash_ids") || m.contains_key("input_length"));
        return Some(if mooncake {
            DatasetFormat::Mooncake
        } else {
            DatasetFormat::LlmServingSim
        });
    }
    let columns: Vec<&str> = text.split(',').map(str::trim).collect();
    (columns.contains(&"TIMESTAMP") && columns.contains(&"ContextTokens"))
        .then_some(DatasetFormat::Azure)
}
