//! A workload without sessions drawn on a second thread, ahead of the run: a generated one
//! (the arrival clocks, the length draws and their ChaCha streams) or a dataset read as the run
//! goes ([`crate::workload::DatasetPlan`]) costs the simulation's thread nothing but taking
//! each request off a batch. A dataset with sessions is read there too, its entries handed
//! over as read (the sessions are started on the simulation's thread).
//!
//! Only a workload whose arrivals are all open-loop requests can be drawn ahead: a session's
//! later requests depend on the run's completions, so a workload with sessions (conversations,
//! closed-loop users, agentic workflows) is drawn on the simulation's thread
//! ([`super::SessionStream`]). The requests come in the order and with the contents the
//! one-thread stream gives (the drawing thread runs that stream itself), so a run's outputs
//! are the same on one thread or two.
//!
//! Memory stays bounded: at most [`BATCHES_AHEAD`] batches wait, each of at most [`BATCH`]
//! requests and about [`BATCH_BYTES`] of what they hold beyond themselves (token ids, prompt
//! blocks: requests that carry their prompts fill a batch sooner), and an emptied batch goes
//! back to the drawing thread to be filled again. When the run stops early
//! (an error), the receiving end goes away and the drawing thread stops at its next hand-over.

use super::generate::Generator;
use super::session_stream::SessionStream;
use crate::Nanos;
use crate::workload::{DatasetRow, Request};
use std::cell::Cell;
use std::rc::Rc;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::thread::{Scope, ScopedJoinHandle};

/// Requests a batch holds: a hand-over per this many requests.
pub const BATCH: usize = 4096;

/// Bytes of token ids after which a batch is handed over before it holds [`BATCH`] requests.
pub const BATCH_BYTES: usize = 1 << 20;

/// Full batches the drawing thread may be ahead of the run before it waits.
pub const BATCHES_AHEAD: usize = 2;

/// What a batch holds beyond itself (token ids, prompt blocks, a session's plan).
pub trait HeapBytes {
    /// Bytes held beyond the value itself.
    fn heap_bytes(&self) -> usize;
}

impl HeapBytes for Request {
    fn heap_bytes(&self) -> usize {
        Request::heap_bytes(self)
    }
}

impl HeapBytes for DatasetRow {
    fn heap_bytes(&self) -> usize {
        DatasetRow::heap_bytes(self)
    }
}

/// The requests of a workload without sessions (or the entries of a dataset), drawn on a
/// thread of `scope` (see the module); an iterator that gives them in the stream's order.
pub struct DrawnAhead<'scope, T = Request> {
    /// Full batches, each in reverse order (the next request last); an empty one ends the
    /// stream.
    batches: Receiver<Vec<T>>,
    /// Emptied batches, back to the drawing thread.
    emptied: Sender<Vec<T>>,
    /// The batch being handed out, the next request last.
    current: Vec<T>,
    /// Whether the empty batch that ends the stream has come.
    ended: bool,
    /// Requests handed out so far.
    count: Rc<Cell<u64>>,
    /// The drawing thread, joined when it stops without ending the stream (it panicked).
    drawer: Option<ScopedJoinHandle<'scope, ()>>,
}

impl<'scope> DrawnAhead<'scope, Request> {
    /// Starts drawing `generator`'s requests (its workload has no sessions), their arrivals
    /// moved by `retime`, on a thread of `scope`.
    pub fn start<'env>(
        scope: &'scope Scope<'scope, 'env>,
        generator: Generator<'env>,
        retime: impl Fn(Nanos) -> Nanos + Send + 'env,
    ) -> std::io::Result<DrawnAhead<'scope>> {
        // No session starts in a workload without sessions: the stream's own are never used.
        Self::start_from(scope, move || {
            SessionStream::dry(generator, None, Box::new(retime))
        })
    }
}

