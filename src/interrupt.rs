//! Interruption (Ctrl-C, SIGTERM, SIGHUP): the process groups of running children (ASTRA-Sim)
//! are killed, the temporary files of outputs not yet finished are removed, the user is told,
//! and the process exits with 128 + the signal's number.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// Temporary files and folders of outputs being written.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// Process groups of running children, killed on interruption.
static GROUPS: Mutex<Vec<rustix::process::Pid>> = Mutex::new(Vec::new());
/// Whether some output has been put in place.
static COMMITTED: AtomicBool = AtomicBool::new(false);
/// The file descriptor the interruption message goes to: stderr, or the terminal of before
/// while a sweep sends stderr to its log.
static CONSOLE: AtomicI32 = AtomicI32::new(2);

/// Starts a thread that handles SIGINT, SIGTERM and SIGHUP for the rest of the process.
pub fn install() -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            let name = match signal {
                SIGINT => "SIGINT",
                SIGTERM => "SIGTERM",
                _ => "SIGHUP",
            };
            clean_up();
            let kept = if COMMITTED.load(Ordering::SeqCst) {
                "outputs finished before it were kept, unfinished ones removed"
            } else {
                "no output was written"
            };
            // Written past stderr's lock, which the interrupted thread may hold.
            let message = format!("blis-cosim: interrupted by {name}: {kept}\n");
            let console = CONSOLE.load(Ordering::SeqCst);
            // SAFETY: `set_console`'s caller keeps the descriptor open while it is set, and
            // the process exits right after this write.
            let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(console) };
            let _ = rustix::io::write(fd, message.as_bytes());
            std::process::exit(128 + signal);
        }
    });
    Ok(())
}

/// Records `path` (a temporary file or folder) for removal on interruption, until the
/// returned guard is dropped.
pub fn register(path: &Path) -> Pending {
    lock(&PENDING).push(path.to_path_buf());
    Pending(path.to_path_buf())
}

/// Records the process group `group` (a child started as a group leader) for killing on
/// interruption, until the returned guard is dropped.
pub fn register_group(group: rustix::process::Pid) -> PendingGroup {
    lock(&GROUPS).push(group);
    PendingGroup(group)
}

/// Sends the interruption message to the open descriptor `fd` (2, stderr, by default); the
/// caller keeps `fd` open until it sets it back to 2.
pub fn set_console(fd: i32) {
    CONSOLE.store(fd, Ordering::SeqCst);
}

/// Notes that an output has been put in place.
pub fn committed() {
    COMMITTED.store(true, Ordering::SeqCst);
}

/// A registered temporary path; dropping it forgets the path.
#[derive(Debug)]
pub struct Pending(PathBuf);

impl Drop for Pending {
    fn drop(&mut self) {
        forget(&PENDING, &self.0);
    }
}

/// A registered process group; dropping it forgets the group.
#[derive(Debug)]
pub struct PendingGroup(rustix::process::Pid);

impl PendingGroup {
    /// The group's id.
    pub fn id(&self) -> rustix::process::Pid {
        self.0
    }
}

impl Drop for PendingGroup {
    fn drop(&mut self) {
        forget(&GROUPS, &self.0);
    }
}

fn forget<T: PartialEq>(list: &'static Mutex<Vec<T>>, item: &T) {
    let mut list = lock(list);
    if let Some(i) = list.iter().position(|p| p == item) {
        list.swap_remove(i);
    }
}

fn lock<T>(list: &'static Mutex<Vec<T>>) -> std::sync::MutexGuard<'static, Vec<T>> {
    list.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Kills every registered process group, then removes every registered path; those already
/// gone are ignored.
fn clean_up() {
    for group in lock(&GROUPS).drain(..) {
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    }
    for path in lock(&PENDING).drain(..) {
        let _ = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
    }
}
