//! A dataset too large to hold: read once to count its entries and learn their span, then
//! again, an entry at a time, as the run reaches them.
//!
//! [`read_dataset_within`] reads a dataset as [`super::read_dataset`] does while what it holds
//! stays within a budget of bytes. A larger one is not kept: the run gets its [`DatasetPlan`]
//! and reads it again through [`DatasetStream`] (flat requests) or [`DatasetRows`] (a JSONL
//! file with sessions, whose sessions the run starts as it reaches them, see
//! `dataset_sessions.rs`), giving the entries in the order a whole read sorts them (arrival,
//! then file order), with the same ids, lines and arrivals, so the run's outputs are those of
//! the whole read. Arrivals out of file order (a client's upload delaying one request past a
//! later one, say) are put in order as the file is read: the first reading finds how far any
//! entry comes after a later one (the *lag*), and the stream holds an entry until a row that
//! late has been read, so it holds the entries of one lag's span at most (all of them for a
//! file in no order at all).

use super::azure::AzureRows;
use super::dataset::{DatasetFormat, DatasetOptions};
use super::jsonl::{JsonlLine, JsonlRows, SessionLine};
use super::mooncake::MooncakeRows;
use super::sessions::SessionSet;
use super::{ArrivalKey, ByArrival, Request, RequestClasses, Workload, WorkloadError};
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

/// A dataset surveyed but not kept: what the run needs to know of it beforehand, and how to
/// read it again ([`DatasetPlan::requests`], [`DatasetPlan::rows`]).
#[derive(Debug)]
pub struct DatasetPlan {
    path: PathBuf,
    format: DatasetFormat,
    block_size: u32,
    /// Entries it has (flat requests and sessions; at most the limit it was read with).
    rows: u64,
    /// Requests it has (flat, and every request of each session).
    pub count: u64,
    /// Sessions among its entries.
    pub sessions: u64,
    /// The earliest arrival and the latest (of the entries: a session's start).
    pub first_arrival_ns: Nanos,
    pub last_arrival_ns: Nanos,
    /// How far an entry comes after a later one in the file, at most (0 in file order).
    lag_ns: Nanos,
    /// What the file's clock reads at time 0 (an Azure trace's earliest timestamp).
    origin_ns: Nanos,
    /// Each request's tenant, SLO class and profile, when the file names them.
    pub classes: Option<RequestClasses>,
}

/// Reads the first `limit` entries (all when `None`) of the dataset at `path`, in memory while
/// they hold at most `options.memory_bytes` (see the module). Returns it with the format it
/// was read as. Fails as [`super::read_dataset`] does.
pub fn read_dataset_within(
    path: &Path,
    options: DatasetOptions,
    limit: Option<usize>,
) -> Result<(DatasetRead, DatasetFormat), WorkloadError> {
    let format = options.format.of(path)?;
    let read = DatasetOptions { format, ..options };
    Ok((survey(path, read, limit)?, format))
}

