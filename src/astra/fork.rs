//! The LLMServingSim fork's interactive protocol (spec §6, LLMServingSim §3f and §4.5) for one
//! instance.
//!
//! The fork is started once with an initial workload. Whenever the start NPU (0) or, with
//! several NPUs, the end NPU (`tp − 1`) has finished its workload it prints
//! `sys[N] iteration I finished, C cycles, exposed communication X cycles.` and `Waiting`, then
//! blocks on one stdin line. The driver answers strictly one line per prompt:
//!
//! - **Delivering a batch**: every prompting NPU gets the same workload prefix. The prompts
//!   come in the fork's order (end NPU before start NPU at equal times), so NPUs that finished
//!   together start together.
//! - **Completing it**: the batch is done when every prompting NPU has reported it finished
//!   (LLMServingSim's rule). Earlier finishers are answered `pass` and prompt again later; the
//!   last prompt stays unanswered until the next batch (or the shutdown), so the fork's clock
//!   does not move while the engine idles or reuses a memoised step. With
//!   [`ForkSession::deliver_in_one_round`], the prompt left unanswered is instead that of the
//!   first NPU in the fork's polling order (the others are answered `pass` until it comes),
//!   so that every prompting NPU gets the next batch in one polling round. A prompting NPU's
//!   time is its reported finish minus the `C` of the first prompt that got the batch: `C` is
//!   absolute, so differences of `C` are durations.
//! - **Shutdown**: `done` to every prompting NPU, `exit` to the last one; the fork then prints
//!   `All Request Has Been Exited` and exits.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use super::protocol::{Report, is_exit_check, is_waiting, parse_report};
use super::{
    AstraInputs, AstraProcess, Ended, Fault, IoFault, OutputLimits, ParseError, ProtocolError,
};

/// A running fork serving one instance.
pub(crate) struct ForkSession {
    process: AstraProcess,
    /// The NPUs that prompt: the start NPU, and the end NPU when there are several.
    reporters: Vec<u32>,
    /// The prompt left unanswered at the end of the last batch.
    pending: Option<Report>,
    /// Latest finish of the last batch (of the initial workload at first), ns.
    clock: u64,
    /// Batches sent so far.
    batches: u64,
    timeout: Duration,
    /// Whether the prompt kept for the next batch is the first NPU's in polling order.
    one_round: bool,
    /// The index in `reporters` of the first NPU the fork polls (its first end NPU, else its
    /// first start NPU).
    first_polled: usize,
}

impl ForkSession {
    /// Starts the fork with the initial workload at `initial_prefix` on one instance or
    /// several in one process (the members of a DP group): the start NPU of each
    /// (`--start-npu-ids`, ascending) and the end NPU of each with several NPUs
    /// (`--end-npu-ids`). Every one of them prompts for, and gets, each batch.
    pub fn spawn(
        binary: &Path,
        inputs: &AstraInputs,
        initial_prefix: &Path,
        starts: &[u32],
        ends: &[u32],
        timeout: Duration,
        limits: OutputLimits,
    ) -> Result<ForkSession, Fault> {
        let ids = |key: &str, ids: &[u32]| {
            let list: String = ids.iter().map(|id| format!("{id},")).collect();
            OsString::from(format!("--{key}={list}"))
        };
        let arg = |key: &str, path: &Path| {
            let mut a = OsString::from(format!("--{key}="));
            a.push(path);
            a
        };
        let mut args = vec![
            arg("workload-configuration", initial_prefix),
            arg("system-configuration", &inputs.system),
            arg("network-configuration", &inputs.network),
            arg("memory-configuration", &inputs.memory),
            ids("start-npu-ids", starts),
        ];
        let mut reporters = starts.to_vec();
        if !ends.is_empty() {
            args.push(ids("end-npu-ids", ends));
            reporters.extend_from_slice(ends);
        }
        let process = AstraProcess::spawn(binary, &args, inputs.dir(), limits, timeout)?;
        Ok(ForkSession {
            process,
            reporters,
            pending: None,
            clock: 0,
            batches: 0,
            timeout,
            one_round: false,
            first_polled: if ends.is_empty() { 0 } else { starts.len() },
        })
    }

    /// Keeps, at the end of each batch, the prompt of the first NPU in the fork's polling order
    /// (end NPUs, then start NPUs) for the next batch, so that every prompting NPU gets that
    /// batch in the same polling round: an NPU whose batch starts with a RECV gives the fork
    /// no event, and one that got the batch alone could leave it idling (a whole millisecond)
    /// before the round that hands the batch to the NPUs that start it.
    pub fn deliver_in_one_round(&mut self) {
        self.one_round = true;
    }

    /// Reads the first prompt (the initial workload finished) and keeps it for the first
    /// batch.
    pub fn handshake(&mut self) -> Result<(), Fault> {
        let poll = self.next_poll(Instant::now() + self.timeout)?;
        if poll.iteration != 0 {
            return Err(Fault::Protocol(ProtocolError::FirstIteration {
                npu: poll.npu,
                iteration: poll.iteration,
            }));
        }
        self.clock = poll.cycles;
        self.pending = Some(poll);
        Ok(())
    }

    /// The prompting NPUs: the start NPUs, then the end NPUs, as given at start-up.
    pub fn reporters(&self) -> &[u32] {
        &self.reporters
    }

