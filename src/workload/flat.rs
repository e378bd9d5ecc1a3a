//! A dataset of flat requests too large to hold: read once to count its requests and learn
//! their span, then again, a request at a time, as the run reaches them.
//!
//! [`read_dataset_within`] reads a dataset as [`super::read_dataset`] does while what it holds
//! stays within a budget of bytes. A larger one whose arrivals come in file order (as traces
//! and generated workloads do) and that has no session is not kept: the run gets its
//! [`DatasetPlan`] and reads it again through [`DatasetStream`], in the same order, with the
//! same ids, lines and arrivals, so the run's outputs are those of the whole read. A dataset
//! with sessions, or whose arrivals are out of file order, is read whole whatever its size
//! (the run needs it sorted, or its sessions planned, before it starts).

use super::azure::AzureRows;
use super::dataset::{DatasetFormat, DatasetOptions};
use super::jsonl::{FlatJsonl, FlatLine};
use super::mooncake::MooncakeRows;
use super::{Request, RequestClasses, Workload, WorkloadError, read_dataset};
use crate::Nanos;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

/// Bytes of requests a dataset may hold in memory before the run reads it as it goes
/// (`--dataset-memory`'s default, 64 MiB): about 600,000 requests without token ids.
pub const DATASET_MEMORY_BYTES: usize = 64 << 20;

/// A dataset as the run gets it.
#[derive(Debug)]
pub enum DatasetRead {
    /// Every request, in memory.
    Listed(Workload),
    /// Read again as the run goes.
    Streamed(DatasetPlan),
}

/// A dataset of flat requests in arrival order, surveyed but not kept: what the run needs to
/// know of it beforehand, and how to read it again ([`DatasetPlan::requests`]).
#[derive(Debug)]
pub struct DatasetPlan {
    path: PathBuf,
    format: DatasetFormat,
    block_size: u32,
    /// Requests it has (at most the limit it was read with).
    pub count: u64,
    /// The first arrival and the last.
    pub first_arrival_ns: Nanos,
    pub last_arrival_ns: Nanos,
    /// What the file's clock reads at time 0 (an Azure trace's first timestamp).
    origin_ns: Nanos,
    /// Each request's tenant, SLO class and profile, when the file names them.
    pub classes: Option<RequestClasses>,
}

/// Reads the first `limit` entries (all when `None`) of the dataset at `path`, in memory while
/// its requests hold at most `options.memory_bytes` (see the module). Returns it with the
/// format it was read as. Fails as [`read_dataset`] does.
pub fn read_dataset_within(
    path: &Path,
    options: DatasetOptions,
    limit: Option<usize>,
) -> Result<(DatasetRead, DatasetFormat), WorkloadError> {
    let format = options.format.of(path)?;
    let read = DatasetOptions { format, ..options };
    match survey(path, read, limit)? {
        Some(surveyed) => Ok((surveyed, format)),
        None => read_dataset(path, read, limit).map(|(w, _)| (DatasetRead::Listed(w), format)),
    }
}

/// One pass over the dataset, keeping its requests while they hold at most
/// `options.memory_bytes`; `None` when it has a session or arrivals out of file order (read it
/// whole).
fn survey(
    path: &Path,
    options: DatasetOptions,
    limit: Option<usize>,
) -> Result<Option<DatasetRead>, WorkloadError> {
    let mut rows = FlatRows::open(path, options, true)?;
    let mut kept = Some(Vec::new());
    let (mut count, mut bytes) = (0u64, 0usize);
    let (mut first, mut last) = (None, 0);
    while limit.is_none_or(|n| count < n as u64) {
        let request = match rows.next_row()? {
            Some(Row::Request(r)) => r,
            Some(Row::Session(_)) => return Ok(None),
            None => break,
        };
        if first.is_some() && request.arrival_ns < last {
            return Ok(None);
        }
        first.get_or_insert(request.arrival_ns);
        last = request.arrival_ns;
        count += 1;
        bytes = bytes.saturating_add(size_of::<Request>() + request.heap_bytes());
        match &mut kept {
            Some(requests) if bytes <= options.memory_bytes => requests.push(request),
            _ => kept = None,
        }
    }
    let Some(first) = first else {
        return Err(WorkloadError::Empty {
            path: path.to_owned(),
        });
    };
    // An Azure trace's arrivals count from its first timestamp.
    let origin_ns = match options.format {
        DatasetFormat::Azure => first,
        _ => 0,
    };
    let classes = rows.classes();
    Ok(Some(match kept {
        Some(mut requests) => {
            requests.iter_mut().for_each(|r| r.arrival_ns -= origin_ns);
            DatasetRead::Listed(Workload {
                requests,
                sessions: Default::default(),
                classes,
            })
        }
        None => DatasetRead::Streamed(DatasetPlan {
            path: path.to_owned(),
            format: options.format,
            block_size: options.trace_block_size,
            count,
            first_arrival_ns: first - origin_ns,
            last_arrival_ns: last - origin_ns,
            origin_ns,
            classes,
        }),
    }))
}

