//! Failures of the ASTRA-Sim backend: what went wrong, at which batch, and what ASTRA-Sim
//! printed last.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// What went wrong.
#[derive(Debug)]
pub enum Fault {
    /// The binary could not be started.
    Spawn(std::io::Error),
    /// The process ended (or closed its output) when the protocol expected more; the text
    /// describes its exit status.
    Exited(String),
    /// Nothing that completes the batch arrived in time.
    Stalled(Duration),
    /// The process printed more than the per-batch limit.
    Runaway {
        /// Bytes read when the limit was crossed.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// A line the protocol needs could not be parsed.
    Unparseable(String),
    /// The process answered out of protocol (wrong NPU, iteration or time).
    Protocol(String),
    /// Writing the inputs or talking to the process failed.
    Io(String),
    /// The run is one the binary would refuse or crash on; nothing was started.
    Refused(String),
    /// The network is not the shape of what runs on it; nothing was started.
    Shape(ShapeError),
    /// A batch's `.et` file could not be written.
    Write(WriteError),
    /// ASTRA-Sim did not report the finish of a pipeline stage.
    NoStageFinish(NoStageFinish),
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
            Fault::Exited(status) => write!(f, "the process ended unexpectedly ({status})"),
            Fault::Stalled(t) => write!(
                f,
                "no `Waiting` completing the batch within {:.3} s (--astra-timeout)",
                t.as_secs_f64()
            ),
            Fault::Runaway { bytes, limit } => write!(
                f,
                "runaway output: {bytes} bytes while one batch ran (limit {limit})"
            ),
            Fault::Unparseable(m) => write!(f, "unparseable output: {m}"),
            Fault::Protocol(m) => write!(f, "protocol error: {m}"),
            Fault::Io(m) => f.write_str(m),
            Fault::Refused(m) => write!(f, "refused before starting it: {m}"),
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