/// One pass over the dataset, keeping its entries while they hold at most
/// `options.memory_bytes`.
fn survey(
    path: &Path,
    options: DatasetOptions,
    limit: Option<usize>,
) -> Result<DatasetRead, WorkloadError> {
    let mut rows = FlatRows::open(path, options, true)?;
    let mut kept = Some(Kept::default());
    let mut arrivals = Arrivals::default();
    let (mut count, mut sessions, mut bytes) = (0u64, 0u64, 0usize);
    while limit.is_none_or(|n| arrivals.count < n as u64) {
        let Some(row) = rows.next_row()? else {
            break;
        };
        arrivals.add(row.arrival_ns());
        count += row.num_requests();
        sessions += u64::from(matches!(row, DatasetRow::Session(_)));
        bytes = bytes.saturating_add(row.held_bytes());
        match &mut kept {
            Some(entries) if bytes <= options.memory_bytes => entries.add(row),
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
    Ok(match kept {
        Some(entries) => DatasetRead::Listed(entries.into_workload(origin_ns, classes)),
        None => DatasetRead::Streamed(DatasetPlan {
            path: path.to_owned(),
            format: options.format,
            block_size: options.trace_block_size,
            rows: arrivals.count,
            count,
            sessions,
            first_arrival_ns: arrivals.earliest - origin_ns,
            last_arrival_ns: arrivals.latest - origin_ns,
            lag_ns: arrivals.lag,
            origin_ns,
            classes,
        }),
    })
}

/// The entries a survey keeps while they fit: its flat requests and sessions, in file order.
#[derive(Default)]
struct Kept {
    requests: Vec<Request>,
    sessions: SessionSet,
}

impl Kept {
    fn add(&mut self, row: DatasetRow) {
        match row {
            DatasetRow::Request(r) => self.requests.push(r),
            DatasetRow::Session(s) => {
                let (header, plan) = s.into_parts();
                self.sessions.add(header, plan);
            }
        }
    }

    /// The workload as a whole read gives it: the flat requests (their arrivals counted from
    /// `origin_ns`) sorted by arrival, stably, and the sessions in file order.
    fn into_workload(self, origin_ns: Nanos, classes: Option<RequestClasses>) -> Workload {
        let mut requests = self.requests;
        requests.iter_mut().for_each(|r| r.arrival_ns -= origin_ns);
        // Stable: equal arrivals keep file order (a no-op for a file in order).
        requests.sort_by_key(|r| r.arrival_ns);
        Workload {
            requests,
            sessions: self.sessions,
            classes,
        }
    }
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
    /// a failure (the file gone, or changed since the survey: a session in it, say) ends the
    /// stream and is kept in [`DatasetStream::failure`]. For a dataset without sessions.
    pub fn requests(&self) -> DatasetStream {
        DatasetStream(self.stream(true, false))
    }

    /// The same requests in file order (ids in order), as `generate --dataset` writes them.
    pub fn requests_in_file_order(&self) -> DatasetStream {
        DatasetStream(self.stream(false, false))
    }

    /// The dataset's entries, flat requests and sessions, read again from its file in
    /// arrival order (then file order), as [`DatasetPlan::requests`] reads requests.
    pub fn rows(&self) -> DatasetRows {
        self.stream(true, true)
    }

    /// The same entries in file order (ids in order).
    pub fn rows_in_file_order(&self) -> DatasetRows {
        self.stream(false, true)
    }

    /// The stream of the file's entries, put in arrival order when `sorted`; one with a
    /// session fails unless `sessions`.
    fn stream(&self, sorted: bool, sessions: bool) -> DatasetRows {
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
        DatasetRows {
            rows,
            path: self.path.clone(),
            left: self.rows,
            origin_ns: self.origin_ns,
            lag_ns: self.lag_ns,
            sorted,
            sessions,
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

/// The entries of a [`DatasetPlan`], read from its file as they are asked for: the same
/// entries as the survey found, in arrival order (then file order). An iterator that ends
/// early on a failure.
pub struct DatasetRows {
    rows: Option<FlatRows>,
    path: PathBuf,
    /// Rows still to read.
    left: u64,
    origin_ns: Nanos,
    lag_ns: Nanos,
    /// Whether the entries go in arrival order (else in file order).
    sorted: bool,
    /// Whether a session is expected (else one means the file changed).
    sessions: bool,
    /// The latest arrival read so far, and the line of the last row read.
    latest_ns: Nanos,
    last_line: u64,
    /// Entries read that may not go yet: a row still to read may come before them.
    held: BinaryHeap<Reverse<ByArrival<DatasetRow>>>,
    failure: StreamFailure,
}

impl DatasetRows {
    /// Where a failure of the stream is kept.
    pub fn failure(&self) -> StreamFailure {
        self.failure.clone()
    }

    /// Whether an entry arriving at `t` may go: in file order at once, else when no row
    /// still to read comes before it (each comes at most the lag before the latest arrival
    /// read; at `t` itself, after it).
    fn due(&self, t: Nanos) -> bool {
        !self.sorted || self.left == 0 || self.latest_ns.saturating_sub(self.lag_ns) >= t
    }

    /// The next row, checked against the survey: within its count, a session only where
    /// one is expected, and no more than the lag before the latest arrival read.
    fn read(&mut self, rows: &mut FlatRows) -> Result<DatasetRow, WorkloadError> {
        let changed = |line| WorkloadError::Changed {
            path: self.path.clone(),
            line,
        };
        let mut row = match rows.next_row()? {
            Some(row @ DatasetRow::Session(_)) if !self.sessions => {
                return Err(changed(row.line()));
            }
            Some(row) => row,
            None => return Err(changed(self.last_line + 1)),
        };
        let arrival = row.arrival_ns().checked_sub(self.origin_ns);
        match arrival {
            Some(t) if t >= self.latest_ns.saturating_sub(self.lag_ns) => row.retime(|_| t),
            _ => return Err(changed(row.line())),
        }
        self.latest_ns = self.latest_ns.max(row.arrival_ns());
        self.last_line = row.line();
        Ok(row)
    }
}

impl Iterator for DatasetRows {
    type Item = DatasetRow;

    fn next(&mut self) -> Option<DatasetRow> {
        loop {
            if let Some(Reverse(first)) = self.held.peek()
                && self.due(first.0.arrival_ns())
            {
                return self.held.pop().map(|Reverse(h)| h.0);
            }
            if self.left == 0 {
                return None;
            }
            // None after a failure: the stream has ended.
            let mut rows = self.rows.take()?;
            match self.read(&mut rows) {
                Ok(row) => {
                    self.left -= 1;
                    self.rows = Some(rows);
                    // In file order (the usual case) an entry goes as soon as it is read.
                    if self.held.is_empty() && self.due(row.arrival_ns()) {
                        return Some(row);
                    }
                    self.held.push(Reverse(ByArrival(row)));
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

/// The requests of a [`DatasetPlan`] without sessions ([`DatasetPlan::requests`]): its
/// [`DatasetRows`], which fail on a session.
pub struct DatasetStream(DatasetRows);

impl DatasetStream {
    /// Where a failure of the stream is kept.
    pub fn failure(&self) -> StreamFailure {
        self.0.failure()
    }
}

impl Iterator for DatasetStream {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        // The rows give no session: they fail on one.
        self.0.find_map(DatasetRow::into_request)
    }
}

/// An entry of a dataset: a flat request, or a session (of a JSONL file; boxed, so that an
/// entry takes what a request does).
#[derive(Debug)]
pub enum DatasetRow {
    Request(Request),
    Session(Box<SessionLine>),
}

impl ArrivalKey for DatasetRow {
    fn arrival_key(&self) -> (Nanos, u64) {
        match self {
            DatasetRow::Request(r) => r.arrival_key(),
            DatasetRow::Session(s) => (s.arrival_ns(), s.first_id()),
        }
    }
}

impl DatasetRow {
    /// Its arrival (a session's start).
    pub fn arrival_ns(&self) -> Nanos {
        self.arrival_key().0
    }

    /// Its arrival moved through `f`.
    pub fn retime(&mut self, f: impl FnOnce(Nanos) -> Nanos) {
        match self {
            DatasetRow::Request(r) => r.arrival_ns = f(r.arrival_ns),
            DatasetRow::Session(s) => s.retime(f),
        }
    }

    /// How many requests it has.
    fn num_requests(&self) -> u64 {
        match self {
            DatasetRow::Request(_) => 1,
            DatasetRow::Session(s) => s.num_requests(),
        }
    }

    /// About what holding it takes: a request and its token ids, a session's plan.
    fn held_bytes(&self) -> usize {
        match self {
            DatasetRow::Request(r) => size_of::<Request>() + r.heap_bytes(),
            DatasetRow::Session(s) => s.held_bytes(),
        }
    }

    /// About what it holds beyond itself: a request's token ids, a session's plan.
    pub fn heap_bytes(&self) -> usize {
        match self {
            DatasetRow::Request(r) => r.heap_bytes(),
            DatasetRow::Session(s) => s.held_bytes(),
        }
    }

    /// The file line it came from.
    fn line(&self) -> u64 {
        match self {
            DatasetRow::Request(r) => r.line,
            DatasetRow::Session(s) => s.line(),
        }
    }

    /// The request, for a flat request.
    fn into_request(self) -> Option<Request> {
        match self {
            DatasetRow::Request(r) => Some(r),
            DatasetRow::Session(_) => None,
        }
    }
}

/// A dataset of any format read a row at a time, in file order.
enum FlatRows {
    Jsonl(JsonlRows),
    Mooncake(MooncakeRows),
    Azure(AzureRows),
}

impl FlatRows {
    /// Reads `path` in `options`' format (not [`DatasetFormat::Auto`]); a JSONL file's labels
    /// kept when `labels`.
    fn open(path: &Path, options: DatasetOptions, labels: bool) -> Result<FlatRows, WorkloadError> {
        Ok(match options.format {
            DatasetFormat::Auto | DatasetFormat::LlmServingSim => {
                FlatRows::Jsonl(JsonlRows::open(path, labels)?)
            }
            DatasetFormat::Mooncake => {
                FlatRows::Mooncake(MooncakeRows::open(path, options.trace_block_size)?)
            }
            DatasetFormat::Azure => FlatRows::Azure(AzureRows::open(path)?),
        })
    }

    /// The next row, or `None` at the end of the file.
    fn next_row(&mut self) -> Result<Option<DatasetRow>, WorkloadError> {
        Ok(match self {
            FlatRows::Jsonl(j) => j.next_line()?.map(|line| match line {
                JsonlLine::Request(r) => DatasetRow::Request(r),
                JsonlLine::Session(s) => DatasetRow::Session(Box::new(s)),
            }),
            FlatRows::Mooncake(m) => m.next_request()?.map(DatasetRow::Request),
            FlatRows::Azure(a) => a.next_request()?.map(DatasetRow::Request),
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
