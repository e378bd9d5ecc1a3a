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

/// Starts a thread that handles SIGINT, SIGTERM and SIGHUP for the rest of the process. Call
/// it before starting any other thread (a thread inherits its creator's signal mask). A signal
/// the process was started with ignored (as `nohup` and background jobs start it) stays
/// ignored; one a parent left blocked is unblocked, so that an interruption is always seen.
pub fn install() -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let handled: Vec<i32> = [SIGINT, SIGTERM, SIGHUP]
        .into_iter()
        .filter(|&signal| !started_ignored(signal))
        .collect();
    unblock(&handled)?;
    let mut signals = signal_hook::iterator::Signals::new(&handled)?;
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            let name = match signal {
                SIGINT => "SIGINT",
                SIGTERM => "SIGTERM",
                _ => "SIGHUP",
            };
            // Held until the exit: no temporary file can be created and registered after
            // the clean-up.
            let _pending = clean_up();
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

/// Whether `signal`'s disposition is "ignore" (inherited across `exec`).
fn started_ignored(signal: i32) -> bool {
    // SAFETY: a query only (no new action), into a zeroed `sigaction` owned here.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_IGN
    }
}

/// Removes `signals` from the calling thread's signal mask (inherited across `exec`).
fn unblock(signals: &[i32]) -> std::io::Result<()> {
    // SAFETY: the set is a zeroed `sigset_t` owned here, initialised by `sigemptyset`.
    let status = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &signal in signals {
            libc::sigaddset(&mut set, signal);
        }
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut())
    };
    match status {
        0 => Ok(()),
        error => Err(std::io::Error::from_raw_os_error(error)),
    }
}

/// Creates a temporary file or folder with `create` and records it for removal on
/// interruption in one step: an interruption finds it either not yet made or recorded.
pub fn create_registered<T: AsRef<Path>>(
    create: impl FnOnce() -> std::io::Result<T>,
) -> std::io::Result<(T, Pending)> {
    let mut pending = lock(&PENDING);
    let made = create()?;
    let path = made.as_ref().to_path_buf();
    pending.push(path.clone());
    Ok((made, Pending(path)))
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

/// Kills every registered process group, then removes every registered path (those already
/// gone are ignored); returns the list of paths, locked, for the caller to hold until it exits.
fn clean_up() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    for group in lock(&GROUPS).drain(..) {
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    }
    let mut pending = lock(&PENDING);
    for path in pending.drain(..) {
        let _ = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
    }
    pending
}
