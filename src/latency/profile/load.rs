//! Reading a profile bundle from disk: folder discovery and the category CSVs.
//!
//! Every `time_us` must be a finite number in (0, 10^9] µs (zero, negative or non-finite
//! times are refused naming the line) and becomes `max(1, round(time_us × 1000))` ns at load,
//! with ties to even (pandas' `round`); the 1 ns floor only catches times below 0.5 ns.
//!
//! Grid points must come in the order the profiler writes them, with no duplicates:
//! `dense.csv`/`per_sequence.csv` in increasing key within each layer, `attention.csv` in
//! increasing `(prefill_chunk, kv_prefill, n_decode, kv_decode)`, `moe.csv` in increasing
//! `(tokens, activated_experts)`. LLMServingSim sorts and de-duplicates silently
//! instead; every bundle it ships is already in this order, so a violation means a damaged or
//! hand-edited file and is reported with its line.

use std::fs;
use std::path::{Path, PathBuf};

use super::ProfileError;
use super::arch::{Architecture, Category};
use super::lookup::{AttentionTable, MoeTable, Table1d};

/// Longest time one profiled operation may take, µs (1000 s): more is a damaged file.
const MAX_TIME_US: f64 = 1e9;

/// `latency_ns = max(1, round(time_us × 1000))`, rounding half to even.
pub(super) fn latency_ns(time_us: f64) -> f64 {
    (time_us * 1000.0).round_ties_even().max(1.0)
}

/// Refuses a `path` that exists but is not a regular file (after links): a device such as
/// `/dev/zero` would be read without end, a FIFO would block. A missing path is left to the
/// reader, which reports it.
pub(super) fn regular_file(path: &Path) -> Result<(), ProfileError> {
    match fs::metadata(path) {
        Ok(meta) if !meta.is_file() => Err(ProfileError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other("not a regular file"),
        }),
        _ => Ok(()),
    }
}

/// A CSV file being read record by record, with its named columns located.
pub(super) struct CsvFile<'p> {
    path: &'p Path,
    reader: csv::Reader<fs::File>,
    headers: csv::StringRecord,
}

/// One data record of a [`CsvFile`], with typed access by column.
pub(super) struct Record<'a> {
    path: &'a Path,
    record: &'a csv::ByteRecord,
    headers: &'a csv::StringRecord,
    /// 1-based line of the record in the file.
    pub line: u64,
}

impl<'p> CsvFile<'p> {
    /// Opens `path`; a file that does not exist is [`ProfileError::MissingFile`].
    pub fn open(path: &'p Path) -> Result<CsvFile<'p>, ProfileError> {
        regular_file(path)?;
        let file = fs::File::open(path).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => ProfileError::MissingFile {
                path: path.to_path_buf(),
            },
            _ => ProfileError::Io {
                path: path.to_path_buf(),
                source,
            },
        })?;
        // Records end at `\n` alone: with the default CRLF terminator a record ends at the `\r`
        // and its `\n` is counted into the next one, so every line number in a CRLF file (as
        // LLMServingSim writes them) would be one short. A field's trailing `\r` is trimmed.
        let mut reader = csv::ReaderBuilder::new()
            .terminator(csv::Terminator::Any(b'\n'))
            .from_reader(file);
        let headers: csv::StringRecord = reader
            .headers()
            .map_err(|e| csv_error(path, e))?
            .iter()
            .map(str::trim)
            .collect();
        Ok(CsvFile {
            path,
            reader,
            headers,
        })
    }

    /// Index of the column named `name`; its absence is an error at line 1.
    pub fn column(&self, name: &str) -> Result<usize, ProfileError> {
        self.find_column(name)
            .ok_or_else(|| ProfileError::Malformed {
                path: self.path.to_path_buf(),
                line: 1,
                column: name.to_string(),
                message: format!(
                    "missing column (header: {})",
                    self.headers.iter().collect::<Vec<_>>().join(",")
                ),
            })
    }

    /// Index of the column named `name`, if present.
    pub fn find_column(&self, name: &str) -> Option<usize> {
        self.headers.iter().position(|h| h.trim() == name)
    }

    /// Calls `visit` on every data record, in file order.
    pub fn for_each(
        mut self,
        mut visit: impl FnMut(&Record<'_>) -> Result<(), ProfileError>,
    ) -> Result<(), ProfileError> {
        let mut record = csv::ByteRecord::new();
        while self
            .reader
            .read_byte_record(&mut record)
            .map_err(|e| csv_error(self.path, e))?
        {
            let line = record.position().map_or(0, |p| p.line());
            visit(&Record {
                path: self.path,
                record: &record,
                headers: &self.headers,
                line,
            })?;
        }
        Ok(())
    }
}

