//! A dataset of flat requests too large to hold: read once to count its requests and learn
//! their span, then again, a request at a time, as the run reaches them.
//!
//! [`read_dataset_within`] reads a dataset as [`super::read_dataset`] does while what it holds
//! stays within a budget of bytes. A larger one without sessions is not kept: the run gets its
//! [`DatasetPlan`] and reads it again through [`DatasetStream`], giving the requests in the
//! order a whole read sorts them (arrival, then file order), with the same ids, lines and
//! arrivals, so the run's outputs are those of the whole read. Arrivals out of file order (a
//! client's upload delaying one request past a later one, say) are put in order as the file is
//! read: the first reading finds how far any request comes after a later one (the *lag*), and
//! the stream holds a request until a row that late has been read, so it holds the requests of
//! one lag's span at most (all of them for a file in no order at all). A dataset with sessions
//! is read whole whatever its size (the run plans its sessions before it starts).

use super::azure::AzureRows;
use super::dataset::{DatasetFormat, DatasetOptions};
use super::jsonl::{FlatJsonl, FlatLine};
use super::mooncake::MooncakeRows;
use super::{ByArrival, Request, RequestClasses, Workload, WorkloadError, read_dataset};
use crate::Nanos;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
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

/// A dataset of flat requests, surveyed but not kept: what the run needs to know of it
/// beforehand, and how to read it again ([`DatasetPlan::requests`]).
#[derive(Debug)]
pub struct DatasetPlan {
    path: PathBuf,
    format: DatasetFormat,
    block_size: u32,
    /// Requests it has (at most the limit it was read with).
    pub count: u64,
    /// The earliest arrival and the latest.
    pub first_arrival_ns: Nanos,
    pub last_arrival_ns: Nanos,
    /// How far a request comes after a later one in the file, at most (0 in file order).
    lag_ns: Nanos,
    /// What the file's clock reads at time 0 (an Azure trace's earliest timestamp).
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
/// `options.memory_bytes`; `None` when it has a session (read it whole).
fn survey(
    path: &Path,
    options: DatasetOptions,
    limit: Option<usize>,
) -> Result<Option<DatasetRead>, WorkloadError> {
    let mut rows = FlatRows::open(path, options, true)?;
    let mut kept = Some(Vec::new());
    let mut arrivals = Arrivals::default();
    let mut bytes = 0usize;
    while limit.is_none_or(|n| arrivals.count < n as u64) {
        let request = match rows.next_row()? {
            Some(Row::Request(r)) => r,
            Some(Row::Session(_)) => return Ok(None),
            None => break,
        };
        arrivals.add(request.arrival_ns);
        bytes = bytes.saturating_add(size_of::<Request>() + request.heap_bytes());
        match &mut kept {
            Some(requests) if bytes <= options.memory_bytes => requests.push(request),
            _ => kept = None,
        }
    }
    if arrivals.count == 0 {
        return Err(WorkloadError::Empty {
            path: path.to_owned(),
        });
    }
    // An Azure trace's arrivals count from its earliest timestamp.
    let origin_ns = match options.format {
        DatasetFormat::Azure => arrivals.earliest,
        _ => 0,
    };
    let classes = rows.classes();
    Ok(Some(match kept {
        Some(mut requests) => {
            requests.iter_mut().for_each(|r| r.arrival_ns -= origin_ns);
            // Stable: equal arrivals keep file order (a no-op for a file in order).
            requests.sort_by_key(|r| r.arrival_ns);
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
            count: arrivals.count,
            first_arrival_ns: arrivals.earliest - origin_ns,
            last_arrival_ns: arrivals.latest - origin_ns,
            lag_ns: arrivals.lag,
            origin_ns,
            classes,
        }),
    }))
}

/// The arrivals of a dataset's requests, read in file order: how many, the earliest and the
/// latest, and the lag (how far one comes after a later one, at most).
#[derive(Debug, Default)]
struct Arrivals {
    count: u64,
    earliest: Nanos,
    latest: Nanos,
    lag: Nanos,
}

impl Arrivals {
    /// Adds the next request's arrival.
    fn add(&mut self, t: Nanos) {
        if self.count == 0 {
            (self.earliest, self.latest) = (t, t);
        }
        self.lag = self.lag.max(self.latest.saturating_sub(t));
        self.earliest = self.earliest.min(t);
        self.latest = self.latest.max(t);
        self.count += 1;
    }
}

impl DatasetPlan {
    /// The dataset's requests, read again from its file, in arrival order (then file order);
    /// a failure (the file gone, or changed since the survey) ends the stream and is kept in
    /// [`DatasetStream::failure`].
    pub fn requests(&self) -> DatasetStream {
        self.stream(true)
    }

    /// The same requests in file order (ids in order), as `generate --dataset` writes them.
    pub fn requests_in_file_order(&self) -> DatasetStream {
        self.stream(false)
    }

    /// The stream of the file's requests, put in arrival order when `sorted`.
    fn stream(&self, sorted: bool) -> DatasetStream {
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
            lag_ns: self.lag_ns,
            sorted,
            latest_ns: 0,
            last_line: 0,
            held: BinaryHeap::new(),
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
/// requests as the survey found, in arrival order (then file order). An iterator that ends
/// early on a failure.
pub struct DatasetStream {
    rows: Option<FlatRows>,
    path: PathBuf,
    /// Rows still to read.
    left: u64,
    origin_ns: Nanos,
    lag_ns: Nanos,
    /// Whether the requests go in arrival order (else in file order).
    sorted: bool,
    /// The latest arrival read so far, and the line of the last row read.
    latest_ns: Nanos,
    last_line: u64,
    /// Requests read that may not go yet: a row still to read may come before them.
    held: BinaryHeap<Reverse<ByArrival>>,
    failure: StreamFailure,
}

impl DatasetStream {
    /// Where a failure of the stream is kept.
    pub fn failure(&self) -> StreamFailure {
        self.failure.clone()
    }

    /// Whether a request arriving at `t` may go: in file order at once, else when no row
    /// still to read comes before it (each comes at most the lag before the latest arrival
    /// read; at `t` itself, after it).
    fn due(&self, t: Nanos) -> bool {
        !self.sorted || self.left == 0 || self.latest_ns.saturating_sub(self.lag_ns) >= t
    }

    /// The next row's request, checked against the survey: within its count, and no more
    /// than the lag before the latest arrival read.
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
            Some(t) if t >= self.latest_ns.saturating_sub(self.lag_ns) => request.arrival_ns = t,
            _ => return Err(changed(request.line)),
        }
        self.latest_ns = self.latest_ns.max(request.arrival_ns);
        self.last_line = request.line;
        Ok(request)
    }
}

impl Iterator for DatasetStream {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        loop {
            if let Some(Reverse(first)) = self.held.peek()
                && self.due(first.0.arrival_ns)
            {
                return self.held.pop().map(|Reverse(h)| h.0);
            }
            if self.left == 0 {
                return None;
            }
            // None after a failure: the stream has ended.
            let mut rows = self.rows.take()?;
            match self.read(&mut rows) {
                Ok(request) => {
                    self.left -= 1;
                    self.rows = Some(rows);
                    // In file order (the usual case) a request goes as soon as it is read.
                    if self.held.is_empty() && self.due(request.arrival_ns) {
                        return Some(request);
                    }
                    self.held.push(Reverse(ByArrival(request)));
                }
                Err(e) => {
                    self.failure.set(e);
                    self.held.clear();
                    return None;
                }
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
