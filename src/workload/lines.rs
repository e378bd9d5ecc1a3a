//! Streaming a line-oriented workload file, and parsing one JSON object line with errors that
//! name the offending field.

use super::{FieldProblem, Request, WorkloadError};
use serde::de::DeserializeOwned;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// The most bytes a line of a workload file may take (256 MiB, far beyond a session line
/// carrying the token ids of many calls): a file without line ends (`/dev/zero`, a binary
/// file) is refused at that length rather than read into memory whole.
pub(super) const MAX_LINE_BYTES: u64 = 1 << 28;

/// Reads the next line of `reader` into `raw` (appended, its `\n` included) as `read_until`
/// does, refusing one longer than [`MAX_LINE_BYTES`] (line `line_no` of `path`).
pub(super) fn read_bounded_line(
    reader: &mut impl BufRead,
    raw: &mut Vec<u8>,
    path: &Path,
    line_no: u64,
) -> Result<usize, WorkloadError> {
    let read = (reader.take(MAX_LINE_BYTES + 1))
        .read_until(b'\n', raw)
        .map_err(|source| WorkloadError::Io {
            path: path.to_owned(),
            source,
        })?;
    if read as u64 > MAX_LINE_BYTES {
        let problem = FieldProblem::LineTooLong {
            limit: MAX_LINE_BYTES,
        };
        return Err(WorkloadError::invalid(path, line_no, "(text)", problem));
    }
    Ok(read)
}

/// The non-blank lines of a file, one at a time, with their 1-based line numbers (a UTF-8
/// byte-order mark at the start is skipped). One line buffer is reused for the whole file.
pub(super) struct Lines {
    path: PathBuf,
    reader: BufReader<File>,
    raw: Vec<u8>,
    line: u64,
}

impl Lines {
    /// The lines of `path`.
    pub(super) fn open(path: &Path) -> Result<Lines, WorkloadError> {
        let file = File::open(path).map_err(|source| WorkloadError::Io {
            path: path.to_owned(),
            source,
        })?;
        Ok(Lines {
            path: path.to_owned(),
            reader: BufReader::new(file),
            raw: Vec::new(),
            line: 0,
        })
    }

    /// The next non-blank line and its number, or `None` at the end of the file.
    pub(super) fn next_line(&mut self) -> Result<Option<(&str, u64)>, WorkloadError> {
        loop {
            self.raw.clear();
            let line = self.line + 1;
            if read_bounded_line(&mut self.reader, &mut self.raw, &self.path, line)? == 0 {
                return Ok(None);
            }
            self.line = line;
            if !self.text()?.trim().is_empty() {
                break;
            }
        }
        Ok(Some((self.text()?, self.line)))
    }

    /// The line read last, without a byte-order mark on line 1; bytes that are not UTF-8 are
    /// refused naming the line.
    fn text(&self) -> Result<&str, WorkloadError> {
        let text = std::str::from_utf8(&self.raw).map_err(|e| {
            let problem = FieldProblem::NotUtf8 {
                column: e.valid_up_to() + 1,
            };
            WorkloadError::invalid(&self.path, self.line, "(text)", problem)
        })?;
        Ok(match self.line {
            1 => text.trim_start_matches('\u{feff}'),
            _ => text,
        })
    }
}

/// The first `limit` requests (all when `None`) that `next` gives, in its order.
pub(super) fn first_rows(
    limit: Option<usize>,
    mut next: impl FnMut() -> Result<Option<Request>, WorkloadError>,
) -> Result<Vec<Request>, WorkloadError> {
    let mut requests = Vec::new();
    while limit.is_none_or(|n| requests.len() < n) {
        match next()? {
            Some(request) => requests.push(request),
            None => break,
        }
    }
    Ok(requests)
}

/// Calls `each(text, line)` on the non-blank lines of `path` (see [`Lines`]) until it returns
/// `Ok(false)` or the file ends.
pub(super) fn for_each_line(
    path: &Path,
    mut each: impl FnMut(&str, u64) -> Result<bool, WorkloadError>,
) -> Result<(), WorkloadError> {
    let mut lines = Lines::open(path)?;
    while let Some((text, line)) = lines.next_line()? {
        if !each(text, line)? {
            break;
        }
    }
    Ok(())
}

/// Parses `text`, line `line` of `path`, as a JSON object of type `T`; the error names the
/// field that does not fit (`(line)` when the line is not an object, `(json)` when it is not
/// JSON).
pub(super) fn parse_object<T: DeserializeOwned>(
    text: &str,
    path: &Path,
    line: u64,
) -> Result<T, WorkloadError> {
    let invalid = |field: &str, problem| WorkloadError::invalid(path, line, field, problem);
    if let Some(kind) = crate::serde_messages::non_object_json(text) {
        return Err(invalid("(line)", FieldProblem::NotObject { found: kind }));
    }
    // The plain parse is fast; only a line that fails is parsed again with path tracking.
    let plain = match serde_json::from_str(text) {
        Ok(value) => return Ok(value),
        Err(e) => e,
    };
    let mut de = serde_json::Deserializer::from_str(text);
    let Err(e) = serde_path_to_error::deserialize::<_, T>(&mut de) else {
        return Err(invalid("(json)", FieldProblem::Syntax(plain.to_string())));
    };
    let field = e.path().to_string();
    let inner = e.into_inner();
    Err(if inner.is_data() {
        let message = crate::serde_messages::in_user_terms(&inner.to_string());
        invalid(&field, FieldProblem::Syntax(message))
    } else {
        invalid("(json)", FieldProblem::MalformedJson(inner.to_string()))
    })
}
