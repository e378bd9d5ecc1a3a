//! Failures of the ASTRA-Sim backend: what went wrong, at which batch, and what ASTRA-Sim
//! printed last.

use std::fmt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

/// What went wrong.
#[derive(Debug)]
pub enum Fault {
    /// The binary could not be started.
    Spawn(std::io::Error),
    /// The process ended (or closed its output) when the protocol expected more; its last
    /// lines, stderr's among them, are in [`AstraError::last_lines`].
    Exited(Ended),
    /// Nothing that completes the batch arrived in time.
    Stalled(Duration),
    /// The process printed more than the per-batch limit.
    Runaway {
        /// Bytes read when the limit was crossed.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// A line the protocol needs could not be parsed, or never came.
    Unparseable(ParseError),
    /// The process answered out of protocol (wrong NPU, iteration or time).
    Protocol(ProtocolError),
    /// Writing the inputs or talking to the process failed, or the batch does not fit it.
    Io(IoFault),
    /// The run is one the binary would refuse or crash on; nothing was started.
    Refused(Refusal),
    /// The network is not the shape of what runs on it; nothing was started.
    Shape(ShapeError),
    /// A batch's `.et` file could not be written.
    Write(WriteError),
    /// ASTRA-Sim did not report the finish of a pipeline stage.
    NoStageFinish(NoStageFinish),
}

/// How a process ended when the protocol expected more; renders inside "the process ended
/// unexpectedly (...)".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It exited: its exit code, or the signal that ended it (`ExitStatusExt::signal`).
    Status(ExitStatus),
    /// It closed its output but did not exit within the grace period, and was killed.
    Hung,
}

impl fmt::Display for Ended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ended::Status(status) => write!(f, "{status}"),
            Ended::Hung => f.write_str("it closed its output but did not exit; killed"),
        }
    }
}

/// A line of ASTRA-Sim's output that the protocol needs and that did not parse (the line is
/// kept as printed), or that never came; renders to the text after "unparseable output: ".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A stock run's final line for an NPU that does not read as one.
    #[error("expected `sys[N] finished, T cycles, exposed communication E cycles.`, got `{line}`")]
    FinalReport { line: String },
    /// A stock run exited without the final line of NPU `npu`.
    #[error("no `sys[{npu}] finished, T cycles` line before it exited")]
    NoFinalReport { npu: usize },
    /// The fork's report before a `Waiting` does not read as one.
    #[error(
        "expected `sys[N] iteration I finished, C cycles, exposed communication X cycles.` \
         before `Waiting`, got `{line}`"
    )]
    IterationReport { line: String },
}

/// A run the binary would refuse or crash on, found before starting it; renders to the text
/// after "refused before starting it: ".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Stock ASTRA-Sim 2.0 exits on a network dimension of `npus` < 2 NPUs; `dims` are the
    /// network's dimensions, in NPUs.
    #[error(
        "stock ASTRA-Sim 2.0 exits on a network dimension of {npus} NPU (its network parser: \
         `npus_count ({npus}) should be larger than 1`), and this network's dimensions are \
         {dims:?}: a TP-1 prefill instance or DP group runs with `--astra-mode fork` only (a \
         lone TP-1 instance runs with an idle peer)"
    )]
    NetworkDimension { npus: u32, dims: Vec<u32> },
}

/// How the process answered out of protocol; renders to the text after "protocol error: ".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// The fork's first report is not of iteration 0.
    #[error("the first report (NPU {npu}) has iteration {iteration}, expected 0")]
    FirstIteration { npu: u32, iteration: u64 },
    /// An NPU prompted twice before every NPU had received the batch.
    #[error("NPU {npu} prompted again before every NPU of the instance received batch {batch}")]
    PromptedAgain { npu: u32, batch: u64 },
    /// A prompt from an NPU that neither starts nor ends the instance.
    #[error("a prompt from NPU {npu}, which is neither the start nor the end NPU ({reporters:?})")]
    NotAReporter { npu: u32, reporters: Vec<u32> },
    /// A report of another iteration than the one due.
    #[error("NPU {npu} reported iteration {iteration}, expected {expected}")]
    Iteration {
        npu: u32,
        iteration: u64,
        expected: u64,
    },
    /// A report whose time is before the previous batch's end.
    #[error("NPU {npu} reported {cycles} cycles, before the previous batch ended ({clock})")]
    Backwards { npu: u32, cycles: u64, clock: u64 },
    /// The fork began its shutdown before it was told to.
    #[error("it started its shutdown (`Checking Non-Exited Systems`) unasked")]
    UnaskedShutdown,
    /// A stock run's report for an NPU the batch does not have.
    #[error("a report for NPU {npu}, but the batch has {npus} NPUs")]
    NoSuchNpu { npu: u32, npus: u32 },
}

