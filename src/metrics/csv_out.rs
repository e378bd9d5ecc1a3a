//! The per-request CSV (LLMServingSim's columns and order), written atomically.
//!
//! Rows are formatted byte for byte as Python's `csv.writer` (the writer LLMServingSim uses)
//! emits them: `\r\n` line ends, and a field is quoted only when it holds a comma, a quote or
//! a line break, so the ITL list is quoted once it has two or more entries.

use super::RequestRecord;
use anyhow::Context;
use std::ffi::OsString;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use tempfile::NamedTempFile;

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

/// The columns appended after [`CSV_HEADER`] when prefill/decode disaggregation is on: the
/// instance that ran the prompt (the row's own instance when one instance served the request
/// start to finish) and the time from the end of the prefill to the arrival of the KV cache at
/// the decode instance, ns (0 without a transfer).
pub const PD_CSV_COLUMNS: [&str; 2] = ["prefill instance", "kv_transfer_ns"];

/// The columns appended (after the [`PD_CSV_COLUMNS`] when those are on) when the workload has
/// sessions: the session of the request and its step (LLMServingSim's sub-request index, or
/// the workflow step label); empty for a request outside any session.
pub const SESSION_COLUMNS: [&str; 2] = ["session_id", "sub_request_index"];

/// Which column sets a [`RequestCsv`] carries after LLMServingSim's 12 [`CSV_HEADER`]
/// columns, which always come first. The default is none: exactly LLMServingSim's file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CsvColumns {
    /// The [`PD_CSV_COLUMNS`], next: the run has prefill/decode disaggregation.
    pub pd: bool,
    /// The [`SESSION_COLUMNS`], last: the workload has sessions.
    pub sessions: bool,
}

impl CsvColumns {
    /// The header, in column order.
    pub fn header(self) -> impl Iterator<Item = &'static str> {
        let pd: &[&str] = if self.pd { &PD_CSV_COLUMNS } else { &[] };
        let sessions: &[&str] = if self.sessions { &SESSION_COLUMNS } else { &[] };
        CSV_HEADER
            .into_iter()
            .chain(pd.iter().copied())
            .chain(sessions.iter().copied())
    }
}

/// Python's `csv.writer` default line terminator.
const LINE_END: &[u8] = b"\r\n";

/// Rows are gathered and handed to the file in chunks of at least this many bytes, which the
/// buffered writer passes straight through: each byte is copied once.
const CHUNK: usize = 1 << 16;

/// Streams request rows into a temporary file beside the destination; [`RequestCsv::commit`]
/// renames it into place, so an aborted run leaves no partial CSV.
pub struct RequestCsv {
    file: AtomicFile,
    /// Formatted rows not yet handed to the file; reused, so steady-state writing allocates
    /// nothing.
    row: Vec<u8>,
    /// The column sets after LLMServingSim's.
    columns: CsvColumns,
}

impl RequestCsv {
    /// Creates the temporary file in `path`'s directory and writes the header: LLMServingSim's
    /// 12 columns, then the extra sets `columns` turns on.
    pub fn create(path: &Path, columns: CsvColumns) -> anyhow::Result<RequestCsv> {
        let mut csv = RequestCsv {
            file: AtomicFile::create(path)?,
            row: Vec::with_capacity(2 * CHUNK),
            columns,
        };
        for (i, name) in columns.header().enumerate() {
            if i > 0 {
                csv.row.push(b',');
            }
            push_text_field(&mut csv.row, name);
        }
        csv.row.extend_from_slice(LINE_END);
        Ok(csv)
    }

    /// Appends the row of `record`. `session` is the request's session id and step label,
    /// `None` for a request outside any session; it is written only when the CSV has the
    /// [`SESSION_COLUMNS`].
    pub fn write(
        &mut self,
        record: &RequestRecord<'_>,
        session: Option<(&str, &str)>,
    ) -> anyhow::Result<()> {
        format_row(&mut self.row, record);
        if self.columns.pd {
            push_pd_columns(&mut self.row, record);
        }
        if self.columns.sessions {
            push_session_columns(&mut self.row, session);
        }
        self.row.extend_from_slice(LINE_END);
        if self.row.len() >= CHUNK {
            self.flush_row()?;
        }
        Ok(())
    }

    /// Flushes and atomically renames the file to its destination.
    pub fn commit(mut self) -> anyhow::Result<()> {
        self.flush_row()?;
        self.file.commit()
    }

    /// Hands the gathered rows to the file and empties the buffer.
    fn flush_row(&mut self) -> anyhow::Result<()> {
        let result = self.file.out.write_all(&self.row);
        self.row.clear();
        result.with_context(|| format!("writing {}", self.file.dest.display()))
    }
}

