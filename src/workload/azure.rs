//! Azure's LLM inference traces (AzurePublicDataset, the Splitwise paper): CSV with columns
//! `TIMESTAMP` (wall clock, `YYYY-MM-DD HH:MM:SS.fffffff`, optionally with an offset from
//! UTC), `ContextTokens` and `GeneratedTokens`, in any order; other columns are ignored.

use super::jsonl::MAX_TOKENS;
use super::lines::first_rows;
use super::{FieldProblem, Request, WorkloadError};
use crate::Nanos;
use crate::config::Bound;
use std::path::{Path, PathBuf};

/// The columns read, as the header names them.
const COLUMNS: [&str; 3] = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"];

/// Reads the first `limit` requests (all when `None`) of an Azure trace, streaming it row by
/// row. Arrivals are the timestamps' distance from the earliest one read, exact to the ns;
/// requests get ids in file order and come sorted by arrival (stable).
pub fn read_azure(path: &Path, limit: Option<usize>) -> Result<Vec<Request>, WorkloadError> {
    let mut rows = AzureRows::open(path)?;
    let mut requests = first_rows(limit, || rows.next_request())?;
    let Some(start) = requests.iter().map(|r| r.arrival_ns).min() else {
        return Err(WorkloadError::Empty {
            path: path.to_owned(),
        });
    };
    for r in &mut requests {
        r.arrival_ns -= start;
    }
    requests.sort_by_key(|r| r.arrival_ns);
    Ok(requests)
}

/// An Azure trace read a row at a time, in file order (ids from 0), each request arriving at
/// its timestamp's wall clock in ns.
pub(super) struct AzureRows {
    path: PathBuf,
    reader: csv::Reader<std::fs::File>,
    /// The columns of [`COLUMNS`], by position.
    columns: [usize; 3],
    record: csv::StringRecord,
    next_id: u64,
}

impl AzureRows {
    /// Reads `path` and its header.
    pub(super) fn open(path: &Path) -> Result<AzureRows, WorkloadError> {
        let io = |source| WorkloadError::Io {
            path: path.to_owned(),
            source,
        };
        // Rows end at `\n` only (a `\r` before it is trimmed with the field): the reader's line
        // numbers are then right in CRLF files too, which Azure's are.
        let mut reader = csv::ReaderBuilder::new()
            .flexible(true)
            .terminator(csv::Terminator::Any(b'\n'))
            .from_reader(std::fs::File::open(path).map_err(io)?);
        let header = reader.headers().map_err(|e| csv_error(path, e))?.clone();
        let mut columns = [0usize; 3];
        for (column, name) in columns.iter_mut().zip(COLUMNS) {
            *column = header
                .iter()
                .position(|h| h.trim() == name)
                .ok_or_else(|| {
                    WorkloadError::invalid(path, 1, name, FieldProblem::MissingColumn)
                })?;
        }
        Ok(AzureRows {
            path: path.to_owned(),
            reader,
            columns,
            record: csv::StringRecord::new(),
            next_id: 0,
        })
    }

    /// The next request, or `None` at the end of the file.
    pub(super) fn next_request(&mut self) -> Result<Option<Request>, WorkloadError> {
        let path = self.path.as_path();
        if !(self.reader.read_record(&mut self.record)).map_err(|e| csv_error(path, e))? {
            return Ok(None);
        }
        let record = &self.record;
        let line = record.position().map_or(0, csv::Position::line);
        let invalid = |field: &str, problem| WorkloadError::invalid(path, line, field, problem);
        let get = |k: usize| {
            let problem = || FieldProblem::ShortRow {
                fields: record.len(),
            };
            (record.get(self.columns[k]).map(str::trim))
                .ok_or_else(|| invalid(COLUMNS[k], problem()))
        };
        let arrival_ns = wall_clock_ns(get(0)?).map_err(|m| invalid(COLUMNS[0], m))?;
        let input = tokens(get(1)?).map_err(|m| invalid(COLUMNS[1], m))?;
        let output = tokens(get(2)?).map_err(|m| invalid(COLUMNS[2], m))?;
        let id = self.next_id;
        self.next_id += 1;
        Ok(Some(Request {
            id,
            line,
            model: None,
            arrival_ns,
            input_toks: input,
            output_toks: output,
            token_ids: Vec::new(),
            prompt_blocks: None,
            known_hashes: None,
        }))
    }
}

