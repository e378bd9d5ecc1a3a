//! The grid vLLM's fused-MoE kernel launches, and the thread blocks in it that do no MMA work.
//!
//! `moe_align_block_size` sorts the routed rows by expert and pads each expert's rows to whole
//! tiles of `BLOCK_SIZE_M`. It sizes its output for the worst case over every expert of the
//! model, `numel + E × (BLOCK_SIZE_M − 1)` rows (`numel` the routed rows of all EP ranks,
//! `E` the model's experts), which vLLM 0.19 caps at `numel × BLOCK_SIZE_M` when there are
//! fewer routed rows than experts, and `invoke_fused_moe_kernel` launches a grid of
//! `cdiv(EM, BLOCK_SIZE_M) × cdiv(N, BLOCK_SIZE_N)` blocks, with `EM` that size, capped at
//! `a_rows × top_k × BLOCK_SIZE_M` when its input has fewer rows than a tile (vLLM 0.19,
//! `fused_moe.py` and `moe_align_block_size.py`, commit 2a69949bd). Blocks past the padded
//! rows of the experts hit return at once; under EP, those of other ranks' experts write
//! zeros. Either way each one costs the SM some clocks. vLLM 0.10.2, which Frontier's kernel
//! tables ran, lacks the cap below as many routed rows as experts: with 512 experts of top-10
//! its grids hold ~480 tile rows whatever the batch (H800's Qwen3-Next table: a ~20 µs step
//! between one token and two, where the down GEMM's grid grows from 10 tile rows to 482).

/// One fused-MoE launch on one GPU: what sizes its two grouped GEMMs' grids.
#[derive(Debug, Clone, Copy)]
pub struct MoeLaunch {
    /// Tokens entering the kernel (a DP group's, gathered by the EP dispatch).
    pub tokens: f64,
    /// The model's experts (every EP rank's): `moe_align_block_size` pads for each.
    pub experts: f64,
    /// Experts each token is routed to.
    pub top_k: f64,
    /// Expected experts of this GPU hit.
    pub active: f64,
    /// Routed rows of this GPU's experts.
    pub routed: f64,
    /// Output columns of the gate-and-up GEMM (twice the expert width per GPU).
    pub up_columns: f64,
    /// Output columns of the down GEMM (the hidden size).
    pub down_columns: f64,
}

/// Tile rows of one grouped GEMM's grid whose input has `a_rows` rows, each routed `top_k`
/// times, on tiles of `block_m` rows (see the module docs).
pub fn grid_rows(launch: &MoeLaunch, block_m: f64, a_rows: f64, top_k: f64) -> f64 {
    let numel = launch.tokens * launch.top_k;
    let mut padded = numel + launch.experts * (block_m - 1.0);
    if numel < launch.experts {
        padded = padded.min(numel * block_m);
    }
    if a_rows < block_m {
        padded = padded.min(a_rows * top_k * block_m);
    }
    (padded / block_m).ceil()
}

/// Tile rows that do MMA work: each expert of this GPU hit computes its routed rows in whole
/// tiles of `block_m` rows.
pub fn working_rows(launch: &MoeLaunch, block_m: f64) -> f64 {
    if launch.active <= 0.0 {
        return 0.0;
    }
    launch.active * (launch.routed / launch.active / block_m).ceil()
}

/// Thread blocks of the launch's two grouped GEMMs that do no MMA work, on tiles of
/// `block_m` × `block_n`: the grid's tile rows beyond the working ones, times each GEMM's
/// tile columns. The gate-and-up GEMM reads the tokens, each routed `top_k` times; the down
/// GEMM reads the routed rows, once each.
pub fn idle_blocks(launch: &MoeLaunch, (block_m, block_n): (f64, f64)) -> f64 {
    let working = working_rows(launch, block_m);
    let numel = launch.tokens * launch.top_k;
    let up = grid_rows(launch, block_m, launch.tokens, launch.top_k);
    let down = grid_rows(launch, block_m, numel, 1.0);
    (up - working).max(0.0) * (launch.up_columns / block_n).ceil()
        + (down - working).max(0.0) * (launch.down_columns / block_n).ceil()
}
