//! `results.csv` and `timings.csv` of a sweep folder: their columns, rows streamed as points
//! finish (each flushed), what a rerun finds already done, and the final copy sorted by point
//! id, written atomically.
//!
//! `results.csv` holds only what the spec and the simulation decide, so the same sweep gives
//! the same bytes wherever it runs; each point's wall time goes to `timings.csv`.

use super::points::Point;
use crate::metrics::write_atomically;
use anyhow::{Context, bail};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Columns every results.csv has or may get; axes and derived fields may not use these names.
pub const RESERVED_COLUMNS: [&str; 8] = [
    "point",
    "config",
    "seed",
    "gpus",
    "status",
    "error",
    "pareto",
    "meets_slo",
];

/// Columns added by `--objectives` and `--slo`, recomputed on every report.
pub const ANNOTATIONS: [&str; 2] = ["pareto", "meets_slo"];

/// The summary metrics kept per point (keys of the run's summary JSON).
pub fn metric_names() -> Vec<String> {
    let mut names: Vec<String> = [
        "completed",
        "duration",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "output_throughput",
        "total_token_throughput",
    ]
    .map(str::to_owned)
    .to_vec();
    for metric in ["ttft", "tpot", "itl", "e2el"] {
        for stat in ["mean", "median", "std", "p90", "p99"] {
            names.push(format!("{stat}_{metric}_ms"));
        }
    }
    names
}

/// Whether `name` is a metric column.
pub fn is_metric(name: &str) -> bool {
    metric_names().iter().any(|m| m == name)
}

/// The header of a sweep's results.csv before annotations.
pub fn header(param_names: &[String]) -> Vec<String> {
    let mut h: Vec<String> = ["point", "config", "seed"].map(str::to_owned).to_vec();
    h.extend(param_names.iter().cloned());
    h.push("gpus".into());
    h.extend(metric_names());
    h.extend(["status", "error"].map(str::to_owned));
    h
}

/// How one point ended.
#[derive(Debug)]
pub enum Outcome {
    /// It ran: its GPU count and summary JSON.
    Ok { gpus: u64, summary: Value },
    /// It failed, with this message.
    Failed(String),
}

/// The results.csv fields of `point` with `outcome`.
pub fn row(point: &Point, outcome: &Outcome) -> Vec<String> {
    let mut r = vec![
        point.id.to_string(),
        point.config.to_string(),
        point.seed.clone(),
    ];
    r.extend(point.params.iter().map(|(_, v)| v.clone()));
    match outcome {
        Outcome::Ok { gpus, summary } => {
            r.push(gpus.to_string());
            for m in metric_names() {
                r.push(summary.get(&m).map_or_else(String::new, value_text));
            }
            r.extend(["ok".to_owned(), String::new()]);
        }
        Outcome::Failed(message) => {
            r.push(String::new());
            r.extend(metric_names().iter().map(|_| String::new()));
            let one_line: Vec<&str> = message.lines().map(str::trim).collect();
            r.extend(["failed".to_owned(), one_line.join("; ")]);
        }
    }
    r
}

fn value_text(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// One CSV line (with its newline) of `fields`.
pub fn csv_line(fields: &[String]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    // Writing to memory cannot fail.
    let _ = w.write_record(fields);
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}

/// A results table: its header and rows, as read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// The index of column `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    /// Reads `path`; an unfinished last line (no newline: the sweep was killed while writing
    /// it) and rows with the wrong number of fields are left out.
    pub fn read(path: &Path) -> anyhow::Result<Table> {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let mut reader = csv::ReaderBuilder::new()
            .flexible(true)
            .from_reader(&bytes[..end]);
        let header: Vec<String> = reader
            .headers()
            .with_context(|| format!("reading {}", path.display()))?
            .iter()
            .map(str::to_owned)
            .collect();
        let mut rows = Vec::new();
        for record in reader.records() {
            let record = record.with_context(|| format!("reading {}", path.display()))?;
            if record.len() == header.len() {
                rows.push(record.iter().map(str::to_owned).collect());
            }
        }
        Ok(Table { header, rows })
    }

    /// The table without the annotation columns.
    pub fn without_annotations(mut self) -> Table {
        let keep: Vec<bool> = self
            .header
            .iter()
            .map(|h| !ANNOTATIONS.contains(&h.as_str()))
            .collect();
        self.header = kept(std::mem::take(&mut self.header), &keep);
        self.rows = std::mem::take(&mut self.rows)
            .into_iter()
            .map(|row| kept(row, &keep))
            .collect();
        self
    }

    /// Sorts the rows by the numeric `point` column (the first), keeping the last row of a
    /// point written twice.
    pub fn sort_by_point(&mut self) {
        let mut by_id: BTreeMap<u64, Vec<String>> = BTreeMap::new();
        let mut other = Vec::new();
        for row in std::mem::take(&mut self.rows) {
            match row.first().and_then(|p| p.parse::<u64>().ok()) {
                Some(id) => {
                    by_id.insert(id, row);
                }
                None => other.push(row),
            }
        }
        self.rows = by_id.into_values().chain(other).collect();
    }

    /// Writes the table to `path` atomically.
    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        write_atomically(path, |out| {
            out.write_all(csv_line(&self.header).as_bytes())?;
            for row in &self.rows {
                out.write_all(csv_line(row).as_bytes())?;
            }
            Ok(())
        })
    }
}

