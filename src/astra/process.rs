//! One ASTRA-Sim process with bounded waiting and bounded output.
//!
//! The driver thread talks to the process itself, with no helper threads. Its ends of the
//! three pipes are non-blocking, and every wait is one `poll(2)` on the open output pipes
//! (and on stdin while an answer is still unwritten) for at most the time left to the
//! deadline, so a silent process can never block the driver. A wake-up reads what each ready
//! pipe holds (up to 64 KiB) into one reused buffer and splits it into lines there: no
//! allocation and no hand-off between threads per line.
//!
//! The fork flushes every line it prints (a Llama decode step prints about 300, a few µs
//! apart), and a driver waiting in `poll` is woken for each one, which costs the fork a
//! wake-up (often an interrupt to the other CPU) per line. So while the process is printing
//! (the last wait brought output), [`AstraProcess::next_line`] sleeps `BURST_PAUSE` before
//! it waits again, and then reads the lines that piled up in one go. That pause, plus the
//! system's timer slack (50 µs by default), bounds how late the driver sees a prompt (a batch
//! takes the fork about 1 ms); it never sleeps past the deadline.
//!
//! Answers are written at once. What a full stdin pipe does not take (a process that stops
//! reading its stdin) stays queued and is written as the pipe drains during later waits, so
//! the driver never blocks on a write: a process that stops reading cannot block it (its
//! silence runs into the deadline), and a process blocked on a full output pipe cannot
//! deadlock with it. Every byte, stdout and stderr, counts towards the per-batch limit
//! ([`Fault::Runaway`]); lines are cut at 4 KiB; the last lines, stderr included, are
//! remembered for error messages. The process is killed and reaped on every error path and
//! when dropped; its pipes close with it.
//!
//! The process leads a process group of its own, and the whole group is killed before the
//! process is reaped (on every path: an exit, a fault, a drop), so that what a wrapper script
//! started (a pipeline, a background job) ends with it; the group is also registered with
//! [`crate::interrupt`], which kills it on Ctrl-C or SIGTERM. A process of its own group gets
//! no terminal signals. If this process dies without cleaning up (SIGKILL, an abort), the
//! kernel sends the child SIGKILL (its parent-death signal), so none outlives its parent.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::io::{Errno, ioctl_fionbio, read, write};
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, kill_process_group, waitid};

use super::lines::LineSplitter;
use super::{Ended, Fault, IoFault, OutputLimits};
use crate::interrupt::{PendingGroup, register_group};

/// Largest chunk read from a pipe at once.
const CHUNK: usize = 64 << 10;
/// How long a process that closed its output gets to exit before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);
/// How often [`AstraProcess::wait`] checks whether the process has exited.
const EXIT_POLL: Duration = Duration::from_millis(2);
/// How long [`AstraProcess::next_line`] lets output accumulate before it waits again, while
/// the process is printing (see the module documentation).
const BURST_PAUSE: Duration = Duration::from_micros(20);
/// How long output is still read after the process exited (what it printed last).
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(200);

/// A running ASTRA-Sim process.
pub struct AstraProcess {
    child: Child,
    /// The process's group, registered for killing on interruption.
    group: PendingGroup,
    /// The process's stdin (non-blocking); `None` once closed.
    stdin: Option<ChildStdin>,
    /// Answer bytes the stdin pipe had no room for yet.
    unsent: Vec<u8>,
    /// Close stdin as soon as `unsent` is written.
    closing: bool,
    /// The process's stdout and stderr (non-blocking); `None` once they reached their end.
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    out_lines: LineSplitter,
    err_lines: LineSplitter,
    /// Read buffer, reused for every read.
    buf: Vec<u8>,
    /// The line last returned by [`AstraProcess::next_line`].
    line: String,
    tail: VecDeque<String>,
    limits: OutputLimits,
    timeout: Duration,
    bytes: u64,
    /// The last wait in [`AstraProcess::next_line`] brought output.
    printing: bool,
    reaped: bool,
}

/// Has the kernel kill the child `command` starts when this process dies (the parent-death
/// signal, SIGKILL), so that a child that ignores its closed stdin cannot outlive a run that
/// was killed or aborted.
fn die_with_parent(command: &mut Command) {
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs in the forked child before `exec` and makes only two system
    // calls (`prctl`, `getppid`), both async-signal-safe; it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            // A parent that died before the call above would never send the signal.
            if rustix::process::getppid() != Some(parent) {
                return Err(Errno::SRCH.into());
            }
            Ok(())
        });
    }
}

