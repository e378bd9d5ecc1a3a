//! The pipeline of an instance with `pp_size > 1`: how its transformer blocks are split over
//! stages, and what a stage sends to the next (the engine runs it, `engine::pipeline`).

use super::Link;

/// The pipeline of one instance.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline {
    /// Transformer blocks of each stage, in order (see [`stage_blocks`]); its length is `pp`.
    pub stage_blocks: Vec<u32>,
    /// Bytes per token of the activation a stage sends to the next (`hidden × dtype bytes`).
    pub activation_bytes_per_token: u64,
    /// The link between consecutive stages.
    pub link: Link,
}

/// Splits `num_layers` blocks over `pp` stages as vLLM's `get_pp_indices` (and LLMServingSim's
/// `_pp_stage_boundaries`) does: evenly, the remainder one block each to stages −2, −3, … (the
/// last stage, which also runs the head, never gets an extra block). 32 blocks over 3
/// stages: `[11, 11, 10]`. `pp` must be in `1..=num_layers`.
pub fn stage_blocks(num_layers: u32, pp: u32) -> Vec<u32> {
    assert!(
        pp >= 1 && pp <= num_layers,
        "pp {pp} must be in 1..={num_layers}"
    );
    let pp = pp as usize;
    let mut blocks = vec![num_layers / pp as u32; pp];
    let remainder = (num_layers % pp as u32) as usize;
    for i in 2..remainder + 2 {
        blocks[pp - i] += 1;
    }
    blocks
}
