//! The per-request CSV (LLMServingSim's columns and order), written atomically.

use super::RequestRecord;
use std::path::Path;

/// The exact CSV header of LLMServingSim 2.0.
pub const CSV_HEADER: [&str; 12] = [
    "instance id",
    "request id",
    "model",
    "input",
    "output",
    "arrival",
    "end_time",
    "latency",
    "queuing_delay",
    "TTFT",
    "TPOT",
    "ITL",
];

/// Streams request rows into a temporary file beside the destination; [`RequestCsv::commit`]
/// renames it into place, so an aborted run leaves no partial CSV.
pub struct RequestCsv {}

impl RequestCsv {
    /// Creates the temporary file in `path`'s directory and writes the header.
    pub fn create(path: &Path) -> anyhow::Result<RequestCsv> {
        todo!("{path:?}")
    }

    /// Appends one row.
    pub fn write(&mut self, record: &RequestRecord<'_>) -> anyhow::Result<()> {
        todo!("{record:?}")
    }

    /// Flushes and atomically renames the file to its destination.
    pub fn commit(self) -> anyhow::Result<()> {
        todo!()
    }
}

/// Writes a whole file atomically: `fill` writes into a temporary file in `path`'s directory,
/// which is then renamed over `path`.
pub fn write_atomically(
    path: &Path,
    fill: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let _ = fill;
    todo!("{path:?}")
}