/// Writes a whole file atomically: `fill` writes into a temporary file in `path`'s directory,
/// which is then renamed over `path`.
pub fn write_atomically(
    path: &Path,
    fill: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let mut file = AtomicFile::create(path)?;
    fill(&mut file.out).with_context(|| format!("writing {}", path.display()))?;
    file.commit()
}

/// A buffered temporary file beside its destination. [`AtomicFile::commit`] renames it over
/// the destination; dropped uncommitted, it deletes itself and the destination is untouched.
struct AtomicFile {
    dest: PathBuf,
    out: BufWriter<NamedTempFile>,
}

impl AtomicFile {
    fn create(dest: &Path) -> anyhow::Result<AtomicFile> {
        let mut prefix = OsString::from(".");
        if let Some(name) = dest.file_name() {
            prefix.push(name);
            prefix.push(".");
        }
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".tmp");
        // Temporary files default to mode 0600; ask for what a plain `File::create` gets.
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        let file = builder
            .tempfile_in(parent_dir(dest))
            .with_context(|| format!("creating a temporary file for {}", dest.display()))?;
        Ok(AtomicFile {
            dest: dest.to_path_buf(),
            out: BufWriter::new(file),
        })
    }

    fn commit(self) -> anyhow::Result<()> {
        let dest = self.dest;
        let file = self
            .out
            .into_inner()
            .map_err(|e| e.into_error())
            .and_then(|file| file.as_file().sync_all().map(|()| file))
            .with_context(|| format!("writing {}", dest.display()))?;
        file.persist(&dest)
            .map_err(|e| e.error)
            .with_context(|| format!("moving the finished file to {}", dest.display()))?;
        Ok(())
    }
}

/// The directory a file at `path` lives in; `.` for a bare file name.
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Appends the fields of `r`'s CSV row, without the line end.
fn format_row(row: &mut Vec<u8>, r: &RequestRecord<'_>) {
    let mut num = itoa::Buffer::new();
    let mut int_field = |row: &mut Vec<u8>, value: u64| {
        row.extend_from_slice(num.format(value).as_bytes());
        row.push(b',');
    };
    int_field(row, r.instance_id.into());
    int_field(row, r.request_id);
    push_text_field(row, r.model);
    row.push(b',');
    int_field(row, r.input_toks.into());
    int_field(row, r.output_toks.into());
    int_field(row, r.arrival_ns);
    int_field(row, r.end_ns);
    int_field(row, r.latency_ns());
    int_field(row, r.queuing_delay_ns);
    int_field(row, r.ttft_ns());
    int_field(row, r.tpot_ns());
    push_itl_field(row, r.itl_ns);
}

/// Appends the [`PD_CSV_COLUMNS`] of `r`.
fn push_pd_columns(row: &mut Vec<u8>, r: &RequestRecord<'_>) {
    let mut num = itoa::Buffer::new();
    let (prefill, transfer) = match &r.pd {
        Some(pd) => (pd.prefill_instance, pd.kv_transfer_ns()),
        None => (r.instance_id, 0),
    };
    row.push(b',');
    row.extend_from_slice(num.format(prefill).as_bytes());
    row.push(b',');
    row.extend_from_slice(num.format(transfer).as_bytes());
}

/// Appends the [`SESSION_COLUMNS`]: `session`'s id and step label, or two empty fields.
fn push_session_columns(row: &mut Vec<u8>, session: Option<(&str, &str)>) {
    row.push(b',');
    if let Some((id, step)) = session {
        push_text_field(row, id);
        row.push(b',');
        push_text_field(row, step);
    } else {
        row.push(b',');
    }
}

/// Appends `itl` as Python's list repr, `[a, b, c]`, quoted when it contains a comma.
fn push_itl_field(row: &mut Vec<u8>, itl: &[u64]) {
    let mut num = itoa::Buffer::new();
    let quoted = itl.len() > 1;
    if quoted {
        row.push(b'"');
    }
    row.push(b'[');
    for (i, &gap) in itl.iter().enumerate() {
        if i > 0 {
            row.extend_from_slice(b", ");
        }
        row.extend_from_slice(num.format(gap).as_bytes());
    }
    row.push(b']');
    if quoted {
        row.push(b'"');
    }
}

/// Appends `text` with Python's `QUOTE_MINIMAL` rule: quoted, with quotes doubled, only when
/// it contains a comma, a quote or a line break.
pub(super) fn push_text_field(row: &mut Vec<u8>, text: &str) {
    if !text.contains([',', '"', '\r', '\n']) {
        row.extend_from_slice(text.as_bytes());
        return;
    }
    row.push(b'"');
    for &byte in text.as_bytes() {
        if byte == b'"' {
            row.push(b'"');
        }
        row.push(byte);
    }
    row.push(b'"');
}

#[cfg(test)]
mod tests;