impl Record<'_> {
    fn bytes(&self, idx: usize) -> &[u8] {
        self.record.get(idx).unwrap_or(b"").trim_ascii()
    }

    /// The text of column `idx`, without surrounding whitespace.
    pub fn text(&self, idx: usize) -> Result<&str, ProfileError> {
        std::str::from_utf8(self.bytes(idx))
            .map_err(|_| self.malformed(idx, "the text is not UTF-8".into()))
    }

    /// Column `idx` as a non-negative integer (decimal digits only).
    pub fn integer(&self, idx: usize) -> Result<u64, ProfileError> {
        let bytes = self.bytes(idx);
        let mut value: Option<u64> = (!bytes.is_empty()).then_some(0);
        for &b in bytes {
            value = value
                .filter(|_| b.is_ascii_digit())
                .and_then(|v| v.checked_mul(10)?.checked_add(u64::from(b - b'0')));
        }
        value.ok_or_else(|| {
            let text = String::from_utf8_lossy(bytes);
            self.malformed(idx, format!("`{text}` is not a non-negative integer"))
        })
    }

    /// Column `idx` as a finite number.
    pub fn finite(&self, idx: usize) -> Result<f64, ProfileError> {
        let text = self.text(idx)?;
        match text.parse::<f64>() {
            Ok(value) if value.is_finite() => Ok(value),
            _ => Err(self.malformed(idx, format!("`{text}` is not a finite number"))),
        }
    }

    /// Column `idx` as a time in µs within `(0, MAX_TIME_US]`, converted to ns.
    pub fn latency(&self, idx: usize) -> Result<f64, ProfileError> {
        let us = self.finite(idx)?;
        if us > 0.0 && us <= MAX_TIME_US {
            Ok(latency_ns(us))
        } else {
            let shown = if us.abs() < 1e15 {
                us.to_string()
            } else {
                format!("{us:e}")
            };
            Err(self.malformed(
                idx,
                format!("time {shown} µs is outside (0, {MAX_TIME_US:e}] µs"),
            ))
        }
    }

    /// A [`ProfileError::Malformed`] for column `idx` of this record.
    pub fn malformed(&self, idx: usize, message: String) -> ProfileError {
        ProfileError::Malformed {
            path: self.path.to_path_buf(),
            line: self.line,
            column: self.headers.get(idx).unwrap_or("?").to_string(),
            message,
        }
    }
}

fn csv_error(path: &Path, e: csv::Error) -> ProfileError {
    let line = e.position().map_or(0, |p| p.line());
    let message = e.to_string();
    match e.into_kind() {
        csv::ErrorKind::Io(source) => ProfileError::Io {
            path: path.to_path_buf(),
            source,
        },
        _ => ProfileError::Malformed {
            path: path.to_path_buf(),
            line,
            column: "(row)".into(),
            message,
        },
    }
}

/// Refuses a grid point that does not come strictly after the previous one; `what` names the
/// key columns (for the message).
fn check_order<K: PartialOrd + std::fmt::Debug>(
    path: &Path,
    line: u64,
    previous: Option<&K>,
    point: &K,
    what: &str,
) -> Result<(), ProfileError> {
    match previous {
        Some(prev) if prev == point => Err(ProfileError::DuplicatePoint {
            path: path.to_path_buf(),
            line,
            point: format!("{what} = {point:?}"),
        }),
        Some(prev) if prev > point => Err(ProfileError::Unsorted {
            path: path.to_path_buf(),
            line,
            message: format!(
                "{what} = {point:?} comes after {prev:?}; the rows must be in increasing order"
            ),
        }),
        _ => Ok(()),
    }
}

/// `dense.csv` (`layer,tokens,time_us`) or `per_sequence.csv` (`layer,sequences,time_us`):
/// one table per layer, each layer checked against the catalog block of `category`.
pub(super) fn load_1d(
    path: &Path,
    category: Category,
    arch: &Architecture,
) -> Result<Vec<(String, Table1d)>, ProfileError> {
    let (key_column, block) = match category {
        Category::PerSequence => ("sequences", "per_sequence"),
        _ => ("tokens", "dense"),
    };
    let csv = CsvFile::open(path)?;
    let (layer_col, key_col, time_col) = (
        csv.column("layer")?,
        csv.column(key_column)?,
        csv.column("time_us")?,
    );
    let mut layers: Vec<(String, Vec<(u64, f64)>)> = Vec::new();
    csv.for_each(|r| {
        let layer = r.text(layer_col)?;
        let key = r.integer(key_col)?;
        let ns = r.latency(time_col)?;
        let points = match layers.iter_mut().find(|(name, _)| name == layer) {
            Some((_, points)) => points,
            None => {
                if !arch.catalog_has(category, layer) {
                    return Err(ProfileError::UnknownLayer {
                        path: path.to_path_buf(),
                        line: r.line,
                        layer: layer.to_string(),
                        category: block,
                        architecture: arch.source.clone(),
                    });
                }
                layers.push((layer.to_string(), Vec::new()));
                &mut layers.last_mut().expect("pushed above").1
            }
        };
        if let Some(&(previous, _)) = points.last()
            && previous >= key
        {
            let what = format!("{key_column} of layer `{layer}`");
            check_order(path, r.line, Some(&previous), &key, &what)?;
        }
        points.push((key, ns));
        Ok(())
    })?;
    super::shape::check_1d(path, key_column, &layers)?;
    Ok(layers
        .into_iter()
        .map(|(name, points)| (name, Table1d::new(points)))
        .collect())
}