/// The files of a sweep folder.
#[derive(Debug, Clone)]
pub struct Folder {
    pub dir: PathBuf,
}

impl Folder {
    /// `results.csv`.
    pub fn results(&self) -> PathBuf {
        self.dir.join("results.csv")
    }
    /// `timings.csv`: each finished point's wall time.
    pub fn timings(&self) -> PathBuf {
        self.dir.join("timings.csv")
    }
    /// `points/`: each finished point's summary JSON.
    pub fn points(&self) -> PathBuf {
        self.dir.join("points")
    }
    /// `configs/`: the cluster config of each configuration, when the sweep has one.
    pub fn configs(&self) -> PathBuf {
        self.dir.join("configs")
    }
    /// `workloads/`: the workload spec of each configuration, when the sweep edits one.
    pub fn workloads(&self) -> PathBuf {
        self.dir.join("workloads")
    }

    /// `policies/`: the policy bundle of each configuration, when the sweep edits one.
    pub fn policies(&self) -> PathBuf {
        self.dir.join("policies")
    }
    /// `sweep.log`: what the points' runs said on stderr.
    pub fn log(&self) -> PathBuf {
        self.dir.join("sweep.log")
    }
}

/// What a rerun finds done: the rows of points that finished with status `ok` and match the
/// spec's points. Failed points are run again. A results.csv of another spec is refused.
pub fn finished(folder: &Folder, header: &[String], points: &[Point]) -> anyhow::Result<Table> {
    let path = folder.results();
    if !path.exists() {
        return Ok(Table {
            header: header.to_vec(),
            rows: Vec::new(),
        });
    }
    let table = Table::read(&path)?.without_annotations();
    if table.header != header {
        bail!(
            "{} has other columns than this sweep ({}); give another --out",
            path.display(),
            table.header.join(",")
        );
    }
    let status = header.len() - 2;
    let mut rows = Vec::new();
    for row in table.rows {
        let id: usize = row[0]
            .parse()
            .with_context(|| format!("{}: point `{}` is not a number", path.display(), row[0]))?;
        let Some(point) = points.get(id) else {
            bail!(
                "{}: point {id} is not in this sweep; give another --out",
                path.display()
            );
        };
        let expected = super::results::row(point, &Outcome::Failed(String::new()));
        if row[..3 + point.params.len()] != expected[..3 + point.params.len()] {
            bail!(
                "{}: point {id} has other parameters than this sweep's; give another --out",
                path.display()
            );
        }
        if row[status] == "ok" {
            rows.push(row);
        }
    }
    Ok(Table {
        header: header.to_vec(),
        rows,
    })
}

/// An append-only CSV file whose every line is flushed as it is written.
#[derive(Debug)]
pub struct Stream {
    file: File,
}

impl Stream {
    /// Rewrites `path` atomically with `table`, then opens it for appending.
    pub fn start(path: &Path, table: &Table) -> anyhow::Result<Stream> {
        table.write(path)?;
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        Ok(Stream { file })
    }

    /// Appends one line and flushes it.
    pub fn push(&mut self, fields: &[String]) -> anyhow::Result<()> {
        self.file.write_all(csv_line(fields).as_bytes())?;
        self.file.flush()?;
        Ok(())
    }
}

/// The fields of `row` whose `keep` is true.
fn kept(row: Vec<String>, keep: &[bool]) -> Vec<String> {
    row.into_iter()
        .zip(keep)
        .filter_map(|(v, &k)| k.then_some(v))
        .collect()
}
