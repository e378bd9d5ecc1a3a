//! How vLLM (V1, 0.19) executes a step: CUDA-graph mode, capture sizes and padding.
//!
//! vLLM picks an execution mode per step from its compilation config:
//! - `--enforce-eager`: no compilation, no graphs: every op is launched eagerly from Python.
//! - `cudagraph_mode` (default `FULL_AND_PIECEWISE`): a *uniform decode* batch (every request
//!   computes one token) of at most `max_num_seqs` tokens replays one FULL graph; any other
//!   batch of at most the largest capture size replays PIECEWISE graphs (one per piece
//!   between attention calls, attention itself eager); a larger batch runs the compiled model
//!   without graphs (each kernel launched from the host).
//! - A graph-replayed batch is padded up to the next capture size: the dummy tokens are
//!   computed by every token-wise layer.
//!
//! Capture sizes (vLLM's default): `1, 2, 4`, then multiples of 8 below 256, then multiples of
//! 16 up to `max_cudagraph_capture_size`, whose default is `min(2 × max_num_seqs, 512)`; every
//! size is clamped to `max_num_batched_tokens`. The RTX 4090 bench run's `meta.json` records
//! exactly this list for `max_num_seqs` 256 (1 … 512).
//!
//! The mode's default, the capture sizes and what `--enforce-eager` implies are the same from
//! vLLM 0.11.1 to 0.19.0 (`VllmConfig.__post_init__` and `_set_cudagraph_sizes` in
//! `vllm/config/vllm.py`), so none of them follows `--vllm-version`.

use crate::choice::UnknownName;
use crate::config::{Bound, Problem};
use std::fmt;
use std::str::FromStr;

/// vLLM's `compilation_config.cudagraph_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CudaGraphMode {
    /// No graphs: the compiled model runs with every kernel launched from the host.
    None,
    /// Piecewise graphs for every batch up to the largest capture size.
    Piecewise,
    /// One full graph for every batch up to the largest capture size.
    Full,
    /// Full graphs for uniform decode batches only; everything else runs without graphs.
    FullDecodeOnly,
    /// Full graphs for uniform decode batches, piecewise graphs for the rest (vLLM's default).
    #[default]
    FullAndPiecewise,
}

impl CudaGraphMode {
    /// vLLM's spelling.
    pub fn name(self) -> &'static str {
        match self {
            CudaGraphMode::None => "NONE",
            CudaGraphMode::Piecewise => "PIECEWISE",
            CudaGraphMode::Full => "FULL",
            CudaGraphMode::FullDecodeOnly => "FULL_DECODE_ONLY",
            CudaGraphMode::FullAndPiecewise => "FULL_AND_PIECEWISE",
        }
    }
}

impl fmt::Display for CudaGraphMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CudaGraphMode {
    type Err = UnknownName;

    fn from_str(s: &str) -> Result<Self, UnknownName> {
        const ALL: [CudaGraphMode; 5] = [
            CudaGraphMode::None,
            CudaGraphMode::Piecewise,
            CudaGraphMode::Full,
            CudaGraphMode::FullDecodeOnly,
            CudaGraphMode::FullAndPiecewise,
        ];
        ALL.into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownName {
                what: "cudagraph mode",
                name: s.to_owned(),
                expected: ALL.map(CudaGraphMode::name).to_vec(),
                hint: None,
            })
    }
}

/// How one step is executed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepMode {
    /// `--enforce-eager`: every op launched eagerly from Python.
    Eager,
    /// Compiled model, no graph: every kernel launched from the host.
    Compiled,
    /// Piecewise graphs: one graph launch per piece, attention eager between them.
    Piecewise,
    /// One full graph for the whole forward pass.
    Full,
}

impl StepMode {
    /// Whether the step's model runs from captured CUDA graphs (piecewise or full).
    pub fn replays_graph(self) -> bool {
        matches!(self, StepMode::Piecewise | StepMode::Full)
    }

    /// Lower-case name for logs.
    pub fn name(self) -> &'static str {
        match self {
            StepMode::Eager => "eager",
            StepMode::Compiled => "compiled",
            StepMode::Piecewise => "piecewise",
            StepMode::Full => "full",
        }
    }
}