impl AstraProcess {
    /// Starts `binary` with `args` in `cwd`, all three standard streams piped. A relative
    /// path is taken from the current directory (not `cwd`); a bare name is looked up in
    /// `PATH`. `timeout` is quoted in stall errors.
    pub fn spawn(
        binary: &Path,
        args: &[OsString],
        cwd: &Path,
        limits: OutputLimits,
        timeout: Duration,
    ) -> Result<AstraProcess, Fault> {
        let program = if binary.is_relative() && binary.components().count() > 1 {
            std::env::current_dir().map_err(Fault::Spawn)?.join(binary)
        } else {
            binary.to_owned()
        };
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        die_with_parent(&mut command);
        let mut child = command.spawn().map_err(Fault::Spawn)?;
        let group = register_group(Pid::from_child(&child));
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let stdin = child.stdin.take().expect("stdin is piped");
        // Dropped on an error below: kills and reaps the process.
        let process = AstraProcess {
            child,
            group,
            stdin: Some(stdin),
            unsent: Vec::new(),
            closing: false,
            stdout: Some(stdout),
            stderr: Some(stderr),
            out_lines: LineSplitter::default(),
            err_lines: LineSplitter::default(),
            buf: vec![0; CHUNK],
            line: String::new(),
            tail: VecDeque::with_capacity(limits.tail_lines),
            limits,
            timeout,
            bytes: 0,
            printing: false,
            reaped: false,
        };
        // Only the driver's ends: each end of a pipe is its own open file description, so
        // the process's ends stay blocking.
        let fds = [
            process.stdin.as_ref().map(AsFd::as_fd),
            process.stdout.as_ref().map(AsFd::as_fd),
            process.stderr.as_ref().map(AsFd::as_fd),
        ];
        for fd in fds.into_iter().flatten() {
            ioctl_fionbio(fd, true).map_err(|e| Fault::Io(IoFault::NonBlocking(io_error(e))))?;
        }
        Ok(process)
    }

    /// Starts counting output towards a new batch.
    pub fn reset_budget(&mut self) {
        self.bytes = 0;
    }