    /// Runs one batch, whose files are `<prefix>.<npu>.et`; returns the time from the batch's
    /// start (the first prompt that got it: the previous batch's end, or later after a
    /// one-round delivery's wait) to each prompting NPU's first report of this one
    /// ([`ForkSession::reporters`] order), ns; the batch's duration is the largest.
    pub fn run_batch_each(&mut self, prefix: &Path) -> Result<Vec<u64>, Fault> {
        let prefix = prefix
            .to_str()
            .ok_or_else(|| Fault::Io(IoFault::NonUtf8Path(prefix.to_path_buf())))?;
        self.process.reset_budget();
        let deadline = Instant::now() + self.timeout;
        let k = self.batches;
        let n = self.reporters.len();
        let mut given = vec![false; n];
        let mut start = None;
        while given.contains(&false) {
            let poll = match self.pending.take() {
                Some(p) => p,
                None => self.next_poll(deadline)?,
            };
            let i = self.check(&poll, Some(k))?;
            start.get_or_insert(poll.cycles);
            if given[i] {
                return Err(Fault::Protocol(ProtocolError::PromptedAgain {
                    npu: poll.npu,
                    batch: k,
                }));
            }
            self.process.send(prefix)?;
            given[i] = true;
        }
        self.batches += 1;
        let start = start.unwrap_or(self.clock);
        let mut finished: Vec<Option<u64>> = vec![None; n];
        loop {
            let poll = self.next_poll(deadline)?;
            let i = self.check(&poll, Some(k + 1))?;
            finished[i].get_or_insert(poll.cycles);
            if finished.iter().all(Option::is_some) && (!self.one_round || i == self.first_polled) {
                self.pending = Some(poll);
                break;
            }
            self.process.send("pass")?;
        }
        let finished: Vec<u64> = finished.into_iter().flatten().collect();
        let end = finished.iter().copied().max().unwrap_or(self.clock);
        let steps = finished.iter().map(|&f| f - start).collect();
        self.clock = end;
        Ok(steps)
    }

    /// Which reporter `poll` comes from, after checking its time and (when given) its
    /// iteration.
    fn check(&self, poll: &Report, iteration: Option<u64>) -> Result<usize, Fault> {
        let Some(i) = self.reporters.iter().position(|&r| r == poll.npu) else {
            return Err(Fault::Protocol(ProtocolError::NotAReporter {
                npu: poll.npu,
                reporters: self.reporters.clone(),
            }));
        };
        if let Some(expected) = iteration
            && poll.iteration != expected
        {
            return Err(Fault::Protocol(ProtocolError::Iteration {
                npu: poll.npu,
                iteration: poll.iteration,
                expected,
            }));
        }
        if poll.cycles < self.clock {
            return Err(Fault::Protocol(ProtocolError::Backwards {
                npu: poll.npu,
                cycles: poll.cycles,
                clock: self.clock,
            }));
        }
        Ok(i)
    }

    /// Reads up to the next `Waiting` and parses the report line just before it.
    fn next_poll(&mut self, deadline: Instant) -> Result<Report, Fault> {
        let mut previous = String::new();
        loop {
            let Some(line) = self.process.next_line(deadline)? else {
                return Err(self.process.exited());
            };
            if is_exit_check(line) {
                return Err(Fault::Protocol(ProtocolError::UnaskedShutdown));
            }
            if !is_waiting(line) {
                if !line.trim().is_empty() {
                    previous.clear();
                    previous.push_str(line);
                }
                continue;
            }
            return parse_report(&previous).ok_or_else(|| {
                Fault::Unparseable(ParseError::IterationReport {
                    line: previous.clone(),
                })
            });
        }
    }

    /// Ends the run: `done` to every prompting NPU but the last, `exit` to the last, then
    /// waits for the process to exit. Returns a warning when the fork did not confirm that
    /// everything ended.
    pub fn shutdown(&mut self) -> Result<Option<String>, Fault> {
        self.process.reset_budget();
        let deadline = Instant::now() + self.timeout;
        let mut asleep = vec![false; self.reporters.len()];
        loop {
            let poll = match self.pending.take() {
                Some(p) => p,
                None => self.next_poll(deadline)?,
            };
            let i = self.check(&poll, None)?;
            asleep[i] = true;
            if asleep.iter().all(|&a| a) {
                self.process.send("exit")?;
                break;
            }
            self.process.send("done")?;
        }
        self.process.close_stdin();
        let mut confirmed = None;
        while let Some(line) = self.process.next_line(deadline)? {
            if line.contains("All Request Has Been Exited") {
                confirmed = Some(true);
            } else if line.contains("Some Requests Remain") {
                confirmed = Some(false);
            }
        }
        let status = self.process.wait(deadline)?;
        if !status.success() {
            return Err(Fault::Exited(Ended::Status(status)));
        }
        Ok(match confirmed {
            Some(true) => None,
            Some(false) => Some("ASTRA-Sim reported `ERROR: Some Requests Remain`".into()),
            None => Some("ASTRA-Sim exited without `All Request Has Been Exited`".into()),
        })
    }

    /// The fork's clock at the end of the last batch, ns.
    pub fn clock(&self) -> u64 {
        self.clock
    }

    /// The last lines printed, oldest first.
    pub fn last_lines(&self) -> Vec<String> {
        self.process.last_lines()
    }
}