impl<'scope, T: HeapBytes + Send + 'scope> DrawnAhead<'scope, T> {
    /// Starts taking the items of the stream `open` gives (made on the drawing thread) on a
    /// thread of `scope`: any open-loop stream, such as a dataset read as the run goes.
    pub fn start_from<'env, S: Iterator<Item = T>>(
        scope: &'scope Scope<'scope, 'env>,
        open: impl FnOnce() -> S + Send + 'env,
    ) -> std::io::Result<DrawnAhead<'scope, T>> {
        let (to_run, batches) = mpsc::sync_channel(BATCHES_AHEAD);
        let (emptied, to_refill) = mpsc::channel();
        let drawer = std::thread::Builder::new()
            .name("workload".to_owned())
            .spawn_scoped(scope, move || draw(open(), &to_run, &to_refill))?;
        Ok(DrawnAhead {
            batches,
            emptied,
            current: Vec::new(),
            ended: false,
            count: Rc::new(Cell::new(0)),
            drawer: Some(drawer),
        })
    }

    /// The count of requests handed out so far, readable after the stream is gone.
    pub fn counter(&self) -> Rc<Cell<u64>> {
        Rc::clone(&self.count)
    }

    /// Takes the next batch into `current` (the emptied one goes back); false once the
    /// stream has ended. A drawing thread that stopped without ending it panicked: its
    /// panic is carried on here.
    fn refill(&mut self) -> bool {
        match self.batches.recv() {
            Ok(batch) if batch.is_empty() => {
                self.ended = true;
                false
            }
            Ok(batch) => {
                let emptied = std::mem::replace(&mut self.current, batch);
                // The drawing thread may have stopped already: the batch is then dropped.
                let _ = self.emptied.send(emptied);
                true
            }
            Err(_) => match self.drawer.take().map(ScopedJoinHandle::join) {
                Some(Err(panic)) => std::panic::resume_unwind(panic),
                _ => unreachable!("the workload's drawing thread stopped without ending"),
            },
        }
    }
}

impl<'scope, T: HeapBytes + Send + 'scope> Iterator for DrawnAhead<'scope, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        if self.current.is_empty() && (self.ended || !self.refill()) {
            return None;
        }
        self.count.set(self.count.get() + 1);
        let next = self.current.pop();
        // The one after was written by the drawing thread's core: fetched while the run
        // works on this one.
        if let Some(after) = self.current.last() {
            warm(after);
        }
        next
    }
}

/// Hints that every cache line of `item` is read soon (a hint changes no value).
#[inline(always)]
fn warm<T>(item: &T) {
    let start = std::ptr::from_ref(item).cast::<i8>();
    for offset in (0..size_of::<T>()).step_by(64) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is a hint: it never faults and reads nothing the program sees.
        unsafe {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(offset));
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = start.wrapping_add(offset);
    }
}

/// The drawing thread: fills batches from `stream` and sends them, reversed, until the
/// stream ends (then an empty batch) or the run goes away.
fn draw<T: HeapBytes>(
    mut stream: impl Iterator<Item = T>,
    to_run: &SyncSender<Vec<T>>,
    to_refill: &Receiver<Vec<T>>,
) {
    loop {
        let mut batch = to_refill
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(BATCH));
        batch.clear();
        fill(&mut batch, &mut stream);
        batch.reverse();
        let last = batch.is_empty();
        if to_run.send(batch).is_err() || last {
            return;
        }
    }
}

/// Fills `batch` from `stream` up to [`BATCH`] requests or [`BATCH_BYTES`] held beyond them,
/// whichever comes first (at least one request while the stream lasts).
fn fill<T: HeapBytes>(batch: &mut Vec<T>, stream: &mut impl Iterator<Item = T>) {
    let mut bytes = 0;
    while batch.len() < BATCH && bytes < BATCH_BYTES {
        let Some(item) = stream.next() else { return };
        bytes += item.heap_bytes();
        batch.push(item);
    }
}