/// Writing the inputs, talking to the process, or a batch that does not fit it.
#[derive(Debug, thiserror::Error)]
pub enum IoFault {
    /// Its pipes could not be made non-blocking.
    #[error("making its pipes non-blocking: {0}")]
    NonBlocking(std::io::Error),
    /// Polling its output failed.
    #[error("waiting for its output: {0}")]
    Poll(std::io::Error),
    /// Waiting for its exit failed.
    #[error("waiting for it: {0}")]
    Wait(std::io::Error),
    /// A line sent after its stdin was closed.
    #[error("its stdin is already closed")]
    StdinClosed,
    /// A batch's workload path that cannot be sent (ASTRA-Sim reads UTF-8 lines).
    #[error("the workload path {} is not valid UTF-8", .0.display())]
    NonUtf8Path(PathBuf),
    /// Its configuration files could not be written.
    #[error("writing its inputs: {0}")]
    Inputs(std::io::Error),
    /// The start-up batch's files could not be written.
    #[error("{0}")]
    Initial(Box<crate::chakra::EtError>),
    /// The idle peer's trace (a lone TP-1 instance's) could not be encoded.
    #[error("the idle peer's trace: {0}")]
    IdlePeer(Box<crate::chakra::EtError>),
    /// A DP group member's trace could not be built.
    #[error("the trace of member {member}: {error}")]
    MemberTrace {
        member: usize,
        error: Box<crate::chakra::TraceError>,
    },
    /// A DP wave of another size than its group.
    #[error("a wave of {batches} batches for a group of {members} members")]
    WaveSize { batches: usize, members: u32 },
    /// A pipelined DP wave of another size or stage count than its group.
    #[error(
        "a pipelined wave of {batches} batches and {stages} stages for a group of {members} \
         members in {pp} stages"
    )]
    PipelinedWaveSize {
        batches: usize,
        stages: usize,
        members: u32,
        pp: usize,
    },
    /// A pipelined instance's network of another size than its stages.
    #[error(
        "a pipelined instance of {stages} stages of {tp} NPUs needs a network of {} NPUs, got \
         {npus}",
        tp * stages
    )]
    PipelineNetwork { stages: u32, tp: u32, npus: u32 },
    /// A batch after a fault had stopped the process.
    #[error("ASTRA-Sim was stopped by an earlier fault")]
    Stopped,
}

/// A step ASTRA-Sim could not price: its trace, or ASTRA-Sim's answer, does not fit the step.
/// Carried by [`crate::latency::LatencyError::AstraStep`]. Its causes are part of its message
/// (no `source`), as they were when it was text.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The trace of the step (`step`: its index, when it is being priced) could not be built.
    #[error(
        "ASTRA-Sim trace{}: {error}",
        step.map_or(String::new(), |s| format!(" of step {s}"))
    )]
    Trace {
        step: Option<u64>,
        error: crate::chakra::TraceError,
    },
    /// ASTRA-Sim priced a chain's step below the COMP time its memo key leaves out.
    #[error(
        "ASTRA-Sim priced step {step} at {time} ns, less than its {compute} ns of COMP nodes \
         in a chain"
    )]
    BelowCompute { step: u64, time: u64, compute: u64 },
    /// A breakdown asked for a batch ASTRA-Sim has not priced.
    #[error("ASTRA-Sim has not priced this batch")]
    Unpriced,
    /// A pipelined step whose stages are not those ASTRA-Sim was started for.
    #[error("ASTRA-Sim was started for pipeline stages of {started:?} blocks, asked for {asked:?}")]
    Stages { started: Vec<u32>, asked: Vec<u32> },
    /// ASTRA-Sim did not report a pipeline stage's finish at step `step`.
    #[error("ASTRA-Sim, step {step}: {error}")]
    StageFinish { step: u64, error: NoStageFinish },
}