/// The compilation settings of an instance, as given (vLLM's names).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GraphOptions {
    /// `--enforce-eager`.
    pub enforce_eager: bool,
    /// `cudagraph_mode`.
    pub mode: CudaGraphMode,
    /// `cudagraph_capture_sizes`, if given.
    pub capture_sizes: Option<Vec<u32>>,
    /// `max_cudagraph_capture_size`, if given.
    pub max_capture_size: Option<u32>,
}

/// The resolved execution rules of an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphPolicy {
    enforce_eager: bool,
    mode: CudaGraphMode,
    /// Capture sizes, ascending, without duplicates (empty: no graphs).
    sizes: Vec<u32>,
    /// Largest uniform decode batch a FULL graph replays (`max_num_seqs`).
    max_decode: u32,
}

impl GraphPolicy {
    /// Resolves `options` for an instance with these scheduler limits (0 = unlimited),
    /// following vLLM's defaults. Its one refusal: a capture size of 0.
    pub fn resolve(
        options: &GraphOptions,
        max_num_seqs: u32,
        max_num_batched_tokens: u32,
    ) -> Result<GraphPolicy, Problem> {
        let budget = if max_num_batched_tokens == 0 {
            u32::MAX
        } else {
            max_num_batched_tokens
        };
        let seqs = if max_num_seqs == 0 { 256 } else { max_num_seqs };
        let mut sizes = match &options.capture_sizes {
            Some(given) => {
                if given.contains(&0) {
                    return Err(Problem::out_of_range(0, Bound::AtLeast(1)));
                }
                let mut s = given.clone();
                s.sort_unstable();
                s.dedup();
                if let Some(max) = options.max_capture_size {
                    s.retain(|&x| x <= max);
                }
                s
            }
            None => {
                let max = options
                    .max_capture_size
                    .unwrap_or_else(|| seqs.saturating_mul(2).min(512));
                default_sizes(max)
            }
        };
        sizes.retain(|&s| s <= budget);
        Ok(GraphPolicy {
            enforce_eager: options.enforce_eager,
            mode: options.mode,
            sizes,
            max_decode: seqs,
        })
    }

    /// Whether every op is launched eagerly (`--enforce-eager`).
    pub fn enforce_eager(&self) -> bool {
        self.enforce_eager
    }

    /// The capture sizes, ascending.
    pub fn capture_sizes(&self) -> &[u32] {
        &self.sizes
    }

    /// The execution mode of a step of `tokens` tokens (`uniform_decode`: every request
    /// computes exactly one token) and the token count it runs at (padded to the capture size
    /// for graph modes).
    pub fn mode_of(&self, tokens: u32, uniform_decode: bool) -> (StepMode, u32) {
        if self.enforce_eager {
            return (StepMode::Eager, tokens);
        }
        // The first size that holds the tokens (the sizes ascend).
        let padded = (self.sizes.get(self.sizes.partition_point(|&s| s < tokens))).copied();
        let full_decode = uniform_decode && tokens <= self.max_decode;
        let chosen = match self.mode {
            CudaGraphMode::None => None,
            CudaGraphMode::Piecewise => Some(StepMode::Piecewise),
            CudaGraphMode::Full => Some(StepMode::Full),
            CudaGraphMode::FullDecodeOnly => full_decode.then_some(StepMode::Full),
            CudaGraphMode::FullAndPiecewise if full_decode => Some(StepMode::Full),
            CudaGraphMode::FullAndPiecewise => Some(StepMode::Piecewise),
        };
        match (chosen, padded) {
            (Some(mode), Some(size)) => (mode, size),
            _ => (StepMode::Compiled, tokens),
        }
    }
}

/// vLLM's default capture sizes up to `max`: 1, 2, 4, multiples of 8 below 256, multiples of
/// 16 from 256.
fn default_sizes(max: u32) -> Vec<u32> {
    let small = [1, 2, 4].into_iter();
    let by8 = (8..256).step_by(8);
    let by16 = (256..=max.max(256)).step_by(16);
    small.chain(by8).chain(by16).filter(|&s| s <= max).collect()
}