/// `attention.csv`: `prefill_chunk,kv_prefill,n_decode,kv_decode,time_us`.
pub(super) fn load_attention(path: &Path) -> Result<AttentionTable, ProfileError> {
    let csv = CsvFile::open(path)?;
    let names = ["prefill_chunk", "kv_prefill", "n_decode", "kv_decode"];
    let mut cols = [0; 4];
    for (col, name) in cols.iter_mut().zip(names) {
        *col = csv.column(name)?;
    }
    let time_col = csv.column("time_us")?;
    let mut points: Vec<([u64; 4], f64)> = Vec::new();
    csv.for_each(|r| {
        let mut key = [0u64; 4];
        for (k, &col) in key.iter_mut().zip(&cols) {
            *k = r.integer(col)?;
        }
        if let Some((idx, why)) = super::shape::attention_row(key) {
            return Err(r.malformed(cols[idx], why.into()));
        }
        let order = "(prefill_chunk, kv_prefill, n_decode, kv_decode)";
        check_order(path, r.line, points.last().map(|p| &p.0), &key, order)?;
        points.push((key, r.latency(time_col)?));
        Ok(())
    })?;
    if points.is_empty() {
        return Err(ProfileError::Empty {
            path: path.to_path_buf(),
        });
    }
    let keys: Vec<[u64; 4]> = points.iter().map(|p| p.0).collect();
    super::shape::check_attention(path, &keys)?;
    Ok(AttentionTable::new(points))
}

/// `moe.csv`: `tokens,activated_experts,time_us`.
pub(super) fn load_moe(path: &Path) -> Result<MoeTable, ProfileError> {
    let csv = CsvFile::open(path)?;
    let (tokens_col, ae_col, time_col) = (
        csv.column("tokens")?,
        csv.column("activated_experts")?,
        csv.column("time_us")?,
    );
    let mut points: Vec<(u64, u64, f64)> = Vec::new();
    csv.for_each(|r| {
        let key: (u64, u64) = (r.integer(tokens_col)?, r.integer(ae_col)?);
        let previous = points.last().map(|&(t, a, _)| (t, a));
        check_order(
            path,
            r.line,
            previous.as_ref(),
            &key,
            "(tokens, activated_experts)",
        )?;
        points.push((key.0, key.1, r.latency(time_col)?));
        Ok(())
    })?;
    if points.is_empty() {
        return Err(ProfileError::Empty {
            path: path.to_path_buf(),
        });
    }
    super::shape::check_moe(path, &points)?;
    Ok(MoeTable::new(points))
}

/// The sorted sub-folder names of `dir` (empty when it cannot be read).
pub(super) fn subfolders(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The TP degrees with a `tp<N>/` folder in the bundle, ascending.
pub(super) fn tp_folders(bundle: &Path) -> Vec<u32> {
    let mut tps: Vec<u32> = subfolders(bundle)
        .iter()
        .filter_map(|name| name.strip_prefix("tp")?.parse().ok())
        .collect();
    tps.sort_unstable();
    tps
}

/// The error for a bundle folder that does not exist: it names the deepest existing folder
/// on the way and lists what that folder holds.
pub(super) fn missing_bundle(root: &Path, bundle: &Path) -> ProfileError {
    let mut existing: PathBuf = bundle.to_path_buf();
    while !existing.is_dir() && existing.pop() && existing.starts_with(root) {}
    let listing = if existing.is_dir() && existing.starts_with(root) {
        let names = subfolders(&existing);
        if names.is_empty() {
            format!("{} is empty", existing.display())
        } else {
            format!("{} has: {}", existing.display(), names.join(", "))
        }
    } else {
        format!("the profile root {} does not exist", root.display())
    };
    ProfileError::MissingBundle {
        path: bundle.to_path_buf(),
        listing,
    }
}