/// A CSV-level error (bad UTF-8, I/O) in the reader's terms.
fn csv_error(path: &Path, e: csv::Error) -> WorkloadError {
    let line = e.position().map_or(0, csv::Position::line);
    let message = e.to_string();
    match e.into_kind() {
        csv::ErrorKind::Io(source) => WorkloadError::Io {
            path: path.to_owned(),
            source,
        },
        _ => WorkloadError::invalid(path, line, "(row)", FieldProblem::Syntax(message)),
    }
}

/// A token count in `[1, MAX_TOKENS]`.
fn tokens(text: &str) -> Result<u32, FieldProblem> {
    let n: u64 = (text.parse())
        .map_err(|_| FieldProblem::wrong_kind("a whole number of tokens", format!("`{text}`")))?;
    match n {
        0 => Err(FieldProblem::OutOfRange {
            value: n.to_string(),
            bound: Bound::AtLeast(1),
        }),
        n if n > MAX_TOKENS => Err(FieldProblem::BeyondContext {
            name: None,
            value: n,
            limit: MAX_TOKENS,
        }),
        n => Ok(n as u32),
    }
}

/// `YYYY-MM-DD HH:MM:SS[.f...][Z|±HH:MM]` (a `T` may separate date and time; up to 9
/// fraction digits; an offset from UTC, as Azure's 2024 traces write, is taken off) as ns since
/// 1970-01-01 00:00:00 UTC.
pub fn wall_clock_ns(text: &str) -> Result<Nanos, FieldProblem> {
    let bad = || FieldProblem::wrong_kind("YYYY-MM-DD HH:MM:SS[.fffffff]", format!("`{text}`"));
    let (date, time) = text.split_once([' ', 'T']).ok_or_else(bad)?;
    let (time, offset_s) = utc_offset(time).ok_or_else(bad)?;
    let (clock, fraction) = time.split_once('.').unwrap_or((time, ""));
    let [year, month, day] = fields(date, '-').ok_or_else(bad)?;
    let [hour, minute, second] = fields(clock, ':').ok_or_else(bad)?;
    let nanos = fraction_ns(fraction).ok_or_else(bad)?;
    let valid = (1970..=2200).contains(&year)
        && (1..=12).contains(&month)
        && (1..=days_in_month(year, month)).contains(&day)
        && hour < 24
        && minute < 60
        && second < 60;
    let seconds = days_since_epoch(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    match seconds.checked_add_signed(-offset_s) {
        Some(utc) if valid => Ok(utc * 1_000_000_000 + nanos),
        _ => Err(FieldProblem::NotADate {
            text: text.to_owned(),
        }),
    }
}

/// The time of day without its offset from UTC, and the offset in seconds (0 without one).
fn utc_offset(time: &str) -> Option<(&str, i64)> {
    if let Some(local) = time.strip_suffix('Z') {
        return Some((local, 0));
    }
    let Some(at) = time.find(['+', '-']) else {
        return Some((time, 0));
    };
    let (hours, minutes) = time[at + 1..].split_once(':')?;
    let digits = |s: &str| s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(hours) || !digits(minutes) {
        return None;
    }
    let offset = hours.parse::<i64>().ok()? * 3600 + minutes.parse::<i64>().ok()? * 60;
    let sign = if time.as_bytes()[at] == b'-' { -1 } else { 1 };
    Some((&time[..at], sign * offset))
}

/// Up to 9 fraction-of-a-second digits as ns.
fn fraction_ns(digits: &str) -> Option<u64> {
    if digits.len() > 9 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value = if digits.is_empty() {
        0
    } else {
        digits.parse::<u64>().ok()?
    };
    Some(value * 10u64.pow(9 - digits.len() as u32))
}

/// Three unsigned numbers separated by `sep`.
fn fields(text: &str, sep: char) -> Option<[u64; 3]> {
    let mut parts = text.split(sep);
    let mut out = [0u64; 3];
    for v in &mut out {
        let part = parts.next()?;
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *v = part.parse().ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// Days in `month` (1-12) of `year` (Gregorian).
fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a Gregorian date on or after it (Howard Hinnant's
/// `days_from_civil`).
pub fn days_since_epoch(year: u64, month: u64, day: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let year_of_era = y - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}
