//! One ASTRA-Sim process with bounded waiting and bounded output.
//!
//! Two reader threads (stdout, stderr) hand the raw output over a bounded channel in chunks;
//! the driver waits on that channel with a deadline (`recv_timeout`), so a silent process can
//! never block it, and splits the chunks into lines itself (a Llama decode step prints about
//! 300 lines; one channel message per chunk rather than per line keeps that cheap). Std threads
//! rather than an async runtime: there is one child at a time, the engine is synchronous, and
//! a blocking reader per pipe plus `recv_timeout` gives the same guarantees (timeouts, no
//! deadlock on full pipes, kill at any point) with no extra dependency. Answers go through a
//! writer thread too, so a process that stops reading its stdin cannot block the driver (its
//! silence then runs into the deadline). Every byte counts
//! towards the per-batch limit; lines are cut at 4 KiB. The process is killed and reaped on
//! every error path and when dropped; the reader threads end when the pipes close or when the
//! driver stops listening.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{ErrorKind, Read, Write};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender, channel, sync_channel};
use std::thread;
use std::time::{Duration, Instant};

use super::lines::LineSplitter;
use super::{Fault, OutputLimits};

/// Largest chunk a reader thread sends at once.
const CHUNK: usize = 64 << 10;
/// How long a process that closed its output gets to exit before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);

enum Event {
    Data { bytes: Vec<u8>, stderr: bool },
    End { stderr: bool },
}

/// A running ASTRA-Sim process.
pub(crate) struct AstraProcess {
    child: Child,
    /// Lines for the writer thread; dropping it closes the process's stdin.
    stdin: Option<Sender<String>>,
    events: Receiver<Event>,
    stdout: LineSplitter,
    stderr: LineSplitter,
    /// The line last returned by [`AstraProcess::next_line`].
    line: String,
    tail: VecDeque<String>,
    limits: OutputLimits,
    timeout: Duration,
    bytes: u64,
    open_pipes: u8,
    stdout_done: bool,
    reaped: bool,
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
        let mut child = Command::new(program)
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(Fault::Spawn)?;
        let (tx, events) = sync_channel(64);
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let tx2 = tx.clone();
        thread::spawn(move || pump(stdout, false, tx));
        thread::spawn(move || pump(stderr, true, tx2));
        let (answers, lines) = channel::<String>();
        thread::spawn(move || {
            for line in lines {
                if stdin
                    .write_all(line.as_bytes())
                    .and_then(|()| stdin.flush())
                    .is_err()
                {
                    // The process has gone; the driver learns it from its closed stdout.
                    return;
                }
            }
        });
        Ok(AstraProcess {
            stdin: Some(answers),
            child,
            events,
            stdout: LineSplitter::default(),
            stderr: LineSplitter::default(),
            line: String::new(),
            tail: VecDeque::with_capacity(limits.tail_lines),
            limits,
            timeout,
            bytes: 0,
            open_pipes: 2,
            stdout_done: false,
            reaped: false,
        })
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
            if self.stdout.next_line(&mut self.line, self.stdout_done) {
                remember(&mut self.tail, self.limits.tail_lines, "", &self.line);
                return Ok(Some(&self.line));
            }
            if self.stdout_done {
                return Ok(None);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Fault::Stalled(self.timeout));
            }
            match self.events.recv_timeout(left) {
                Ok(event) => self.absorb(event)?,
                Err(RecvTimeoutError::Timeout) => return Err(Fault::Stalled(self.timeout)),
                Err(RecvTimeoutError::Disconnected) => self.stdout_done = true,
            }
        }
    }

    /// Accounts for one event: counts its bytes, feeds the splitters, moves stderr lines to
    /// the tail.
    fn absorb(&mut self, event: Event) -> Result<(), Fault> {
        match event {
            Event::Data { bytes, stderr } => {
                self.bytes += bytes.len() as u64;
                if self.bytes > self.limits.max_bytes_per_step {
                    return Err(Fault::Runaway {
                        bytes: self.bytes,
                        limit: self.limits.max_bytes_per_step,
                    });
                }
                if stderr {
                    self.stderr.push(&bytes);
                    self.stderr_to_tail(false);
                } else {
                    self.stdout.push(&bytes);
                }
            }
            Event::End { stderr } => {
                self.open_pipes = self.open_pipes.saturating_sub(1);
                if stderr {
                    self.stderr_to_tail(true);
                } else {
                    self.stdout_done = true;
                }
            }
        }
        Ok(())
    }

    fn stderr_to_tail(&mut self, at_end: bool) {
        while self.stderr.next_line(&mut self.line, at_end) {
            remember(
                &mut self.tail,
                self.limits.tail_lines,
                "[stderr] ",
                &self.line,
            );
        }
    }

    /// Queues one line for the process's stdin. A process that has gone away is reported as
    /// [`Fault::Exited`] (here when its stdin has broken, else by the end of its stdout).
    pub fn send(&mut self, line: &str) -> Result<(), Fault> {
        let Some(stdin) = &self.stdin else {
            return Err(Fault::Io("its stdin is already closed".into()));
        };
        if stdin.send(format!("{line}\n")).is_err() {
            return Err(self.exited());
        }
        Ok(())
    }

    /// Closes stdin (the process sees end of input).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits for the process to exit, reading what it still prints into the tail; kills it
    /// when `deadline` passes.
    pub fn wait(&mut self, deadline: Instant) -> Result<ExitStatus, Fault> {
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.reaped = true;
                    self.drain_after_exit();
                    return Ok(status);
                }
                Ok(None) => {}
                Err(e) => return Err(Fault::Io(format!("waiting for it: {e}"))),
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(Fault::Stalled(self.timeout));
            }
            match self.events.recv_timeout(Duration::from_millis(2)) {
                Ok(event) => {
                    if let Err(fault) = self.absorb(event) {
                        self.kill();
                        return Err(fault);
                    }
                    self.stdout_to_tail();
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => thread::sleep(Duration::from_millis(2)),
            }
        }
    }

    /// Reads what the reader threads still hold after the process exited (its last lines),
    /// for at most 200 ms.
    fn drain_after_exit(&mut self) {
        let until = Instant::now() + Duration::from_millis(200);
        while self.open_pipes > 0 {
            let left = until.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(event) => {
                    if self.absorb(event).is_err() {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        self.stdout_to_tail();
    }

    /// Moves the stdout lines nobody will read into the tail.
    fn stdout_to_tail(&mut self) {
        while self.stdout.next_line(&mut self.line, self.stdout_done) {
            remember(&mut self.tail, self.limits.tail_lines, "", &self.line);
        }
    }

    /// The fault for a process that stopped talking: its exit status once it has exited
    /// (killed after a grace period if it has not).
    pub fn exited(&mut self) -> Fault {
        self.close_stdin();
        match self.wait(Instant::now() + EXIT_GRACE) {
            Ok(status) => Fault::Exited(status.to_string()),
            Err(_) => Fault::Exited("it closed its output but did not exit; killed".into()),
        }
    }

    /// Kills and reaps the process (nothing when it was already reaped).
    pub fn kill(&mut self) {
        self.stdin = None;
        if !self.reaped {
            // Fails only when the process has already exited; `wait` then reaps it.
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.reaped = true;
        }
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

/// Reader thread: sends `source` in chunks until the pipe closes or the receiver goes away.
fn pump(mut source: impl Read, stderr: bool, tx: SyncSender<Event>) {
    let mut buf = vec![0; CHUNK];
    loop {
        match source.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let bytes = buf[..n].to_vec();
                if tx.send(Event::Data { bytes, stderr }).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = tx.send(Event::End { stderr });
}
