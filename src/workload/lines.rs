//! Streaming a line-oriented workload file, and parsing one JSON object line with errors that
//! name the offending field.

use super::{FieldProblem, WorkloadError};
use serde::de::DeserializeOwned;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// Calls `each(text, line)` on the non-blank lines of `path` (1-based line numbers; a UTF-8
/// byte-order mark at the start is skipped) until it returns `Ok(false)` or the file ends.
/// One line buffer is reused for the whole file.
pub(super) fn for_each_line(
    path: &Path,
    mut each: impl FnMut(&str, u64) -> Result<bool, WorkloadError>,
) -> Result<(), WorkloadError> {
    let io = |source| WorkloadError::Io {
        path: path.to_owned(),
        source,
    };
    let mut reader = BufReader::new(File::open(path).map_err(io)?);
    let mut buf = String::new();
    let mut line = 0u64;
    loop {
        buf.clear();
        if reader.read_line(&mut buf).map_err(io)? == 0 {
            return Ok(());
        }
        line += 1;
        let text = if line == 1 {
            buf.trim_start_matches('\u{feff}')
        } else {
            &buf
        };
        if !text.trim().is_empty() && !each(text, line)? {
            return Ok(());
        }
    }
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