/// ASTRA-Sim did not report the finish of pipeline stage `stage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("ASTRA-Sim did not report the finish of stage {stage}")]
pub struct NoStageFinish {
    /// The stage, from 0.
    pub stage: usize,
}

/// A network of the wrong shape for the instance or DP group that runs on it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ShapeError {
    /// A prefill instance's network is not its TP NPUs beside their KV receivers.
    #[error(
        "a prefill instance's ASTRA-Sim network must be [{tp}, 2] NPUs (its TP NPUs and their \
         KV receivers), got {dims:?}"
    )]
    PrefillNetwork { tp: u32, dims: Vec<u32> },
    /// A DP group of pipelined prefill instances.
    #[error("a DP group of pipelined prefill instances is not supported")]
    PipelinedPrefillGroup,
    /// A DP group's network of another size than the group.
    #[error(
        "the network has {network} NPUs but the DP group runs on {npus} ({members} members of \
         TP {tp} × PP {pp}{})",
        if *prefill { ", and their KV receivers" } else { "" }
    )]
    GroupNetwork {
        network: u64,
        npus: u32,
        members: u32,
        tp: u32,
        pp: u32,
        prefill: bool,
    },
}

/// A batch file that could not be written.
#[derive(Debug, thiserror::Error)]
#[error("writing {}: {source}", path.display())]
pub struct WriteError {
    /// The file.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Spawn(e) => write!(f, "cannot start it: {e}"),
            Fault::Exited(ended) => write!(f, "the process ended unexpectedly ({ended})"),
            Fault::Stalled(t) => write!(
                f,
                "no `Waiting` completing the batch within {:.3} s (--astra-timeout)",
                t.as_secs_f64()
            ),
            Fault::Runaway { bytes, limit } => write!(
                f,
                "runaway output: {bytes} bytes while one batch ran (limit {limit})"
            ),
            Fault::Unparseable(e) => write!(f, "unparseable output: {e}"),
            Fault::Protocol(e) => write!(f, "protocol error: {e}"),
            Fault::Io(e) => write!(f, "{e}"),
            Fault::Refused(r) => write!(f, "refused before starting it: {r}"),
            Fault::Shape(e) => write!(f, "{e}"),
            Fault::Write(e) => write!(f, "{e}"),
            Fault::NoStageFinish(e) => write!(f, "protocol error: {e}"),
        }
    }
}

/// Where in the run a fault happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Starting the process and reading its first prompt.
    StartUp,
    /// Pricing a scheduler step; `batch` counts the batches sent to ASTRA-Sim (memo hits
    /// are not sent).
    Step {
        /// The engine's step index, from 0.
        step: u64,
        /// The batch's index among those sent to ASTRA-Sim, from 0.
        batch: u64,
    },
    /// Ending the process after the run.
    ShutDown,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stage::StartUp => f.write_str("at start-up"),
            Stage::Step { step, batch } => write!(f, "at step {step} (ASTRA-Sim batch {batch})"),
            Stage::ShutDown => f.write_str("at shutdown"),
        }
    }
}

/// A failure of the ASTRA-Sim backend. By the time it is returned the process has been
/// killed and reaped.
#[derive(Debug, thiserror::Error)]
pub struct AstraError {
    /// The binary.
    pub binary: PathBuf,
    /// Where in the run.
    pub stage: Stage,
    /// What went wrong.
    pub fault: Fault,
    /// The last lines ASTRA-Sim printed (stderr lines marked), oldest first.
    pub last_lines: Vec<String>,
}

impl fmt::Display for AstraError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ASTRA-Sim `{}` {}: {}",
            self.binary.display(),
            self.stage,
            Escaped(&self.fault.to_string())
        )?;
        if matches!(self.fault, Fault::Spawn(_) | Fault::Refused(_)) {
            return Ok(());
        }
        f.write_str("; the process was stopped")?;
        if self.last_lines.is_empty() {
            f.write_str("; it printed nothing")
        } else {
            write!(f, "; its last {} lines:", self.last_lines.len())?;
            for line in &self.last_lines {
                write!(f, "\n    | {}", Escaped(line))?;
            }
            Ok(())
        }
    }
}

/// Text quoted from the process, its control characters (escape sequences, carriage returns,
/// NULs) written escaped (`\u{1b}`, `\r`, `\0`) so that they cannot act on a terminal.
struct Escaped<'a>(&'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_debug())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}
