//! [`CountLog`]s folded behind the loop: while a [`FoldBehind`] is held on a thread, the logs
//! that thread makes ([`CountLog::default`], as the instances' inter-token gap tallies are
//! made) hand their appended entries, a chunk at a time, to a folding thread, which sorts and
//! folds them into the log's folded part; the loop only appends. Reading a log (its sorted
//! values, a merge, a copy) first waits until every chunk it sent has been folded.
//!
//! What a log holds is the same whichever thread folded it, and when: its sorted values are
//! the multiset of what was added ([`CountLog::sorted`] adds up equal values), so outputs are
//! byte-identical on one thread or two. Memory stays bounded: a log appends at most
//! [`CHUNK`] entries before handing them over, at most [`CHUNKS_IN_FLIGHT`] chunks wait for
//! the folding thread (the loop waits beyond), and the folded part is a plain log, which
//! holds about twice its distinct values at most.

use super::count_log::CountLog;
use std::cell::RefCell;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// Entries a log appends before handing them to the folding thread.
pub const CHUNK: usize = 1 << 14;

/// Chunks that may wait for the folding thread before a log handing one over waits.
pub const CHUNKS_IN_FLIGHT: usize = 16;

thread_local! {
    /// The folding thread the logs made on this thread hand their chunks to, while a
    /// [`FoldBehind`] is held.
    static FOLDER: RefCell<Option<Folder>> = const { RefCell::new(None) };
}

/// While held, the [`CountLog`]s made on this thread are folded on a folding thread (see the
/// module); dropped, logs made afterwards fold on their own thread again (those made before
/// keep folding behind until they are dropped; the folding thread ends with the last).
pub struct FoldBehind {
    /// The folder held before (none unless guards nest).
    previous: Option<Folder>,
}

impl FoldBehind {
    /// Starts a folding thread for the logs this thread makes from now on.
    pub fn start() -> std::io::Result<FoldBehind> {
        let (jobs, to_fold) = mpsc::sync_channel(CHUNKS_IN_FLIGHT);
        let spare = Arc::new(Mutex::new(Vec::new()));
        let recycled = Arc::clone(&spare);
        std::thread::Builder::new()
            .name("gap-folding".to_owned())
            .spawn(move || fold_all(&to_fold, &recycled))?;
        let folder = Folder { jobs, spare };
        let previous = FOLDER.with(|f| f.borrow_mut().replace(folder));
        Ok(FoldBehind { previous })
    }
}

impl Drop for FoldBehind {
    fn drop(&mut self) {
        let previous = self.previous.take();
        FOLDER.with(|f| *f.borrow_mut() = previous);
    }
}

/// The folding thread of this thread's [`FoldBehind`], if one is held.
pub(super) fn current() -> Option<Folder> {
    FOLDER.with(|f| f.borrow().clone())
}

/// The way to a folding thread: where chunks go, and emptied chunks for reuse.
#[derive(Clone)]
pub(super) struct Folder {
    jobs: SyncSender<Job>,
    spare: Arc<Mutex<Vec<Vec<u64>>>>,
}

/// A chunk of a log's appended entries, to fold into its folded part.
struct Job {
    folded: Arc<Folded>,
    chunk: Vec<u64>,
}

/// A log's part on the folding thread.
#[derive(Default)]
struct Folded {
    state: Mutex<FoldedState>,
    /// Signalled after each chunk is folded.
    done: Condvar,
}

/// What the folding thread has folded of a log.
struct FoldedState {
    /// The entries folded so far, a plain log.
    log: CountLog,
    /// Chunks folded.
    chunks: u64,
    /// Whether folding a chunk of this log panicked.
    failed: bool,
}

impl Default for FoldedState {
    fn default() -> FoldedState {
        FoldedState {
            log: CountLog::plain(),
            chunks: 0,
            failed: false,
        }
    }
}

/// The folding thread: folds each chunk into its log's folded part, until every sender is
/// gone.
fn fold_all(jobs: &Receiver<Job>, spare: &Mutex<Vec<Vec<u64>>>) {
    for Job { folded, mut chunk } in jobs {
        let mut state = lock(&folded.state);
        let fold = std::panic::AssertUnwindSafe(|| state.log.append_packed(&chunk));
        let failed = std::panic::catch_unwind(fold).is_err();
        state.failed |= failed;
        state.chunks += 1;
        drop(state);
        folded.done.notify_all();
        chunk.clear();
        lock(spare).push(chunk);
    }
}

/// Locks `mutex`; a panic while it was held is reported by the `failed` flag instead.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A log's link to the folding thread (held by the log, see [`CountLog`]).
pub(super) struct Behind {
    folder: Folder,
    folded: Arc<Folded>,
    /// Chunks handed over so far.
    sent: u64,
}

impl std::fmt::Debug for Behind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Behind").field("sent", &self.sent).finish()
    }
}

impl Behind {
    /// A link to `folder` for a new log.
    pub(super) fn new(folder: Folder) -> Behind {
        Behind {
            folder,
            folded: Arc::default(),
            sent: 0,
        }
    }

    /// Hands `appended` over to be folded; it comes back empty, with room for a chunk.
    pub(super) fn hand_over(&mut self, appended: &mut Vec<u64>) {
        let spare = lock(&self.folder.spare).pop();
        let empty = spare.unwrap_or_else(|| Vec::with_capacity(CHUNK));
        let chunk = std::mem::replace(appended, empty);
        let job = Job {
            folded: Arc::clone(&self.folded),
            chunk,
        };
        // The folding thread ends only once every log's sender is gone.
        let sent = self.folder.jobs.send(job);
        assert!(sent.is_ok(), "the inter-token gaps' folding thread stopped");
        self.sent += 1;
    }

    /// What has been folded, once every chunk handed over is. A panic of the folding
    /// thread on one of them is carried on here.
    pub(super) fn read<T>(&self, read: impl FnOnce(&CountLog) -> T) -> T {
        let mut state = lock(&self.folded.state);
        while state.chunks < self.sent && !state.failed {
            state = self
                .folded
                .done
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        assert!(!state.failed, "folding inter-token gaps failed");
        read(&state.log)
    }
}