impl DatasetPlan {
    /// The dataset's requests, read again from its file in order; a failure (the file gone,
    /// or changed since the survey) ends the stream and is kept in [`DatasetStream::failure`].
    pub fn requests(&self) -> DatasetStream {
        let options = DatasetOptions {
            format: self.format,
            trace_block_size: self.block_size,
            memory_bytes: 0,
        };
        let failure = StreamFailure::default();
        let rows = match FlatRows::open(&self.path, options, false) {
            Ok(rows) => Some(rows),
            Err(e) => {
                failure.set(e);
                None
            }
        };
        DatasetStream {
            rows,
            path: self.path.clone(),
            left: self.count,
            origin_ns: self.origin_ns,
            last_ns: self.first_arrival_ns,
            last_line: 0,
            failure,
        }
    }
}

/// Where a [`DatasetStream`] keeps its failure, readable once the stream is gone (from any
/// thread).
#[derive(Debug, Clone, Default)]
pub struct StreamFailure(Arc<Mutex<Option<WorkloadError>>>);

impl StreamFailure {
    /// The failure, if the stream failed (taken: a second call gives `None`).
    pub fn take(&self) -> Option<WorkloadError> {
        self.lock().take()
    }

    /// Keeps `e`.
    fn set(&self, e: WorkloadError) {
        *self.lock() = Some(e);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<WorkloadError>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The requests of a [`DatasetPlan`], read from its file as they are asked for: the same
/// requests, in the same order, as the survey found. An iterator that ends early on a failure.
pub struct DatasetStream {
    rows: Option<FlatRows>,
    path: PathBuf,
    /// Requests still to give.
    left: u64,
    origin_ns: Nanos,
    /// The arrival of the last request given (the first one's before any), and its line.
    last_ns: Nanos,
    last_line: u64,
    failure: StreamFailure,
}

impl DatasetStream {
    /// Where a failure of the stream is kept.
    pub fn failure(&self) -> StreamFailure {
        self.failure.clone()
    }

    /// The next request, checked against the survey: in arrival order, within its count.
    fn read(&mut self, rows: &mut FlatRows) -> Result<Request, WorkloadError> {
        let changed = |line| WorkloadError::Changed {
            path: self.path.clone(),
            line,
        };
        let mut request = match rows.next_row()? {
            Some(Row::Request(r)) => r,
            Some(Row::Session(line)) => return Err(changed(line)),
            None => return Err(changed(self.last_line + 1)),
        };
        let arrival = request.arrival_ns.checked_sub(self.origin_ns);
        match arrival {
            Some(t) if t >= self.last_ns => request.arrival_ns = t,
            _ => return Err(changed(request.line)),
        }
        self.last_ns = request.arrival_ns;
        self.last_line = request.line;
        Ok(request)
    }
}

impl Iterator for DatasetStream {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        if self.left == 0 {
            return None;
        }
        let mut rows = self.rows.take()?;
        match self.read(&mut rows) {
            Ok(request) => {
                self.left -= 1;
                self.rows = Some(rows);
                Some(request)
            }
            Err(e) => {
                self.failure.set(e);
                None
            }
        }
    }
}

/// A row of a dataset: a flat request, or a session (at this line).
enum Row {
    Request(Request),
    Session(u64),
}

/// A dataset of any format read a row at a time, in file order.
enum FlatRows {
    Jsonl(FlatJsonl),
    Mooncake(MooncakeRows),
    Azure(AzureRows),
}

impl FlatRows {
    /// Reads `path` in `options`' format (not [`DatasetFormat::Auto`]); a JSONL file's labels
    /// kept when `labels`.
    fn open(path: &Path, options: DatasetOptions, labels: bool) -> Result<FlatRows, WorkloadError> {
        Ok(match options.format {
            DatasetFormat::Auto | DatasetFormat::LlmServingSim => {
                FlatRows::Jsonl(FlatJsonl::open(path, labels)?)
            }
            DatasetFormat::Mooncake => {
                FlatRows::Mooncake(MooncakeRows::open(path, options.trace_block_size)?)
            }
            DatasetFormat::Azure => FlatRows::Azure(AzureRows::open(path)?),
        })
    }

    /// The next row, or `None` at the end of the file.
    fn next_row(&mut self) -> Result<Option<Row>, WorkloadError> {
        Ok(match self {
            FlatRows::Jsonl(j) => j.next_line()?.map(|line| match line {
                FlatLine::Request(r) => Row::Request(r),
                FlatLine::Session(line) => Row::Session(line),
            }),
            FlatRows::Mooncake(m) => m.next_request()?.map(Row::Request),
            FlatRows::Azure(a) => a.next_request()?.map(Row::Request),
        })
    }

    /// The labels of the requests read, when kept and any had one.
    fn classes(self) -> Option<RequestClasses> {
        match self {
            FlatRows::Jsonl(j) => j.classes(),
            _ => None,
        }
    }
}
