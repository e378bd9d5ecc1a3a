//! The resolved settings of an ASTRA-Sim run (no CLI types).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::{MemoryParams, NetworkConfig};
use crate::chakra::Dialect;

/// How ASTRA-Sim is driven.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    strum::EnumIter,
    strum::EnumMessage,
    strum::IntoStaticStr,
)]
#[strum(serialize_all = "lowercase")]
pub enum AstraMode {
    /// The LLMServingSim fork, started once and fed one batch per `Waiting` prompt over
    /// stdin/stdout; reads the fork's Chakra dialect (durations in ns).
    #[default]
    Fork,
    /// Stock ASTRA-Sim 2.0: one process per distinct batch, run to its end; reads the
    /// upstream Chakra dialect (durations in µs).
    Stock,
}

impl crate::choice::Choice for AstraMode {
    const WHAT: &'static str = "ASTRA-Sim mode";
    fn name(&self) -> &'static str {
        AstraMode::name(*self)
    }
}

impl AstraMode {
    /// The Chakra dialect the binary of this mode reads.
    pub fn dialect(self) -> Dialect {
        match self {
            AstraMode::Fork => Dialect::LlmServingSim,
            AstraMode::Stock => Dialect::Upstream,
        }
    }

    /// The flag value: `fork` or `stock`.
    pub fn name(self) -> &'static str {
        match self {
            AstraMode::Fork => "fork",
            AstraMode::Stock => "stock",
        }
    }
}

impl fmt::Display for AstraMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Bounds on what ASTRA-Sim may print, so that a runaway process cannot exhaust memory or
/// hang the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    /// Bytes of output (stdout and stderr) accepted while one batch runs; more kills the
    /// process.
    pub max_bytes_per_step: u64,
    /// Last lines kept to quote in errors.
    pub tail_lines: usize,
}

impl Default for OutputLimits {
    /// 64 MiB per batch (a Llama decode step prints about 20 KB), the last 20 lines.
    fn default() -> OutputLimits {
        OutputLimits {
            max_bytes_per_step: 64 << 20,
            tail_lines: 20,
        }
    }
}

/// Everything the ASTRA-Sim backend needs, resolved and validated.
#[derive(Debug, Clone, PartialEq)]
pub struct AstraOptions {
    /// The ASTRA-Sim binary (a path, or a name looked up in `PATH`).
    pub binary: PathBuf,
    /// Interactive fork or stock ASTRA-Sim.
    pub mode: AstraMode,
    /// Longest wait for one batch (fork: for the `Waiting` prompts that complete it; stock:
    /// for the process to finish).
    pub timeout: Duration,
    /// Reuse the step time of a batch whose trace was already priced.
    pub memo: bool,
    /// Keep the run directory (configs and traces) after the run.
    pub keep_inputs: bool,
    /// Send a colocated instance's batches as detailed traces (one COMP node per layer) rather
    /// than lean ones ([`crate::chakra::lean_nodes`]).
    pub detailed_traces: bool,
    /// The network (`network.yml`).
    pub network: NetworkConfig,
    /// Memory numbers of `system.json` and the memory file.
    pub memory: MemoryParams,
    /// Output bounds.
    pub limits: OutputLimits,
    /// Where the run directory is created; `None`: the system temporary directory.
    pub temp_parent: Option<PathBuf>,
}