    /// The next stdout line (valid until the next call), `None` once stdout is closed and
    /// read. Stderr lines only go to the remembered tail. Fails when `deadline` passes or the
    /// output exceeds the limit.
    pub fn next_line(&mut self, deadline: Instant) -> Result<Option<&str>, Fault> {
        loop {
            let at_end = self.stdout.is_none();
            if self.out_lines.next_line(&mut self.line, at_end) {
                remember(&mut self.tail, self.limits.tail_lines, "", &self.line);
                return Ok(Some(&self.line));
            }
            if at_end {
                return Ok(None);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Fault::Stalled(self.timeout));
            }
            if self.printing {
                thread::sleep(BURST_PAUSE.min(left));
            }
            let before = self.bytes;
            self.pump(deadline.saturating_duration_since(Instant::now()))?;
            self.printing = self.bytes > before;
        }
    }

    /// Waits at most `timeout` until a pipe is ready, then reads each ready output pipe once
    /// (counting the bytes, splitting them into lines, moving stderr lines to the tail) and
    /// writes what stdin takes of the unsent answers. Returns at once when no pipe is open.
    /// Fails when the output exceeds the limit.
    fn pump(&mut self, timeout: Duration) -> Result<(), Fault> {
        let candidates = [
            (
                Pipe::Stdout,
                self.stdout.as_ref().map(AsFd::as_fd),
                PollFlags::IN,
            ),
            (
                Pipe::Stderr,
                self.stderr.as_ref().map(AsFd::as_fd),
                PollFlags::IN,
            ),
            (
                Pipe::Stdin,
                self.stdin
                    .as_ref()
                    .filter(|_| !self.unsent.is_empty())
                    .map(AsFd::as_fd),
                PollFlags::OUT,
            ),
        ];
        // The open pipes first; the entries after them are never polled.
        let mut open = [(Pipe::Stdout, None, PollFlags::empty()); 3];
        let mut n = 0;
        for (pipe, fd, flags) in candidates {
            if fd.is_some() {
                open[n] = (pipe, fd, flags);
                n += 1;
            }
        }
        let Some(any) = open[0].1 else {
            return Ok(());
        };
        let mut fds = open.map(|(_, fd, flags)| PollFd::from_borrowed_fd(fd.unwrap_or(any), flags));
        // A timeout too long for a timespec (none in practice) waits 136 years instead.
        let timeout = Timespec::try_from(timeout).unwrap_or(Timespec {
            tv_sec: i64::from(u32::MAX),
            tv_nsec: 0,
        });
        match poll(&mut fds[..n], Some(&timeout)) {
            Ok(_) => {}
            Err(Errno::INTR) => return Ok(()),
            Err(e) => {
                return Err(Fault::Io(IoFault::Poll(io_error(e))));
            }
        }
        let revents = fds.map(|fd| fd.revents());
        let pipes = open.map(|(pipe, _, _)| pipe);
        for (pipe, revents) in pipes.into_iter().zip(revents).take(n) {
            if revents.is_empty() {
                continue;
            }
            match pipe {
                Pipe::Stdout | Pipe::Stderr => self.read_pipe(pipe)?,
                Pipe::Stdin => {
                    // A broken stdin surfaces as the end of stdout.
                    let _ = self.flush_stdin();
                }
            }
        }
        Ok(())
    }

    /// Reads `pipe` (stdout or stderr) once; closes it at its end or on an error.
    fn read_pipe(&mut self, pipe: Pipe) -> Result<(), Fault> {
        let fd = match pipe {
            Pipe::Stdout => self.stdout.as_ref().map(AsFd::as_fd),
            Pipe::Stderr => self.stderr.as_ref().map(AsFd::as_fd),
            Pipe::Stdin => None,
        };
        let Some(fd) = fd else {
            return Ok(());
        };
        let n = match read(fd, &mut self.buf[..]) {
            Ok(n) => n,
            Err(e) if e == Errno::INTR || would_block(e) => return Ok(()),
            // Read errors end the stream like its end does.
            Err(_) => 0,
        };
        if n == 0 {
            match pipe {
                Pipe::Stderr => {
                    self.stderr = None;
                    self.stderr_to_tail(true);
                }
                _ => self.stdout = None,
            }
            return Ok(());
        }
        self.bytes += n as u64;
        if self.bytes > self.limits.max_bytes_per_step {
            return Err(Fault::Runaway {
                bytes: self.bytes,
                limit: self.limits.max_bytes_per_step,
            });
        }
        match pipe {
            Pipe::Stderr => {
                self.err_lines.push(&self.buf[..n]);
                self.stderr_to_tail(false);
            }
            _ => self.out_lines.push(&self.buf[..n]),
        }
        Ok(())
    }

    fn stderr_to_tail(&mut self, at_end: bool) {
        while self.err_lines.next_line(&mut self.line, at_end) {
            remember(
                &mut self.tail,
                self.limits.tail_lines,
                "[stderr] ",
                &self.line,
            );
        }
    }

    /// Queues one line for the process's stdin and writes what the pipe takes of it now. A
    /// process that has gone away is reported as [`Fault::Exited`] (here when its stdin has
    /// broken, else by the end of its stdout).
    pub fn send(&mut self, line: &str) -> Result<(), Fault> {
        if self.stdin.is_none() || self.closing {
            return Err(Fault::Io(IoFault::StdinClosed));
        }
        self.unsent.extend_from_slice(line.as_bytes());
        self.unsent.push(b'\n');
        if self.flush_stdin().is_err() {
            return Err(self.exited());
        }
        Ok(())
    }

    /// Writes what the stdin pipe takes of the unsent answers, without blocking, and closes
    /// stdin once they are written if asked to. Fails when stdin is broken (the process
    /// closed it or exited); stdin is then closed and the answers dropped.
    fn flush_stdin(&mut self) -> Result<(), ()> {
        let Some(stdin) = &self.stdin else {
            self.unsent.clear();
            return Ok(());
        };
        while !self.unsent.is_empty() {
            match write(stdin, &self.unsent) {
                Ok(n) => {
                    self.unsent.drain(..n);
                }
                Err(Errno::INTR) => {}
                Err(e) if would_block(e) => break,
                Err(_) => {
                    self.stdin = None;
                    self.unsent.clear();
                    return Err(());
                }
            }
        }
        if self.closing && self.unsent.is_empty() {
            self.stdin = None;
        }
        Ok(())
    }

    /// Closes stdin (the process sees end of input) once the answers queued so far are
    /// written.
    pub fn close_stdin(&mut self) {
        self.closing = true;
        let _ = self.flush_stdin();
    }

    /// Waits for the process to exit, reading what it still prints into the tail; kills it
    /// when `deadline` passes.
    pub fn wait(&mut self, deadline: Instant) -> Result<ExitStatus, Fault> {
        loop {
            if self.reaped || self.has_exited()? {
                // Returns the status kept at the reaping when already reaped.
                let status = if self.reaped {
                    self.child.wait()
                } else {
                    self.end_group_and_reap()
                };
                self.drain_after_exit();
                return status.map_err(|e| Fault::Io(IoFault::Wait(e)));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.kill();
                return Err(Fault::Stalled(self.timeout));
            }
            let step = left.min(EXIT_POLL);
            if self.stdout.is_none() && self.stderr.is_none() {
                thread::sleep(step);
                continue;
            }
            if let Err(fault) = self.pump(step) {
                self.kill();
                return Err(fault);
            }
            self.stdout_to_tail();
        }
    }

    /// Reads what the process printed last, after it exited, for at most
    /// [`DRAIN_AFTER_EXIT`] (a child of its own may hold the pipes open).
    fn drain_after_exit(&mut self) {
        let until = Instant::now() + DRAIN_AFTER_EXIT;
        while self.stdout.is_some() || self.stderr.is_some() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || self.pump(left).is_err() {
                break;
            }
        }
        self.stdout_to_tail();
    }

    /// Moves the stdout lines nobody will read into the tail.
    fn stdout_to_tail(&mut self) {
        while self
            .out_lines
            .next_line(&mut self.line, self.stdout.is_none())
        {
            remember(&mut self.tail, self.limits.tail_lines, "", &self.line);
        }
    }

    /// The fault for a process that stopped talking: its exit status once it has exited
    /// (killed after a grace period if it has not).
    pub fn exited(&mut self) -> Fault {
        self.close_stdin();
        match self.wait(Instant::now() + EXIT_GRACE) {
            Ok(status) => Fault::Exited(Ended::Status(status)),
            Err(_) => Fault::Exited(Ended::Hung),
        }
    }

    /// Whether the process has exited, without reaping it (its group stays valid).
    fn has_exited(&self) -> Result<bool, Fault> {
        let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
        match waitid(WaitId::Pid(Pid::from_child(&self.child)), options) {
            Ok(status) => Ok(status.is_some()),
            Err(e) => Err(Fault::Io(IoFault::Wait(io_error(e)))),
        }
    }

    /// Kills the process's whole group and reaps the process (nothing when it was already
    /// reaped).
    pub fn kill(&mut self) {
        self.stdin = None;
        self.unsent.clear();
        if !self.reaped {
            let _ = self.end_group_and_reap();
        }
    }

    /// Kills the process's group (the process included, unless it has exited), then reaps the
    /// process. The group outlives its leader until the leader is reaped, so killing it first
    /// cannot hit another group that reused the id; it fails only when the group is gone.
    fn end_group_and_reap(&mut self) -> std::io::Result<ExitStatus> {
        let _ = kill_process_group(self.group.id(), Signal::KILL);
        self.reaped = true;
        self.child.wait()
    }

    /// The last lines printed, oldest first.
    pub fn last_lines(&self) -> Vec<String> {
        self.tail.iter().cloned().collect()
    }
}

impl Drop for AstraProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One of the process's pipes.
#[derive(Debug, Clone, Copy)]
enum Pipe {
    Stdout,
    Stderr,
    Stdin,
}

fn would_block(e: Errno) -> bool {
    e == Errno::AGAIN || e == Errno::WOULDBLOCK
}

fn io_error(e: Errno) -> std::io::Error {
    e.into()
}

/// Appends `prefix` + `line` to `tail`, keeping its last `keep` entries and reusing the
/// oldest entry's buffer.
fn remember(tail: &mut VecDeque<String>, keep: usize, prefix: &str, line: &str) {
    if keep == 0 {
        return;
    }
    let mut entry = if tail.len() >= keep {
        tail.pop_front().unwrap_or_default()
    } else {
        String::new()
    };
    entry.clear();
    entry.push_str(prefix);
    entry.push_str(line);
    tail.push_back(entry);
}
