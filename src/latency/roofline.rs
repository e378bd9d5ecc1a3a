//! The analytical roofline backend.
//!
//! A step runs the model's layer sequence once: a prologue (`embedding`), `num_layers`
//! transformer blocks, and a head (`final_layernorm`, `lm_head`, `sampler`). Every kernel is
//! priced per GPU (its work divided by `tp`) as
//! `max(FLOPs / (peak × compute_eff), bytes / (bandwidth × memory_eff)) + kernel_launch_ns`;
//! GEMMs ([`gemm_fixed_ns`]), attention and the fused-MoE kernel have their own constants,
//! derived from kernel tables of eight GPUs and checked on each GPU held out. A hardware
//! file's `[kernels]` table gives a part its own values of the GEMM (fixed time and both
//! efficiencies), decode-attention and fused-MoE constants (measured, or fitted by `blis-cosim calibrate`).
//! A TPU (`accelerator = "tpu"`) runs the same layers as one compiled XLA program over padded
//! token and request counts, priced by the [`tpu`] module with constants of its own.
//!
//! Rounding: each layer occurrence is rounded to the nearest nanosecond, with a floor of
//! 1 ns, before it is multiplied by its repeat count. [`Roofline::step_time`] and
//! [`Roofline::breakdown`] share that rounding, so the breakdown sums exactly to the step time.

use super::{
    BatchDesc, Collectives, DecodeLead, LatencyBackend, LatencyError, LayerTiming, MoeShape,
    StepParts,
};
use crate::Nanos;
use crate::config::{Dtype, Hardware, KernelSpec, MemoryType, ModelArch};
use decode::DecodeKernels;
use fp8::{Fp8Gemms, Precision, TensorQuant, linear, moe_flops_per_ns, moe_quantizations};
use mixed::{MixedDecodes, MixedKernels};
use moe_grid::MoeLaunch;
use moe_tuned::TunedTile;
use rows::{Loads, RowKernels};
use sums::{BatchSums, DecodeRates, DecodeTerms, PrefillRoom};
use tpu::{Tpu, TpuOp};

pub mod decode;
pub mod decode_attention;
pub mod fp8;
pub mod memoised;
pub mod mixed;
pub mod moe_grid;
pub mod moe_tuned;
pub mod rows;
pub mod sums;
pub mod tpu;

pub use memoised::MemoisedRoofline;

// Every constant below is derived by `scripts/derive_roofline.py` from kernel tables of eight
// GPUs (LLMServingSim's bundles: RTX 4090, RTX PRO 6000; Frontier's operator profiles: A100,
// A40, A800, H100, H800, RTX PRO 6000; our H200 measurement): each is the median over the GPUs
// of what that GPU's own tables say, and the script checks each leave-one-GPU-out (the table
// in docs/src/accuracy.md). No validation run is read. `tests/accuracy/derive_roofline.rs`
// checks that the values here are those the script prints.

/// Fixed GPU time of an attention launch that prefills beside its decodes, and of a pure-decode
/// launch on a part without `sm_count` or `sm_clock_mhz`, ns: the intercept of `t = t0 + KV
/// bytes / rate` fitted, weighted by relative error, to each GPU's decode rows (RTX 4090 12.7,
/// RTX PRO 6000 11.3, H200 11.0 µs; the median).
const ATTENTION_FIXED_NS: f64 = 11_300.0;
/// Fraction of peak memory bandwidth at which decode attention streams the KV cache, fitted per
/// GPU with the decode kernels' clocks and waves (`decode`; RTX 4090 0.940, RTX PRO 6000 0.916,
/// H200 0.906; the median).
const DECODE_ATTENTION_EFFICIENCY: f64 = 0.916;
/// Fixed GPU time of a prefill-only attention kernel, ns: the intercept of `t = t0 + the
/// waves' MMA work priced` ([`prefill_waves`], [`prefill_attention_efficiency`]) fitted,
/// weighted by relative error, to each GPU's prefill rows (chunks of 16-12,416 tokens over
/// prefixes of 0-16,384): H800 11.4 µs (Frontier, FlashInfer, kernel-only, six models at TP
/// 1-8), H200 7.2 (ours, cuDNN), RTX 4090 7.1, RTX PRO 6000 6.1 (LLMServingSim; Frontier); the
/// median.
const PREFILL_ATTENTION_FIXED_NS: f64 = 7_100.0;
/// Share of peak FLOP/s the thread blocks of Hopper's prefill kernels reach (FlashAttention-3,
/// FlashInfer's sm90 path, cuDNN: warp-specialised, the softmax overlapped with the MMA), and
/// of a part without `sm_count` or `sm_clock_mhz`: the rate of the fit above on the Hopper
/// parts, H800 0.606, H200 0.607; the median. Priced by the waves instead of the causal FLOPs,
/// the shares transfer between GPUs (`scripts/derive_roofline.py --loo`).
const PREFILL_ATTENTION_EFFICIENCY: f64 = 0.607;
/// SM clocks a FlashAttention-2 prefill tile spends per query-key score besides its MMA work
/// (softmax, rescale, loads), fitted with the MMA at the tensor peak to each FA2 GPU's prefill
/// rows: RTX 4090 0.395, RTX PRO 6000 0.385 (their tensor peaks per SM differ twofold, their
/// FP32 lanes and SFUs do not); the median. vLLM runs FA2 on every part but Hopper; its paged
/// split-KV kernel has 4 warps, so with one block per SM each SM sub-partition has one warp
/// and its tensor pipe waits while that warp does this work ([`prefill_attention_efficiency`]).
const PREFILL_SCORE_CLOCKS: f64 = 0.390;

/// SM clocks a working block of FlashAttention-2's paged varlen kernel (a mixed batch's
/// launch) takes besides its KV tiles: loading its query tile, the first K and V tile's
/// latency, writing its output. `scripts/derive_roofline.py` reads it from each mixed table's
/// waves of 64 and 128 decodes at 16 KV tokens beside a 16-token chunk (every block one KV tile),
/// per wave less one tile at the part's own clocks per score: RTX 4090 2,845, RTX PRO 6000 3,381
/// (Llama-3.1-8B and Qwen3-30B-A3B); the median. It prices every block of the launch alike,
/// prefill or decode ([`mixed`]).
pub(crate) const MIXED_BLOCK_CLOCKS: f64 = 3110.0;
/// Query rows of one thread block of a prefill attention kernel: Hopper's kernels
/// (FlashAttention-3, FlashInfer's sm90 path, cuDNN) run two warpgroups of 64 rows on a
/// 128-row tile; FlashAttention-2's `mma.sync` kernels, which the other generations run, a
/// 64-row tile for causal attention at head dim 128 (`run_mha_fwd_hdim128`). From the kernels'
/// sources, not fitted: each generation's tables fit their own size best (H800 4.0% against
/// 18.2% with 64 rows; RTX PRO 6000 3.2% against 12.0% with 128).
const PREFILL_TILE_ROWS_HOPPER: u64 = 128;
const PREFILL_TILE_ROWS: u64 = 64;
/// KV rows per step of a prefill tile, as its waves are counted: 64 (Hopper's kernels at head
/// dim 128; vLLM's paged launch of FlashAttention-2 runs the split-KV kernel, whose KV tile is
/// 128 tokens there: counting 128 was tried, accuracy guide "FlashAttention-2's tiles by their
/// clocks").
const PREFILL_KV_TILE: u64 = 64;
/// Prefills of a step kept on the stack while their waves are counted; a step with more (many
/// short prompts at once) reads them from the batch for each KV tile instead. Few, so that
/// the sums a step is priced from are cheap to clear and to move (with 32 their clearing and
/// copying took about 4 % of the BLIS comparison's run, where a step has one or two).
pub const PREFILLS_ON_STACK: usize = 8;

/// Share of `peak_flops` (FLOP/s) a prefill attention tile's MMA work of `head_dim` takes on
/// `hardware`. On Hopper (FlashAttention-3) and on a part without `sm_count` or
/// `sm_clock_mhz`, [`PREFILL_ATTENTION_EFFICIENCY`]. Elsewhere (FlashAttention-2's split-KV
/// kernel) a score costs an SM its MMA at the tensor peak (`4 × head_dim` FLOPs) and
/// [`PREFILL_SCORE_CLOCKS`]; the `b` blocks an SM holds at once
/// ([`decode::blocks_per_sm`]) hide each other's non-MMA work, so an SM spends
/// `max(MMA, (MMA + score clocks) / b)` clocks per score: the two in turn where `b` is one
/// (80 KiB blocks on the 100 KiB parts, compute capability 8.6, 8.9, 12.0), overlapped up to
/// the tensor peak where it is more (8.0's 164 KiB holds two: A100 at head dim 128, 0.78 of
/// peak, where the FlashAttention-2 paper's A100 forward pass reaches up to 0.73).
pub fn prefill_attention_efficiency(hardware: &Hardware, peak_flops: f64, head_dim: u64) -> f64 {
    match hardware.sm_clocks_per_ns() {
        Some(sm_clocks_per_ns) if !hardware.is_hopper() && peak_flops > 0.0 && head_dim > 0 => {
            let mma = 4.0 * head_dim as f64 * sm_clocks_per_ns * 1e9 / peak_flops;
            let blocks = decode::blocks_per_sm(hardware, head_dim) as f64;
            mma / mma.max((mma + PREFILL_SCORE_CLOCKS) / blocks)
        }
        _ => PREFILL_ATTENTION_EFFICIENCY,
    }
}

/// A step's prefills as the attention launch's grids see them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct PrefillGrid {
    /// [`prefill_waves`] of the prefills.
    waves: u64,
    /// The longest chunk, tokens.
    longest_chunk: u64,
    /// SM clocks the step's decodes' working blocks add to the varlen launch beside them
    /// ([`MixedKernels::working_clocks`]; 0 without decodes or on a part without
    /// [`MixedKernels`]).
    mixed_working_clocks: f64,
}

impl PrefillGrid {
    /// The grid of `prefills` (`(chunk, prefix)`), `heads` query heads each, whose waves
    /// [`prefill_waves`] counts in tiles of `tile_rows` on `sms`.
    #[inline(always)]
    fn of<I>(prefills: I, heads: u64, tile_rows: u64, sms: Option<u64>) -> Self
    where
        I: Iterator<Item = (u64, u64)> + Clone,
    {
        PrefillGrid {
            waves: prefill_waves(prefills.clone(), heads, tile_rows, sms),
            longest_chunk: prefills.map(|p| p.0).max().unwrap_or(0),
            mixed_working_clocks: 0.0,
        }
    }
}

/// Waves of KV tiles a causal varlen prefill's thread blocks take, summed: each of the
/// `heads` query heads of each sequence (`(chunk, prefix)` of `prefills`) splits its chunk into
/// query tiles of `tile_rows`, and a tile computes all its rows against every KV tile up to
/// its last row (causal: the diagonal's tile is computed whole; a short chunk over a long
/// prefix pays whole tiles of mostly empty rows). Tiles run longest first, `sms` at a time,
/// and each wave lasts as long as its longest tile, so the time is the sum over waves of their
/// first tile's KV tiles: with `n(m)` the tiles that reach KV tile `m`, `sum_m ceil(n(m) /
/// sms)`. Without `sms`, no waves: the padded tiles' total KV tiles.
///
/// `n(m)` changes only where some sequence's tiles stop reaching (a query tile's worth of KV
/// rows past its prefix, or its chunk's end), so the KV tiles are taken in runs of equal
/// `n(m)` ([`tiles_reaching`]): a chunk after a long prefix beside a new prompt's chunk is a
/// few runs, not a pass over every KV tile of the prefix.
pub fn prefill_waves<I>(prefills: I, heads: u64, tile_rows: u64, sms: Option<u64>) -> u64
where
    I: Iterator<Item = (u64, u64)> + Clone,
{
    let kv = PREFILL_KV_TILE;
    let (mut lowest, mut top, mut tiles) = (u64::MAX, 0, 0);
    for (chunk, prefix) in prefills.clone() {
        lowest = lowest.min(prefix);
        top = top.max((prefix + chunk).div_ceil(kv));
        tiles += heads * chunk.div_ceil(tile_rows);
    }
    let per_wave = |n: u64| sms.map_or(n, |s| n.div_ceil(s));
    // Every tile reaches the KV tiles up to the shortest prefix.
    let full = (lowest / kv + 1).min(top);
    let mut waves = full * per_wave(tiles);
    let mut m = full + 1;
    while m <= top {
        let (n, next) = tiles_reaching(prefills.clone(), (m - 1) * kv, tile_rows);
        // The first KV tile whose rows start at `next` or later.
        let end = (next.div_ceil(kv) + 1).min(top + 1);
        waves += (end - m) * per_wave(heads * n);
        m = end;
    }
    waves
}

/// For [`prefill_waves`]: the query tiles of one head over `prefills` that reach the KV tile
/// whose rows start at `reach` (past every prefill's shortest prefix), and the least row at
/// which that count changes (`u64::MAX`: never again).
fn tiles_reaching<I>(prefills: I, reach: u64, tile_rows: u64) -> (u64, u64)
where
    I: Iterator<Item = (u64, u64)>,
{
    // Tiles are 64 or 128 rows: a shift, not a division, on the runs' chain of dependencies.
    let shift = tile_rows
        .is_power_of_two()
        .then(|| tile_rows.trailing_zeros());
    let tiles_in = |rows: u64| shift.map_or_else(|| rows / tile_rows, |s| rows >> s);
    let (mut n, mut next) = (0, u64::MAX);
    for (chunk, prefix) in prefills {
        let end = prefix + chunk;
        if end <= reach {
            continue;
        }
        // Query tiles whose last row lies before `reach` (none while within the prefix).
        let short = tiles_in(reach.saturating_sub(prefix));
        n += chunk.div_ceil(tile_rows) - short;
        next = next.min(end.min(prefix + (short + 1) * tile_rows));
    }
    (n, next)
}

/// On Hopper (FlashAttention-3) and on a part without `sm_count` or `sm_clock_mhz` (else
/// [`mixed`] prices them by FlashAttention-2's varlen grid): rate at which a *mixed* batch's
/// attention reads the KV cache of its decodes, as a fraction of peak bandwidth with the KV
/// bytes counted once per *query* head, by the decodes' thread blocks (rows: decodes × query
/// heads per GPU, 128, 256, … 4,096; fewer: the first row times blocks / 128; more: the last)
/// and their mean context (columns: 16, 32, … 16,384 KV
/// tokens, clamped), interpolated on log2 of both. In a batch with a prefill the varlen kernel
/// gives every decode one block per query head (only a pure-decode batch packs a GQA group
/// into one block per KV head), and each block reads its KV head's cache: the work grows with
/// the query heads; the re-reads of a GQA group partly hit L2 (hence values above 1) until
/// the decodes' KV outgrows it (the drop at 4,096 blocks beyond 1,024 tokens); short contexts
/// pay a fixed time per block. Measured as (mixed time − the same prefill alone), median over
/// each cell's prefill shapes, against the decodes' KV bytes × query heads / KV heads in
/// LLMServingSim's attention tables (Llama-3.1-8B on RTX 4090 and RTX PRO 6000, GQA 4;
/// Qwen3-30B-A3B on RTX PRO 6000, GQA 8): the median of the three per cell
/// (`scripts/derive_roofline.py`). Counted per query head, the two models on RTX PRO 6000
/// agree within a few per cent cell by cell; per KV head (the 1-D table this replaced) they
/// differed by 2×.
pub const MIXED_DECODE_EFFICIENCY: [[f64; 11]; 6] = [
    [
        0.449, 0.858, 1.641, 1.326, 1.917, 2.089, 1.994, 1.928, 1.886, 1.903, 1.928,
    ],
    [
        0.237, 0.468, 0.914, 1.163, 1.455, 1.825, 1.904, 2.027, 2.010, 1.984, 1.997,
    ],
    [
        0.201, 0.397, 0.773, 1.049, 1.458, 1.864, 2.166, 2.371, 2.464, 2.453, 2.492,
    ],
    [
        0.203, 0.401, 0.780, 1.034, 1.500, 1.889, 2.142, 2.339, 2.406, 2.313, 2.328,
    ],
    [
        0.197, 0.390, 0.764, 0.996, 1.427, 1.855, 2.174, 2.418, 1.888, 1.853, 1.793,
    ],
    [
        0.193, 0.381, 0.738, 0.959, 1.340, 1.678, 1.990, 1.761, 1.253, 1.239, 0.999,
    ],
];

/// [`MIXED_DECODE_EFFICIENCY`] at `blocks` decode thread blocks whose decodes read `context`
/// KV tokens on average.
pub fn mixed_decode_efficiency(blocks: f64, context: f64) -> f64 {
    // Position on a log2 axis of `n` points from `first`: (index below, weight of the next).
    fn axis(v: f64, first: f64, n: usize) -> (usize, usize, f64) {
        let x = (v.max(first) / first).log2();
        let i = (x.floor() as usize).min(n - 1);
        let j = (i + 1).min(n - 1);
        (i, j, (x - i as f64).min(1.0))
    }
    const FIRST_BLOCKS: f64 = 128.0;
    const FIRST_CONTEXT: f64 = 16.0;
    let t = &MIXED_DECODE_EFFICIENCY;
    let (r0, r1, fr) = axis(blocks, FIRST_BLOCKS, t.len());
    let (c0, c1, fc) = axis(context, FIRST_CONTEXT, t[0].len());
    let row = |r: usize| t[r][c0] + fc * (t[r][c1] - t[r][c0]);
    let eff = row(r0) + fr * (row(r1) - row(r0));
    if blocks < FIRST_BLOCKS {
        eff * blocks.max(1.0) / FIRST_BLOCKS
    } else {
        eff
    }
}

/// Share of the gap between a decode batch's time at its mean context and at its longest
/// context that the batch pays (the longest requests' blocks finish last): LLMServingSim's
/// skew fit, `alpha_default` of the RTX PRO 6000 bundles at TP 1 (0.0543 Llama-3.1-8B, 0.0645
/// Qwen3-30B-A3B; their mean), fitted by its profiler to skewed batches measured against
/// uniform ones (`skew.csv`). The RTX 4090 bundle has no fit.
pub const DECODE_SKEW_ALPHA: f64 = 0.059;

/// The fused-MoE layer's grouped GEMMs: `MOE_FIXED_NS + max(c, m) + MOE_UNHIDDEN × min(c, m)`,
/// with `c` the MMA work at [`MOE_COMPUTE_EFFICIENCY`] of peak FLOP/s (the routed rows, on the
/// large tile rounded up to whole 64-row tiles per expert hit: `moe_mma_rows`) and `m` the
/// weights of the experts the batch hits plus the routed rows in and out at
/// [`MOE_MEMORY_EFFICIENCY`] of peak bandwidth, each GEMM's weights slowed where it has fewer
/// thread blocks than keep the bytes in flight [`MOE_LATENCY_CLOCKS`] needs, and on the large
/// tile to [`MOE_LARGE_TILE_BYTES_PER_CLOCK`] per SM per clock; plus the grids' idle thread
/// blocks at [`MOE_IDLE_BLOCK_CLOCKS`] each. Per GPU: the fixed time and
/// weight-streaming efficiency are fitted to rows with at most 4 routed rows per expert hit
/// (with the latency that fits best), the compute efficiency is the median over rows with
/// at least 256, the unhidden share is fitted over all rows. Tables of vLLM's fused Triton
/// kernel only: RTX PRO 6000 (LLMServingSim, Qwen3-30B-A3B: 2.4 µs, 0.876, 0.47, 0.16), H800
/// (Frontier, kernel-only, five models of 8-512 experts, top-2 to top-10, rows whose experts do
/// not all fit in L2: 6.0 µs, 0.847) and A800 (Frontier, Qwen3-30B-A3B and Qwen3-Next,
/// event-timed, GPU-bound rows: 0.922, 0.37, 0.32), each with its idle blocks' time
/// ([`MOE_IDLE_BLOCK_CLOCKS`]) taken off (before it: H800 7.0 µs and 0.817; the median fixed
/// time 4.9 µs, the efficiency 0.873, the unhidden share 0.25). The fixed time comes from the kernel-timed
/// tables only. How the tables are read (`scripts/roofline_tables.py`): an event-timed row
/// less the host's lead before the first kernel (0.44 of the file's one-token time, from H800's
/// rows timed both ways: 88 µs on A800's host), with the routed rows the profiler counted (its
/// older A800 runs with EP > 1 routed every top-k to the local experts); Vidur's per-expert
/// cuBLAS loop on A100 (Mixtral-8x7B) is not this kernel and is checked as GEMMs instead. Read
/// so, held out, A800's fused MoE goes from 22.9% to 15.0% and all rows from 24.6% to 15.8%
/// (`scripts/derive_roofline.py --loo`).
const MOE_FIXED_NS: f64 = 4_200.0;
const MOE_MEMORY_EFFICIENCY: f64 = 0.876;
const MOE_COMPUTE_EFFICIENCY: f64 = 0.42;
const MOE_UNHIDDEN: f64 = 0.24;
/// SM clocks one thread block of the fused-MoE kernel's grid takes when it does no MMA work
/// ([`moe_grid::idle_blocks`]: tile rows past the experts hit, which return at once, or of
/// other EP ranks' experts, which write zeros), spread over the SMs. Fitted per GPU as the
/// median, over the rows whose grids launch more idle blocks than working ones, of what the
/// rest of the model leaves unpriced per idle block: H800 (kernel-only, Qwen3-Next's 512
/// experts, top-10) 102, A800 (event-timed, the same shapes) 67, RTX PRO 6000 220; the median.
/// Held out, H800's Qwen3-Next table goes from 42.7% to 10.5% (the other tables' constants;
/// 51.5% to 17.9% with the other GPUs'), A800's stays within 3%: its rows are the
/// weight-bound ones, where the idle blocks are 2–4% of the time
/// (`scripts/derive_roofline.py --loo`). Applies where the hardware file gives `sm_count`
/// and `sm_clock_mhz`.
const MOE_IDLE_BLOCK_CLOCKS: f64 = 102.0;
/// The memory latency, in SM clocks, that sets how many thread blocks a grouped GEMM of the
/// fused-MoE kernel needs to stream its weights at [`MOE_MEMORY_EFFICIENCY`]: by Little's law
/// the part's peak bytes per clock × this latency must be in flight, each block keeps
/// [`MOE_BLOCK_BYTES_IN_FLIGHT`], and with fewer blocks a GEMM streams in proportion. So a part
/// with more bytes per clock needs more blocks (H100/H800: 3,350 GB/s at 1.83 GHz, 223.5
/// blocks; H200: 4,800 GB/s, 320; A800: 2,039 GB/s at 1.41 GHz, 176.5; RTX PRO 6000: 1,597
/// GB/s at 2.617 GHz, 74.5). A GEMM's blocks: each expert hit gets ceil(rows / tile rows) tile rows, each
/// as many blocks as the GEMM has tile columns (gate and up: 2 × width; down: hidden), with
/// vLLM's default tiles for unquantized weights, 16 × 32 when the batch has no more tokens than
/// the GPU has experts, else 64 × 64 (`get_default_config` of vLLM's `fused_moe.py`; SGLang's
/// copy has the same). Few experts, or narrow ones, then leave the bandwidth unused. H800's
/// kernel-only tables of five MoE shapes fit 1,000 clocks best (546 ns at 1.83 GHz; the median
/// over the tables of their median error, with [`MOE_LARGE_TILE_BYTES_PER_CLOCK`]; no other
/// GPU's tables have rows it limits). Held out, H800's tables are priced with the latency a
/// public DRAM pointer chase measures instead (the median of ten parts, 695 clocks; H100 SXM
/// 700): H800's fused MoE goes from 23.4% to 19.6%, Phi-tiny-MoE from −50.3% to −37.8%
/// (`scripts/derive_roofline.py --loo`). It replaces a fitted 1.75 blocks per SM on every part,
/// which H800's bytes per clock set and which held A800 and RTX PRO 6000 to H800's needs: held
/// out, fused MoE over all rows goes from 15.8% to 13.6% (A800 15.0% to 12.7%; with the
/// latency's finer grid the large tile's cap refits 11 → 10.5), no few-large-expert table
/// faster. Applies where the hardware file gives `sm_count` and `sm_clock_mhz`.
pub(crate) const MOE_LATENCY_CLOCKS: f64 = 1000.0;
/// Weight bytes one thread block of the fused-MoE kernel keeps in flight: vLLM's default
/// configs set no `num_stages`, so Triton's default of 3 pipeline stages applies, 2 K steps
/// loading ahead of the one computed, each a BLOCK_K × BLOCK_N tile of bf16 weights: 64 × 32
/// on the small tile (16 × 32 × 64), 32 × 64 on the large (64 × 64 × 32): 8,192 bytes on both.
const MOE_BLOCK_BYTES_IN_FLIGHT: f64 = 2.0 * 64.0 * 32.0 * 2.0;
/// Bytes per SM per clock (at [`MOE_MEMORY_EFFICIENCY`]'s share) that the grouped GEMMs stream
/// at most on vLLM's large tile (64 × 64, K step 32): by Little's law a thread block's weight
/// bytes in flight over the memory latency, which takes about the same number of SM clocks on
/// every generation, so a part whose peak bandwidth is many bytes per SM per clock loses on
/// it. At peak H800 and H100 move 13.9 bytes per SM per clock (3,350 GB/s over 132 SMs at
/// 1.83 GHz) and A800 13.4: the large tile holds them to 10.5 (0.76 of peak); RTX PRO 6000
/// moves 3.2 and loses nothing. Fitted on H800's kernel-only tables (the only weight-bound rows
/// on both tiles) with [`MOE_LATENCY_CLOCKS`] (11 with the fitted blocks per SM before it);
/// held out, it took A800's table (a different generation, SM count and clock) from 37.1% to
/// 27.0% and left RTX PRO 6000's at 12.2%,
/// where a flat share of the rate fitted the same way takes RTX PRO 6000 to 14.3% and its
/// bench case's TPOT to +11% (`scripts/derive_roofline.py --loo [--flat-large-tile]`).
/// Applies where the hardware file gives `sm_count` and `sm_clock_mhz`.
const MOE_LARGE_TILE_BYTES_PER_CLOCK: f64 = 10.5;
/// vLLM's default fused-MoE tiles for unquantized weights (rows × columns): few tokens, many.
/// Where vLLM ships a tuned config file for the shape and part ([`moe_tuned`]), the file's
/// tile is priced instead: its own bytes in flight per block, whole tiles of its rows, and
/// no [`MOE_LARGE_TILE_BYTES_PER_CLOCK`] cap (Mixtral-8x7B at TP 2 on H100 against vLLM's
/// `benchmark_moe.py`, PR #24700: 40–45% slow at 16–128 tokens on the default tiles, 2–10% on
/// the file's).
const MOE_SMALL_TILE: (f64, f64) = (16.0, 32.0);
const MOE_LARGE_TILE: (f64, f64) = (64.0, 64.0);

/// A GEMM costs `GEMM_FIXED_NS + max(c, m) + GEMM_UNHIDDEN × min(c, m) + kernel_launch_ns`,
/// with `c` its FLOPs at [`GEMM_COMPUTE_EFFICIENCY`] of peak and `m` its weights, input and
/// output at the memory class's weight-streaming efficiency of peak bandwidth. Per GPU, the
/// fixed time (ramp-up, tail wave, split-K reduction) and the weight-streaming efficiency are
/// fitted (`t = t0 + bytes / (η × bandwidth)`, weighted by relative error) to its GEMMs of at
/// most 16 tokens: A100 4.64 µs / 0.783, A800 6.24 / 0.844, A40 2.63 / 0.777 (Vidur's and
/// Frontier's kernel timings of cuBLAS), H100 4.43 / 0.898, H800 3.14 / 0.982, H200 6.95 /
/// 0.905 (ours, graph replay), RTX 4090 4.84 / 0.947, RTX PRO 6000 1.66 / 0.971
/// (LLMServingSim). The weight-streaming efficiency splits by memory technology (HBM2e
/// 0.78–0.84, HBM3 and HBM3e 0.90–0.98, GDDR 0.91–0.97 where in-band ECC is taken off), so each
/// class takes its own median ([`gemm_memory_efficiency`]).
/// The fixed time follows the part ([`gemm_fixed_ns`]); this median over all eight is the
/// fixed time of a part whose file gives no `sm_count` or `sm_clock_mhz`.
pub(crate) const GEMM_FIXED_NS: f64 = 4_540.0;
/// A GEMM's fixed time on a part with `sm_count` and `sm_clock_mhz`: `GEMM_FIXED_BASE_NS +
/// GEMM_FIXED_NS_PER_STREAM_BYTE ×` the bytes each SM streams per clock at the datasheet
/// bandwidth (RTX 4090 2.9, RTX PRO 6000 3.2, A40 4.8, A100 13.4, H100 13.9, H200 19.9). To
/// stream at that rate each SM keeps its share times the memory latency in flight, so the
/// pipeline's ramp and the SMs' uneven drain cost more the more each SM carries: the GPUs'
/// own fits (above) rise with it, 1.7–2.6 µs on the GDDR parts, 4.4–4.6 on A100 and H100, 7.0
/// on the H200. A line through them by the median of the pairwise slopes
/// (`scripts/derive_roofline.py`, which prints the other forms tried with `--gemm-fixed`).
pub(crate) const GEMM_FIXED_BASE_NS: f64 = 2_680.0;
pub(crate) const GEMM_FIXED_NS_PER_STREAM_BYTE: f64 = 136.0;
/// Weight-streaming efficiency of the HBM2e parts (A100, A800; the median of their fits).
pub(crate) const GEMM_MEMORY_EFFICIENCY_HBM2E: f64 = 0.813;
/// Weight-streaming efficiency of the HBM3 and HBM3e parts (H100, H800, H200).
pub(crate) const GEMM_MEMORY_EFFICIENCY_HBM3: f64 = 0.905;
/// Weight-streaming efficiency of the GDDR parts without in-band ECC (RTX 4090, RTX PRO 6000;
/// A40 with its in-band ECC's share taken off, 0.777 / 0.85 = 0.914); also of a part whose
/// file names no `memory_type`. Held out, the RTX A6000 (GDDR6, ECC off by default; no table
/// among the derivation's) is priced 0.947 against the 0.943 its own LLMServingSim v0 GEMM
/// rows fit, where the Ampere class it took before gave it 0.783 (its GEMMs of at most 16
/// tokens held out +17.6% → −1.6%, `scripts/derive_roofline.py --llmservingsim-v0`).
pub(crate) const GEMM_MEMORY_EFFICIENCY_GDDR: f64 = 0.947;
/// Share of a GDDR part's weight stream left where it runs in-band ECC (`in_band_ecc`): GDDR
/// has no side-band ECC bits, so the check bits travel in the data's bursts. A public
/// measurement: Chaos's support article "ECC State for Nvidia GPUs" (support.chaos.com,
/// article 24886637113617) measured turning ECC on to cost 15% of performance on the RTX
/// 4090 and the A40, and states that ECC is on by default on NVIDIA's data-centre (Tesla)
/// parts and off on GeForce and RTX workstation parts. So the A40 (ECC on) fits 0.777 of its
/// datasheet bandwidth where the GDDR parts without ECC fit 0.947–0.971.
pub(crate) const GDDR_IN_BAND_ECC_SHARE: f64 = 0.85;
/// Fraction of peak dense FLOP/s a compute-bound GEMM reaches, and the share of the shorter of
/// a GEMM's MMA work and weight stream that the longer does not hide (the transition between
/// the two, 64–1,024 tokens, where neither dominates), fitted together per GPU to its GEMMs of
/// more than 16 tokens (A100 0.77 / 0.50, A800 0.86 / 1.00, A40 0.81 / 0.40, H100 0.79 / 0.60,
/// H200 0.80 / 0.10, RTX 4090 1.02 / 0.30, RTX PRO 6000 0.82 / 0.65; the medians). The RTX
/// 4090 sustains its boost clock and is held out by 29–31% above 128 tokens.
const GEMM_COMPUTE_EFFICIENCY: f64 = 0.82;
const GEMM_UNHIDDEN: f64 = 0.50;

/// PyTorch ops PhiMoE's routing issues beyond the fused top-k softmax (`topk_softmax`, one
/// op) that the other MoE models run. vLLM's `phimoe.py` (0.13.0 and 0.19.0) routes through
/// `FusedMoE`'s `custom_routing_function`, `phimoe_routing_function` → `sparsemixer`, eager
/// PyTorch in eval mode: per expert pick a `max`, `abs`, `clamp`, `sub`, `div`, `gt`,
/// `masked_fill`, `softmax` and `gather` (the second pick also a `scatter` of the first),
/// then two `concat`s: 21 ops in place of one.
pub const SPARSEMIXER_OPS: u32 = 20;

/// Further kernels those ops launch: the out-of-place `masked_fill` (twice) and `scatter`
/// each clone their input first (ATen's composite `masked_fill` and `scatter`).
pub const SPARSEMIXER_INNER_LAUNCHES: u32 = 3;

/// Least GPU time of any kernel, ns: the median kernel-only time of a one-token RMSNorm of
/// vLLM's fused kernel (RTX 4090 1.85, RTX PRO 6000 2.12, H800 2.64 µs; LLMServingSim's
/// bundles and Frontier's kernel-only files).
pub(crate) const KERNEL_FLOOR_NS: f64 = 2_120.0;

/// A row kernel's fixed SM clocks (ramp and tail, the launch apart; [`rows`]), fitted per GPU with
/// [`ROW_SCALAR_BYTES_PER_CLOCK`] and [`ROW_VECTOR_BYTES_PER_CLOCK`] over its one-wave rows,
/// less the launch (`(t − 0.5 µs) × clock = fixed + scalar row bytes / scalar rate + vectorised
/// row bytes / vectorised rate`): H800 2,762 (Frontier's kernel-only rows), RTX 4090 3,077,
/// RTX PRO 6000 3,843 (LLMServingSim's bundles, Frontier's); the median.
pub(crate) const ROW_KERNEL_FIXED_CLOCKS: f64 = 3_080.0;
/// Bytes of its row one thread block of a row kernel moves per SM clock when its threads load
/// one element at a time (vLLM's rotary kernel): H800 8.7, RTX 4090 9.9, RTX PRO 6000 11.4
/// (fitted with [`ROW_KERNEL_FIXED_CLOCKS`]; H800's from vLLM 0.10's RMSNorm, SiLU-and-mul and
/// rotary, the RTX parts' from rotary); the median.
pub(crate) const ROW_SCALAR_BYTES_PER_CLOCK: f64 = 9.9;
/// The same when its threads load 16 bytes at a time (vLLM 0.19's RMSNorm, fused add +
/// RMSNorm and SiLU-and-mul; 0.10's fused add + RMSNorm): H800 18.5, RTX 4090 20.0, RTX PRO
/// 6000 27.2; the median.
pub(crate) const ROW_VECTOR_BYTES_PER_CLOCK: f64 = 20.0;
/// Bytes per SM per clock at which a row kernel's grid of several waves streams a working set
/// that fits L2 (`l2_cache_mb`), fitted per GPU over such rows: RTX 4090 6.25, RTX PRO 6000
/// 8.88 (the only tables with grids of several waves); the median. Only the FP8 activation
/// quantization's ([`rows::RowKernels::quant_ns`]): on Hopper it prices L2 below DRAM (H800
/// 7.56 × 132 × 1.83 GHz = 1.83 TB/s against 3.35), so the norms take [`ROW_L2_OVER_DRAM`].
pub(crate) const L2_BYTES_PER_SM_CLOCK: f64 = 7.56;
/// The rate at which a norm's, SiLU-and-mul's or rotary's grid of several waves streams a
/// working set that fits L2, as a multiple of the part's DRAM bandwidth (`memory_bw_gbps`),
/// fitted per GPU over such rows: RTX 4090 2.15 (2.17 TB/s), RTX PRO 6000 2.74 (4.38 TB/s);
/// the median. The two parts' rates are closer as multiples of DRAM than per SM per clock
/// (6.25 and 8.88): the tables' working sets are not served from L2 alone.
pub(crate) const ROW_L2_OVER_DRAM: f64 = 2.445;

/// Breakdown name of the all-reduce that sums a TP > 1 step's vocabulary-parallel embedding
/// shards (vLLM's `VocabParallelEmbedding.forward`), once per step, before the first block.
pub const EMBEDDING_ALLREDUCE: &str = "embedding_allreduce";

/// Breakdown name of the all-gather of a TP > 1 step's vocabulary-parallel logits (vLLM V1's
/// `LogitsProcessor._gather_logits`, an all-gather on CUDA since vLLM PR #9856), once per step,
/// after `lm_head`: every GPU receives the other shards' `seqs × vocab / tp` values.
pub const LOGITS_ALLGATHER: &str = "logits_allgather";

/// The share of its peak bandwidth at which `hardware` streams on the fused-MoE kernel's large
/// tile: SMs × clock × [`MOE_LARGE_TILE_BYTES_PER_CLOCK`] over the peak, at most 1; 1 without
/// `sm_count` or `sm_clock_mhz`.
fn moe_large_tile_share(hardware: &Hardware) -> f64 {
    match hardware.sm_clocks_per_ns() {
        Some(clocks_per_ns) => {
            let bytes_per_ns = clocks_per_ns * MOE_LARGE_TILE_BYTES_PER_CLOCK;
            (bytes_per_ns / hardware.memory_bw_gbps).min(1.0)
        }
        None => 1.0,
    }
}

/// Nanoseconds the fused-MoE kernel's idle thread blocks take each on `hardware`:
/// [`MOE_IDLE_BLOCK_CLOCKS`] over its SMs and clock; 0 without `sm_count` or `sm_clock_mhz`.
fn moe_idle_ns_per_block(hardware: &Hardware) -> f64 {
    hardware
        .sm_clocks_per_ns()
        .map_or(0.0, |clocks_per_ns| MOE_IDLE_BLOCK_CLOCKS / clocks_per_ns)
}

/// Thread blocks that saturate `hardware`'s bandwidth on the fused-MoE kernel: its peak bytes
/// per clock × [`MOE_LATENCY_CLOCKS`] over [`MOE_BLOCK_BYTES_IN_FLIGHT`]; 0 (no limit)
/// without `sm_count` or `sm_clock_mhz`.
fn moe_saturating_blocks(hardware: &Hardware) -> f64 {
    match (hardware.sm_count, hardware.sm_clock_mhz) {
        (Some(_), Some(mhz)) if mhz > 0.0 => {
            let bytes_per_clock = hardware.memory_bw_gbps / (mhz / 1e3);
            bytes_per_clock * MOE_LATENCY_CLOCKS / MOE_BLOCK_BYTES_IN_FLIGHT
        }
        _ => 0.0,
    }
}

/// A GEMM's fixed time on `hardware`, ns: [`GEMM_FIXED_BASE_NS`] plus
/// [`GEMM_FIXED_NS_PER_STREAM_BYTE`] per byte each SM streams per clock at the peak bandwidth;
/// [`GEMM_FIXED_NS`] without `sm_count` or `sm_clock_mhz`.
pub(crate) fn gemm_fixed_ns(hardware: &Hardware) -> f64 {
    match (hardware.sm_count, hardware.sm_clock_mhz) {
        (Some(sms), Some(mhz)) if sms > 0 && mhz > 0.0 => {
            let bytes_per_sm_clock = hardware.memory_bw_gbps / (f64::from(sms) * mhz / 1e3);
            GEMM_FIXED_BASE_NS + GEMM_FIXED_NS_PER_STREAM_BYTE * bytes_per_sm_clock
        }
        _ => GEMM_FIXED_NS,
    }
}

/// The tile a fused-MoE launch runs on, and what it sets in the pricing.
#[derive(Debug, Clone, Copy)]
struct MoeTile {
    /// Rows and columns of one thread block's output tile.
    rows: f64,
    columns: f64,
    /// Weight bytes a thread block keeps in flight (the thread-block limit,
    /// [`MOE_LATENCY_CLOCKS`]).
    bytes_in_flight: f64,
    /// Whether its MMA work covers whole tiles: each expert hit's routed rows rounded up.
    whole_tiles: bool,
    /// Whether it is the default large tile, held to [`MOE_LARGE_TILE_BYTES_PER_CLOCK`].
    capped: bool,
}

/// vLLM 0.10.2's default fused-MoE tile when `tokens` enter the kernel of `experts` (the tiles
/// the constants were fitted on; priced wherever vLLM ships no tuned file, [`moe_tuned`]): the
/// small one while there are no more tokens than experts (its MMA work the routed rows: few
/// per expert hit, which the weights hide), else the large one (whole 64-row tiles per expert
/// hit).
fn moe_default_tile(tokens: f64, experts: f64) -> MoeTile {
    let small = tokens <= experts;
    let (rows, columns) = if small {
        MOE_SMALL_TILE
    } else {
        MOE_LARGE_TILE
    };
    MoeTile {
        rows,
        columns,
        bytes_in_flight: MOE_BLOCK_BYTES_IN_FLIGHT,
        whole_tiles: !small,
        capped: !small,
    }
}

/// A tile of a tuned config file ([`moe_tuned`]) in `fp`-byte weights: its MMA work in whole
/// tiles, its own bytes in flight, and no bytes-per-clock cap (fitted on the default large
/// tile's 8 KiB in flight; the bundled tuned tiles keep 48–96 KiB).
fn moe_tuned_tile(tile: TunedTile, fp: f64) -> MoeTile {
    MoeTile {
        rows: f64::from(tile.block_m),
        columns: f64::from(tile.block_n),
        bytes_in_flight: tile.bytes_in_flight(fp),
        whole_tiles: true,
        capped: false,
    }
}

/// Rows whose MMA work the fused-MoE kernel's grouped GEMMs do on `tile` when `active`
/// experts are hit by `routed` rows: with whole tiles, each expert hit's routed rows rounded
/// up to the tile's (the tile rows [`Roofline::moe_stream_shares`] counts); else the routed
/// rows.
fn moe_mma_rows(tile: MoeTile, active: f64, routed: f64) -> f64 {
    if !tile.whole_tiles || active <= 0.0 {
        return routed;
    }
    active * (routed / active / tile.rows).ceil() * tile.rows
}

/// The kernel constants the roofline prices `hardware` with: its `[kernels]` values where it
/// has them, else the constants derived over eight GPUs (every field is `Some`).
pub fn kernel_constants(hardware: &Hardware) -> KernelSpec {
    let k = &hardware.kernels;
    let memory = gemm_memory_efficiency(hardware);
    KernelSpec {
        gemm_compute_efficiency: k.gemm_compute_efficiency.or(Some(GEMM_COMPUTE_EFFICIENCY)),
        gemm_memory_efficiency: k.gemm_memory_efficiency.or(Some(memory)),
        decode_attention_efficiency: k
            .decode_attention_efficiency
            .or(Some(DECODE_ATTENTION_EFFICIENCY)),
        moe_memory_efficiency: k.moe_memory_efficiency.or(Some(MOE_MEMORY_EFFICIENCY)),
        gemm_fixed_ns: k.gemm_fixed_ns.or(Some(gemm_fixed_ns(hardware))),
    }
}

/// The share of `hardware`'s datasheet bandwidth a weight-bound GEMM streams at: its memory
/// class's ([`GEMM_MEMORY_EFFICIENCY_GDDR`] where the file names none), times
/// [`GDDR_IN_BAND_ECC_SHARE`] where it runs in-band ECC.
pub fn gemm_memory_efficiency(hardware: &Hardware) -> f64 {
    let class = match hardware.memory_type {
        Some(MemoryType::Hbm2e) => GEMM_MEMORY_EFFICIENCY_HBM2E,
        Some(MemoryType::Hbm3 | MemoryType::Hbm3e) => GEMM_MEMORY_EFFICIENCY_HBM3,
        Some(MemoryType::Gddr6 | MemoryType::Gddr6x | MemoryType::Gddr7) | None => {
            GEMM_MEMORY_EFFICIENCY_GDDR
        }
    };
    if hardware.in_band_ecc {
        class * GDDR_IN_BAND_ECC_SHARE
    } else {
        class
    }
}

/// Prices each layer as `max(FLOPs / (peak × eff), bytes / (bw × eff)) + launch overhead`,
/// with ring all-reduces after `o_proj` and `down_proj` when `tp > 1`.
#[derive(Debug, Clone)]
pub struct Roofline {
    /// Decoder blocks of the model.
    pub num_layers: u64,
    /// Bytes per element of activations (and of the weights no quantization reaches).
    fp: f64,
    /// The widths of weights, activations and KV cache, and whether linear layers run FP8.
    precision: Precision,
    /// How the part runs FP8 GEMMs' MMA work ([`Fp8Gemms`]).
    fp8_gemms: Fp8Gemms,
    hidden: f64,
    head_dim: f64,
    heads_per_gpu: f64,
    /// KV heads whose cache one GPU reads (at least one: replicated when `tp > kv_heads`).
    kv_heads_per_gpu: f64,
    /// Output width of the sharded Q projection, `q_dim / tp`.
    q_out: f64,
    /// Output width of the sharded K (or V) projection, `kv_dim / tp`.
    kv_out: f64,
    vocab_per_gpu: f64,
    mlp: Mlp,
    qk_norm: bool,
    /// Whether the MoE routes with PhiMoE's `sparsemixer` rather than the fused top-k
    /// softmax ([`SPARSEMIXER_OPS`]).
    sparsemixer: bool,
    flops_per_ns: f64,
    bytes_per_ns: f64,
    /// A GEMM's rates: peak FLOP/s times [`GEMM_COMPUTE_EFFICIENCY`], bandwidth times the
    /// memory class's weight-streaming efficiency ([`gemm_memory_efficiency`]).
    pub gemm_flops_per_ns: f64,
    pub gemm_bytes_per_ns: f64,
    /// Attention's rates: prefill FLOP/s (peak times [`prefill_attention_efficiency`]) and the
    /// decode KV bandwidth.
    attention_flops_per_ns: f64,
    pub attention_bytes_per_ns: f64,
    /// Query rows of a prefill attention tile ([`PREFILL_TILE_ROWS_HOPPER`]) and the SMs its
    /// waves run on (the hardware file's `sm_count`; none: no waves).
    prefill_tile_rows: u64,
    sm_count: Option<u64>,
    /// How a pure-decode launch's kernels and waves are priced (`None`: a part without
    /// `sm_count` or `sm_clock_mhz`, which pays [`ATTENTION_FIXED_NS`]).
    decode_kernels: Option<DecodeKernels>,
    /// How a mixed batch's decodes are priced (`None`: on Hopper, which runs
    /// FlashAttention-3, and where `decode_kernels` is `None`, at [`MIXED_DECODE_EFFICIENCY`]
    /// instead).
    mixed_kernels: Option<MixedKernels>,
    /// Whether a pure-decode launch runs as a mixed launch's decodes do (`mixed_kernels`):
    /// a model whose every layer slides its window, on a part with [`MixedKernels`]. vLLM's
    /// FlashAttention backend passes the window, and FlashAttention-2's `mha_varlen_fwd`
    /// packs a GQA group into a decode's query tile, and splits its KV, only without one
    /// (`seqlenq_ngroups_swapped` needs `window_size_left < 0`; vllm-project/flash-attention,
    /// `csrc/flash_attn/flash_api.cpp`), so every decode runs one thread block per query head,
    /// unsplit.
    unpacked_decodes: bool,
    /// The part's row-kernel prices; `None` without its SM count and clock.
    row_kernels: Option<RowKernels>,
    /// The part's peak memory bandwidth, bytes/ns (a mixed batch's decodes read at a share
    /// of it, [`MIXED_DECODE_EFFICIENCY`]).
    peak_bytes_per_ns: f64,
    /// The fused-MoE kernel's rates (see [`MOE_MEMORY_EFFICIENCY`]).
    moe_flops_per_ns: f64,
    moe_bytes_per_ns: f64,
    /// Thread blocks a grouped GEMM needs to stream at `moe_bytes_per_ns`
    /// (`moe_saturating_blocks`; 0: no limit, a part without `sm_count` or `sm_clock_mhz`).
    moe_saturating_blocks: f64,
    /// Share of `moe_bytes_per_ns` the large tile reaches: SMs × clock ×
    /// [`MOE_LARGE_TILE_BYTES_PER_CLOCK`] over the peak bandwidth, at most 1 (1: a part
    /// without `sm_count` or `sm_clock_mhz`).
    moe_large_tile_share: f64,
    /// Time of one idle thread block of the fused-MoE grid, ns (`moe_idle_ns_per_block`).
    moe_idle_ns_per_block: f64,
    /// The name vLLM's tuned fused-MoE configs give the part ([`moe_tuned::vllm_device`];
    /// `None` for weights neither in 16 bits nor FP8), and the tuned tiles vLLM runs this
    /// model's experts on, if it ships a file for them in their dtype.
    moe_tuned_device: Option<&'static str>,
    moe_tuned: Option<&'static [TunedTile]>,
    launch_ns: f64,
    /// Fixed time of a GEMM kernel, ns ([`gemm_fixed_ns`] unless the hardware file says).
    gemm_fixed_ns: f64,
    allreduce: Option<AllReduce>,
    /// Expert-parallel dispatch/combine (MoE models under EP), priced on the ring model.
    expert_comm: Option<(Collectives, MoeShape)>,
    /// TP all-reduces priced on the instance's link ([`Roofline::with_tp_link`]).
    tp_collectives: Option<Collectives>,
    /// On a TPU (`accelerator = "tpu"`), its rates: the step is then one compiled XLA program
    /// over padded counts, priced by the [`tpu`] module. Boxed: a pointer's width on the GPUs'
    /// rooflines.
    tpu: Option<Box<Tpu>>,
}

/// The per-GPU shape of the MLP of one block.
#[derive(Debug, Clone, Copy)]
enum Mlp {
    Dense {
        ffn_per_gpu: f64,
    },
    Moe {
        experts: f64,
        top_k: f64,
        /// Expert-parallel ranks the experts are spread over (1 without EP).
        ep: f64,
        /// Instances whose batches the dispatch gathers before the experts run: the
        /// members of a DP group (1 outside one).
        group: f64,
        /// Weight bytes of one expert on one GPU (`3 × hidden × moe_ffn × fp / tp`).
        expert_bytes: f64,
        /// Width of one expert on one GPU (`moe_ffn / tp`): the gate and up GEMM's output
        /// is twice it.
        width: f64,
        /// FLOPs of one routed token through one expert on one GPU.
        flops_per_token_expert: f64,
    },
}

/// Ring all-reduce constants: `time = bytes × ns_per_byte + fixed_ns`.
#[derive(Debug, Clone, Copy)]
struct AllReduce {
    ns_per_byte: f64,
    fixed_ns: f64,
    /// The TP degree the ring runs over.
    ranks: f64,
}

/// FLOPs and bytes moved by one kernel (or one part of one).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cost {
    /// Floating-point operations.
    pub flops: f64,
    /// Bytes moved to or from memory.
    pub bytes: f64,
}

impl Cost {
    fn add(&mut self, flops: f64, bytes: f64) {
        self.flops += flops;
        self.bytes += bytes;
    }
}

/// The work of one layer occurrence.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Work {
    Kernel(Cost),
    /// A row kernel over `rows` rows (a thread block each: norms, SiLU-and-mul, rotary;
    /// [`rows`]).
    Rows {
        /// Its FLOPs and the bytes it reads and writes.
        cost: Cost,
        /// Its rows, a thread block each.
        rows: f64,
        /// How its threads load their row.
        loads: Loads,
    },
    /// A GEMM (its fixed time and weight-streaming efficiency: [`gemm_fixed_ns`]).
    Gemm(Cost),
    /// A linear layer on vLLM's FP8 path ([`fp8`]): the per-token quantization of its input
    /// (a row kernel, a token per thread block) and the scaled GEMM at the FP8 MMA rate.
    Fp8Gemm {
        gemm: Cost,
        quant: Cost,
        /// The input's tokens: the quantization's rows and the GEMM's M.
        tokens: f64,
        /// The GEMM's K and N.
        depth: f64,
        outputs: f64,
    },
    /// One attention launch whose prefill and decode parts are priced separately.
    Attention(AttentionWork),
    /// The fused-MoE grouped GEMMs (their own efficiencies): the work, the bytes as they
    /// stream (the weights of a GEMM with too few thread blocks count for more), and the
    /// thread blocks of their grids that do no MMA work ([`moe_grid::idle_blocks`]); on
    /// `fp8_w8a8` experts, the quantizations of their inputs ([`TensorQuant`]).
    Experts {
        cost: Cost,
        streamed_bytes: f64,
        idle_blocks: f64,
        quant: Option<[TensorQuant; 2]>,
    },
    /// `count` small kernels of the same shape, each moving `each` (PhiMoE's routing ops):
    /// each priced as a [`Work::Kernel`], so at the least time of a kernel when it is small.
    Kernels {
        count: f64,
        each: Cost,
    },
    /// A collective whose time is already known, ns.
    Comm {
        ns: f64,
    },
    /// An op of a TPU's compiled program ([`tpu`]; only on a TPU).
    Tpu(TpuOp),
}

/// One attention launch's work ([`Work::Attention`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionWork {
    /// The prefills' MMA work as their waves pay it, FLOPs ([`prefill_waves`]).
    pub prefill_flops: f64,
    pub decode: Cost,
    /// Decodes in the batch (their KV reads slow down next to a prefill).
    pub decodes: f64,
    /// Their mean context, KV tokens read per decode.
    pub context: f64,
    /// KV tokens the longest of them reads (the split-KV grid's length).
    pub longest: f64,
    /// See [`Step::decode_skew_bytes`].
    pub skew_bytes: f64,
    /// See [`Step::query_tiles`].
    pub query_tiles: f64,
    /// See [`Step::mixed_working_clocks`].
    pub mixed_working_clocks: f64,
}

impl AttentionWork {
    /// Whether the launch is decodes alone (the split-KV kernel, [`decode`]).
    fn pure_decode(&self) -> bool {
        let mixed = self.prefill_flops > 0.0;
        !mixed && self.decode != Cost::default()
    }
}

/// A pure-decode launch's fixed time (besides its KV stream), kept for the launches of the
/// same grid: `decodes` decodes whose longest reads `first..=last` KV tokens (the same KV
/// tiles per thread block, [`DecodeKernels::same_grid`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecodeFixed {
    decodes: u64,
    first: u64,
    last: u64,
    ns: f64,
}

/// Batch totals the layer costs depend on.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    tokens: f64,
    seqs: f64,
    /// Tokens whose gate decisions fire the experts ([`BatchDesc::gate_tokens`]).
    gate: f64,
    /// The prefills' attention work as their waves pay it, FLOPs ([`prefill_waves`]).
    prefill_flops: f64,
    decode: Cost,
    /// Decodes whose attention runs on the GPU.
    decodes: f64,
    /// KV tokens those decodes read, summed, and the most one reads.
    decode_context: f64,
    decode_longest: f64,
    /// KV bytes the decodes would read beyond theirs if every one had the longest context.
    decode_skew_bytes: f64,
    /// Query tiles per sequence and head of the varlen attention grid: its longest query's
    /// ([`mixed::MIXED_TILE_ROWS`] rows each; 0 without a prefill).
    query_tiles: f64,
    /// SM clocks the decodes' working blocks add to that grid's launch
    /// ([`MixedKernels::working_clocks`]).
    mixed_working_clocks: f64,
    /// See [`BatchDesc::graph_replayed`]: the TP all-reduces' copies depend on it.
    graph_replayed: bool,
}

/// A roofline-priced kernel of `flops` and `bytes`.
fn kernel(flops: f64, bytes: f64) -> Work {
    Work::Kernel(Cost { flops, bytes })
}

/// GEMM of an m×k activation with a k×n weight in `fp`-byte values: weights plus input and
/// output.
fn gemm(m: f64, k: f64, n: f64, fp: f64) -> Work {
    Work::Gemm(Cost {
        flops: 2.0 * m * k * n,
        bytes: (k * n + m * k + m * n) * fp,
    })
}

/// A row kernel of `flops` and `bytes` over `rows` rows, its threads loading as `loads`.
fn row_kernel(flops: f64, bytes: f64, rows: f64, loads: Loads) -> Work {
    Work::Rows {
        cost: Cost { flops, bytes },
        rows,
        loads,
    }
}

/// vLLM's fused add + RMSNorm (`fused_add_rms_norm`, the norm of every decoder layer but the
/// first layer's input norm, and the final norm) over `elems` values in rows of `width` (a
/// thread block each): reads the row and the residual, writes both, reads the weight; 16 bytes
/// a load.
fn norm(elems: f64, width: f64, fp: f64) -> Work {
    row_kernel(
        4.0 * elems,
        (4.0 * elems + width) * fp,
        elems / width,
        Loads::Vector,
    )
}

/// RMSNorm of `qk` Q and K values per head of `head_dim` (a row each), with a weight for Q
/// and one for K; 16 bytes a load (vLLM 0.19's `rms_norm`).
fn qk_norm(qk: f64, head_dim: f64, fp: f64) -> Work {
    row_kernel(
        4.0 * qk,
        (2.0 * qk + 2.0 * head_dim) * fp,
        qk / head_dim,
        Loads::Vector,
    )
}

/// PhiMoE's routing of `tokens` tokens over `experts` experts beyond the fused top-k softmax
/// it replaces ([`SPARSEMIXER_OPS`]): small kernels over the `tokens × experts` router logits
/// of `fp` bytes, each reading two such tensors and writing one.
fn sparsemixer(tokens: f64, experts: f64, fp: f64) -> Work {
    let values = tokens * experts;
    Work::Kernels {
        count: f64::from(SPARSEMIXER_OPS + SPARSEMIXER_INNER_LAUNCHES),
        each: Cost {
            flops: values,
            bytes: 3.0 * values * fp,
        },
    }
}

/// vLLM's tuned fused-MoE tiles for `model` on `hardware` at TP `tp`, and the device name its
/// files carry: files without a `dtype` in their name are for 16-bit weights, those with
/// `dtype=fp8_w8a8` for FP8 ones.
fn served_moe_tiles(
    model: &ModelArch,
    hardware: &Hardware,
    tp: u64,
    dtype: Dtype,
) -> (
    Option<&'static str>,
    Option<&'static [moe_tuned::TunedTile]>,
) {
    let device = match dtype {
        Dtype::Bfloat16 | Dtype::Float16 | Dtype::Fp8 => moe_tuned::vllm_device(&hardware.name),
        _ => None,
    };
    let tiles = match (&model.moe, device) {
        (Some(moe), Some(device)) => moe_tuned::tuned_tiles_in(
            dtype,
            device,
            moe.num_experts,
            moe.moe_intermediate_size / tp,
        ),
        _ => None,
    };
    (device, tiles)
}

/// The MLP of one layer on one of `tp` GPUs: dense, or the experts (all on every GPU, each
/// split `tp` ways) with their weights in `precision`.
fn served_mlp(model: &ModelArch, precision: &Precision, tp: u64) -> Mlp {
    match &model.moe {
        None => Mlp::Dense {
            ffn_per_gpu: (model.intermediate_size / tp) as f64,
        },
        Some(moe) => {
            let per_gpu = (3 * model.hidden_size * moe.moe_intermediate_size) as f64 / tp as f64;
            Mlp::Moe {
                experts: moe.num_experts as f64,
                top_k: moe.top_k as f64,
                ep: 1.0,
                group: 1.0,
                expert_bytes: per_gpu * precision.weights,
                width: moe.moe_intermediate_size as f64 / tp as f64,
                flops_per_token_expert: 2.0 * per_gpu,
            }
        }
    }
}

/// The ring all-reduce over the datasheet's link at its efficiency, for TP > 1.
fn datasheet_allreduce(hardware: &Hardware, tp: u64) -> Option<AllReduce> {
    (tp > 1).then(|| {
        let link_bytes_per_ns = hardware.link_bw_gbps * hardware.link_efficiency;
        AllReduce {
            ns_per_byte: 2.0 * (tp - 1) as f64 / tp as f64 / link_bytes_per_ns,
            fixed_ns: 2.0 * (tp - 1) as f64 * hardware.link_latency_ns,
            ranks: tp as f64,
        }
    })
}

impl Roofline {
    /// A roofline for `model` on `hardware` with tensor parallelism `tp` served in `dtype`,
    /// the KV cache in its activations' dtype ([`Dtype::activations`]). `tp = 0` is treated
    /// as 1.
    pub fn new(model: &ModelArch, hardware: &Hardware, tp: u32, dtype: Dtype) -> Roofline {
        Roofline::served(model, hardware, tp, dtype, dtype.activations())
    }

    /// [`Roofline::new`] with the KV cache in `kv_cache` (`--kv-cache-dtype`).
    pub fn served(
        model: &ModelArch,
        hardware: &Hardware,
        tp: u32,
        dtype: Dtype,
        kv_cache: Dtype,
    ) -> Roofline {
        let tp = u64::from(tp.max(1));
        let precision = Precision::served(dtype, kv_cache);
        let fp = precision.activations;
        let peak_flops = hardware.peak_flops(dtype.activations());
        let hidden = model.hidden_size as f64;
        let (moe_tuned_device, moe_tuned) = served_moe_tiles(model, hardware, tp, dtype);
        let mlp = served_mlp(model, &precision, tp);
        let allreduce = datasheet_allreduce(hardware, tp);
        let k = kernel_constants(hardware);
        let (gemm_memory_efficiency, decode_attention_efficiency, moe_memory_efficiency) = (
            k.gemm_memory_efficiency.unwrap_or_default(),
            k.decode_attention_efficiency.unwrap_or_default(),
            k.moe_memory_efficiency.unwrap_or_default(),
        );
        let gemm_flops_per_ns = peak_flops * k.gemm_compute_efficiency.unwrap_or_default() / 1e9;
        let prefill_tile_rows = if hardware.is_hopper() {
            PREFILL_TILE_ROWS_HOPPER
        } else {
            PREFILL_TILE_ROWS
        };
        let heads = (
            (model.num_kv_heads / tp).max(1),
            model.num_heads / tp,
            model.head_dim,
        );
        let decode_kernels = DecodeKernels::new(hardware, heads.0, heads.1, heads.2);
        // Hopper runs FlashAttention-3, another grid: it keeps the table.
        let mixed_kernels = decode_kernels
            .filter(|_| !hardware.is_hopper())
            .map(|d| MixedKernels::new(hardware, &d, heads, precision.kv));
        Roofline {
            num_layers: model.num_layers,
            fp,
            precision,
            fp8_gemms: Fp8Gemms::new(hardware, &precision),
            hidden,
            head_dim: model.head_dim as f64,
            heads_per_gpu: (model.num_heads / tp) as f64,
            kv_heads_per_gpu: (model.num_kv_heads / tp).max(1) as f64,
            q_out: (model.q_dim() / tp) as f64,
            kv_out: (model.kv_dim() / tp) as f64,
            vocab_per_gpu: (model.vocab_size / tp) as f64,
            mlp,
            qk_norm: matches!(model.model_type.as_str(), "qwen3" | "qwen3_moe"),
            sparsemixer: model.routes_with_sparsemixer(),
            flops_per_ns: peak_flops * hardware.compute_efficiency / 1e9,
            bytes_per_ns: hardware.memory_bw_gbps * hardware.memory_efficiency,
            gemm_flops_per_ns,
            gemm_bytes_per_ns: hardware.memory_bw_gbps * gemm_memory_efficiency,
            attention_flops_per_ns: peak_flops
                * prefill_attention_efficiency(hardware, peak_flops, model.head_dim)
                / 1e9,
            prefill_tile_rows,
            sm_count: hardware.sm_count.map(u64::from),
            decode_kernels,
            mixed_kernels,
            unpacked_decodes: model.sliding_window.is_some() && mixed_kernels.is_some(),
            row_kernels: RowKernels::new(hardware),
            attention_bytes_per_ns: hardware.memory_bw_gbps * decode_attention_efficiency,
            peak_bytes_per_ns: hardware.memory_bw_gbps,
            moe_flops_per_ns: moe_flops_per_ns(hardware, dtype),
            moe_bytes_per_ns: hardware.memory_bw_gbps * moe_memory_efficiency,
            moe_saturating_blocks: moe_saturating_blocks(hardware),
            moe_large_tile_share: moe_large_tile_share(hardware),
            moe_idle_ns_per_block: moe_idle_ns_per_block(hardware),
            moe_tuned_device,
            moe_tuned,
            launch_ns: hardware.kernel_launch_ns,
            gemm_fixed_ns: k.gemm_fixed_ns.unwrap_or_default(),
            allreduce,
            expert_comm: None,
            tp_collectives: None,
            tpu: Tpu::of(hardware, peak_flops).map(Box::new),
        }
    }

    /// The same roofline with its TP all-reduces priced on `collectives`' link (the cluster
    /// config's dimension 0, or the hardware's link without one), with the ring model of the
    /// ASTRA-Sim fork that the profile backend uses too. Without a link (TP 1, or collectives
    /// priced by ASTRA-Sim) nothing changes.
    pub fn with_tp_link(mut self, collectives: Collectives) -> Roofline {
        if collectives.tp > 1 && collectives.tp_link.is_some() {
            self.tp_collectives = Some(collectives);
        }
        self
    }

    /// The same roofline with the expert parallelism of `collectives` (a MoE model at EP > 1):
    /// each GPU holds `experts / ep` whole experts and computes its share of the routed
    /// rows, and every MoE layer is framed by the EP dispatch and combine when
    /// `collectives` has an EP link. Without EP (or for a dense model) nothing changes.
    pub fn with_expert_parallel(mut self, model: &ModelArch, collectives: Collectives) -> Roofline {
        let ep = collectives.ep.total;
        let (Some(moe), true) = (&model.moe, ep > 1) else {
            return self;
        };
        let whole = (3 * model.hidden_size * moe.moe_intermediate_size) as f64;
        self.mlp = Mlp::Moe {
            experts: moe.num_experts as f64,
            top_k: moe.top_k as f64,
            ep: f64::from(ep),
            group: collectives.ep.group_members() as f64,
            expert_bytes: whole * self.precision.weights,
            width: moe.moe_intermediate_size as f64,
            flops_per_token_expert: 2.0 * whole,
        };
        let weights = if self.precision.fp8 {
            Dtype::Fp8
        } else {
            Dtype::Bfloat16
        };
        self.moe_tuned = self.moe_tuned_device.and_then(|device| {
            let local = moe.num_experts / u64::from(ep);
            moe_tuned::tuned_tiles_in(weights, device, local, moe.moe_intermediate_size)
        });
        self.expert_comm = collectives
            .ep
            .link
            .map(|_| (collectives, MoeShape::of(model, self.fp as u64)));
        self
    }

    /// Sums the batch into the totals the layers need, without allocating: one pass in
    /// integers ([`BatchSums`]), exactly the totals summing request by request gives.
    ///
    /// Always inlined: called, its `Step` went through memory and the caller's first read of
    /// it was a stalled load every step.
    #[inline(always)]
    pub fn step(&self, batch: &BatchDesc<'_>) -> Result<Step, LatencyError> {
        let mut room: PrefillRoom = [(0, 0); PREFILLS_ON_STACK];
        let sums = BatchSums::of(batch, &mut room)?;
        // DP padding: dummy decodes every token-wise layer computes, without KV.
        let pad = f64::from(batch.pad_tokens);
        let d = sums.decode_terms(batch, pad, self.decode_rates());
        let prefills = match sums.prefills() {
            Some(prefills) => self.prefill_grid(prefills.iter().copied(), &d),
            None => {
                // The lead's items are decodes (`DecodeLead`): only the tail holds prefills.
                let items = batch.tail().iter().filter(|i| !i.is_decode());
                let shapes = items.map(|i| (u64::from(i.new_tokens), u64::from(i.context_tokens)));
                self.prefill_grid(shapes, &d)
            }
        };
        let seqs = batch.items.len() as f64 + pad;
        let gate = sums.gate_tokens(batch) as f64;
        Ok(self.step_of(d, seqs, gate, prefills, batch.graph_replayed))
    }

    /// The grid of a step's `prefills` (`(chunk, prefix)`, in batch order) beside the decodes
    /// `d`: its waves and, on a part with [`MixedKernels`], what the decodes' working blocks
    /// add to the launch.
    #[inline(always)]
    fn prefill_grid<I>(&self, prefills: I, d: &DecodeTerms) -> PrefillGrid
    where
        I: Iterator<Item = (u64, u64)> + Clone,
    {
        let (heads, rows, sms) = (
            self.heads_per_gpu as u64,
            self.prefill_tile_rows,
            self.sm_count,
        );
        let mut grid = PrefillGrid::of(prefills.clone(), heads, rows, sms);
        let in_the_grid = grid.waves > 0 || self.unpacked_decodes;
        if let (Some(k), true) = (self.mixed_kernels, d.decodes > 0.0 && in_the_grid) {
            let context = d.context / d.decodes;
            let mma = self.attention_flops_per_ns;
            grid.mixed_working_clocks = k.working_clocks(prefills, d.decodes as u64, context, mma);
        }
        grid
    }

    /// [`Roofline::step`] of a batch of `lead`'s decodes and nothing else (`lead.count`
    /// items, attention on the GPU, the batch's own gate tokens), padded with `pad` dummy
    /// decodes and replayed from graphs if `graph_replayed` ([`BatchDesc::graph_replayed`]):
    /// the same totals, from the sums alone. `None` for an empty lead, and where the
    /// sums would not be exact (`step` then sums the items one by one).
    #[inline]
    pub fn decode_step(&self, lead: DecodeLead, pad: u32, graph_replayed: bool) -> Option<Step> {
        let n = lead.count as u64;
        let tokens = n + u64::from(pad);
        let sums = (n, lead.kv_tokens, lead.longest);
        let d = DecodeTerms::exact(tokens, sums, lead.count, self.decode_rates())?;
        let seqs = lead.count as f64 + f64::from(pad);
        let grid = match self.unpacked_decodes {
            true => self.prefill_grid(std::iter::empty(), &d),
            false => PrefillGrid::default(),
        };
        (n > 0).then(|| self.step_of(d, seqs, tokens as f64, grid, graph_replayed))
    }

    /// What one decode's attention costs per KV token read and once.
    fn decode_rates(&self) -> DecodeRates {
        let (hpg, hd, fp) = (self.heads_per_gpu, self.head_dim, self.fp);
        DecodeRates {
            flops_per_token: 4.0 * hpg * hd,
            kv_row: self.kv_row(),
            query_bytes: 2.0 * hpg * hd * fp,
        }
    }

    /// KV bytes per token one GPU reads.
    fn kv_row(&self) -> f64 {
        self.kv_heads_per_gpu * self.head_dim * 2.0 * self.precision.kv
    }

    /// The step of `seqs` sequences (padding included) whose decodes' terms are `d`, whose
    /// experts' gate sees `gate` tokens and whose prefills' grid is `prefills`, replayed from
    /// CUDA graphs if `graph_replayed`.
    #[inline(always)]
    fn step_of(
        &self,
        d: DecodeTerms,
        seqs: f64,
        gate: f64,
        prefills: PrefillGrid,
        graph_replayed: bool,
    ) -> Step {
        let PrefillGrid {
            waves,
            longest_chunk,
            mixed_working_clocks,
        } = prefills;
        // A TPU's program runs at vLLM's padded token and request counts.
        let (tokens, seqs) = match &self.tpu {
            Some(_) => (tpu::padded_tokens(d.tokens), tpu::padded_requests(seqs)),
            None => (d.tokens, seqs),
        };
        Step {
            tokens,
            seqs,
            gate,
            prefill_flops: self.prefill_flops(waves),
            decode_skew_bytes: d.skew_bytes(self.kv_row()),
            decode: d.cost,
            decodes: d.decodes,
            decode_context: d.context,
            decode_longest: d.longest,
            query_tiles: longest_chunk.div_ceil(mixed::MIXED_TILE_ROWS) as f64,
            mixed_working_clocks,
            graph_replayed,
        }
    }

    /// The prefills' attention work as `waves` waves of KV tiles pay it ([`prefill_waves`]),
    /// FLOPs.
    #[inline]
    fn prefill_flops(&self, waves: u64) -> f64 {
        let (rows, sms) = (self.prefill_tile_rows, self.sm_count);
        (waves * PREFILL_KV_TILE * rows * sms.unwrap_or(1)) as f64 * self.head_dim * 4.0
    }

    /// Calls `visit(name, repeats, work)` for every layer of the step, in execution order:
    /// the token-wise layers, then those of its sequences.
    pub fn for_each_layer(&self, s: &Step, mut visit: impl FnMut(&'static str, u64, Work)) {
        self.for_each_token_layer(s, &mut visit);
        self.for_each_sequence_layer(s.seqs, visit);
    }

    /// [`Roofline::for_each_layer`] up to the final norm: the layers that read the step's
    /// tokens, gate tokens and attention work, never its sequence count (the price memo keys
    /// their total by the token counts alone, `memoised.rs`).
    pub fn for_each_token_layer(&self, s: &Step, mut visit: impl FnMut(&'static str, u64, Work)) {
        if self.tpu.is_some() {
            return self.for_each_tpu_token_layer(s, &mut visit);
        }
        let (t, h, fp) = (s.tokens, self.hidden, self.fp);
        let allreduce = self.allreduce_work(t, s.graph_replayed);
        let l = self.num_layers;

        visit("embedding", 1, kernel(0.0, 2.0 * t * h * fp));
        // vLLM's VocabParallelEmbedding: at TP > 1 each GPU looks up its vocabulary shard
        // (rows of other shards zeroed) and one all-reduce of `tokens × hidden` sums them.
        if let Some(work) = allreduce {
            visit(EMBEDDING_ALLREDUCE, 1, work);
        }
        self.visit_attention_half(s, &mut visit);
        if let Some(work) = allreduce {
            visit("allreduce", l, work);
        }
        visit("post_attention_layernorm", l, norm(t * h, h, fp));
        match self.mlp {
            Mlp::Dense { ffn_per_gpu: f } => {
                visit("gate_up_proj", l, linear(t, h, 2.0 * f, &self.precision));
                // SiLU of the gate times the up projection.
                visit(
                    "act_fn",
                    l,
                    row_kernel(5.0 * t * f, 3.0 * t * f * fp, t, Loads::Vector),
                );
                visit("down_proj", l, linear(t, f, h, &self.precision));
            }
            Mlp::Moe { .. } => self.visit_moe(s, &mut visit),
        }
        if let Some(work) = allreduce {
            visit("allreduce", l, work);
        }
        visit("final_layernorm", 1, norm(t * h, h, fp));
    }

    /// The last layers of a step of `seqs` sequences (padding included), which read nothing
    /// else of it: the LM head, the logits' gather and the sampler.
    pub fn for_each_sequence_layer(
        &self,
        seqs: f64,
        mut visit: impl FnMut(&'static str, u64, Work),
    ) {
        if self.tpu.is_some() {
            return self.for_each_tpu_sequence_layer(seqs, &mut visit);
        }
        let (h, fp) = (self.hidden, self.fp);
        // One logit row per sequence.
        visit("lm_head", 1, gemm(seqs, h, self.vocab_per_gpu, fp));
        if let Some(work) = self.logits_all_gather_work(seqs) {
            visit(LOGITS_ALLGATHER, 1, work);
        }
        visit("sampler", 1, kernel(0.0, seqs * self.vocab_per_gpu * 4.0));
    }

    /// All-reduce of the full `tokens × hidden` activation: over the instance's link when the
    /// run names one, on the path vLLM takes on that link's hardware (its peer-memory kernel
    /// on NVSwitch, else the ring as the ASTRA-Sim fork prices it, staged through host memory
    /// on GPUs without peer access: [`crate::latency::host_staged`]) with the GPU copies vLLM
    /// makes around it in a step replayed from graphs if `graph_replayed` or not
    /// ([`Collectives::tp_all_reduce_step_ns`]); else the datasheet's ring alone (its network
    /// priced elsewhere, by ASTRA-Sim's own config).
    fn allreduce_work(&self, tokens: f64, graph_replayed: bool) -> Option<Work> {
        let (h, fp) = (self.hidden, self.fp);
        match self.tp_collectives {
            Some(c) => Some(Work::Comm {
                ns: c.tp_all_reduce_step_ns(tokens as u64, h as u64, fp as u64, graph_replayed)
                    as f64,
            }),
            None => self.allreduce.map(|ring| Work::Comm {
                ns: tokens * h * fp * ring.ns_per_byte + ring.fixed_ns,
            }),
        }
    }

    /// Ring all-gather of the logits' vocabulary shards, `seqs × vocab / tp` values from each
    /// GPU: `tp − 1` steps of one shard, over the same link as [`Roofline::allreduce_work`]
    /// (half the all-reduce's steps and bytes without one).
    fn logits_all_gather_work(&self, seqs: f64) -> Option<Work> {
        let shard = seqs * self.vocab_per_gpu * self.fp;
        match self.tp_collectives {
            Some(c) => c.tp_link.map(|link| Work::Comm {
                ns: link.all_gather_ns(c.tp, shard as u64) as f64,
            }),
            None => self.allreduce.map(|ring| Work::Comm {
                ns: 0.5 * (shard * ring.ranks * ring.ns_per_byte + ring.fixed_ns),
            }),
        }
    }

    /// The attention half of a decoder layer: norm, QKV projection (and QK norm), rotary
    /// embedding, attention and the output projection.
    fn visit_attention_half(&self, s: &Step, visit: &mut impl FnMut(&'static str, u64, Work)) {
        let (t, h, fp, l) = (s.tokens, self.hidden, self.fp, self.num_layers);
        visit("input_layernorm", l, norm(t * h, h, fp));
        visit(
            "qkv_proj",
            l,
            linear(t, h, self.q_out + 2.0 * self.kv_out, &self.precision),
        );
        let qk = t * (self.q_out + self.kv_out);
        if self.qk_norm {
            // Q and K normalised per head: a row (thread block) per head of each token, one
            // weight per Q and K.
            visit("qk_norm", l, qk_norm(qk, self.head_dim, fp));
        }
        // Rotates Q and K in place and gathers one cos/sin row per token.
        visit(
            "rotary_emb",
            l,
            row_kernel(
                3.0 * qk,
                (2.0 * qk + t * self.head_dim) * fp,
                t,
                Loads::Scalar,
            ),
        );
        if let Some(work) = self.attention_work(s) {
            visit("attention", l, work);
        }
        visit("o_proj", l, linear(t, self.q_out, h, &self.precision));
    }

    /// The attention layer's work; `None` when it has nothing to compute (only with decode
    /// attention offloaded). The only layer that reads more of a step than its token counts
    /// (see `token_memo.rs`).
    fn attention_work(&self, s: &Step) -> Option<Work> {
        let work = AttentionWork {
            prefill_flops: s.prefill_flops,
            decode: s.decode,
            decodes: s.decodes,
            context: s.decode_context / s.decodes.max(1.0),
            longest: s.decode_longest,
            skew_bytes: s.decode_skew_bytes,
            query_tiles: s.query_tiles,
            mixed_working_clocks: s.mixed_working_clocks,
        };
        (s.prefill_flops > 0.0 || s.decode != Cost::default()).then_some(Work::Attention(work))
    }

    /// The MoE block: router, expert-parallel dispatch, the grouped expert GEMMs and the
    /// combine. Does nothing for a dense model.
    fn visit_moe(&self, s: &Step, visit: &mut impl FnMut(&'static str, u64, Work)) {
        let Mlp::Moe {
            experts,
            top_k,
            ep,
            group,
            expert_bytes,
            width,
            flops_per_token_expert,
        } = self.mlp
        else {
            return;
        };
        let (t, h, fp, l) = (s.tokens, self.hidden, self.fp, self.num_layers);
        visit("router", l, gemm(t, h, experts, fp));
        if self.sparsemixer {
            visit("sparsemixer", l, sparsemixer(t, experts, fp));
        }
        let comm = self.expert_comm.map(|(c, shape)| {
            let (dispatch, combine) = c.ep_dispatch_combine_ns(t as u64, &shape);
            (
                Work::Comm {
                    ns: dispatch as f64,
                },
                Work::Comm { ns: combine as f64 },
            )
        });
        if let Some((dispatch, _)) = comm {
            visit("ep_dispatch", l, dispatch);
        }
        // Expected distinct experts of this GPU hit by the tokens at the gate (the whole DP
        // group's, gathered by the dispatch), each choosing `top_k`; a grouped GEMM over its
        // share of the routed rows of the group's `group × t` padded tokens (act_fn fused).
        let active = experts / ep * (1.0 - (1.0 - top_k / experts).powf(s.gate));
        let routed = group * t * top_k / ep;
        // The routed rows read and written; on FP8 experts read in one byte.
        let activations = if self.precision.fp8 {
            routed * h * (self.precision.weights + fp)
        } else {
            2.0 * routed * h * fp
        };
        // vLLM quantizes the local tokens before the dispatch and every routed row of the
        // group's after the activation.
        let quant = self
            .precision
            .fp8
            .then(|| moe_quantizations(t, h, group * t * top_k, width));
        let tile = self.moe_tile(group * t, experts / ep);
        let cost = Cost {
            flops: moe_mma_rows(tile, active, routed) * flops_per_token_expert,
            bytes: active * expert_bytes + activations,
        };
        let (up, down, share) = self.moe_stream_shares(tile, active, routed, width);
        let launch = MoeLaunch {
            tokens: group * t,
            experts,
            top_k,
            active,
            routed,
            up_columns: 2.0 * width,
            down_columns: h,
        };
        // Gate and up hold two thirds of an expert's weights, down one third.
        let streamed_bytes =
            active * expert_bytes * (2.0 / 3.0 / up + 1.0 / 3.0 / down) + activations / share;
        visit(
            "experts",
            l,
            Work::Experts {
                cost,
                streamed_bytes,
                idle_blocks: moe_grid::idle_blocks(&launch, (tile.rows, tile.columns)),
                quant,
            },
        );
        if let Some((_, combine)) = comm {
            visit("ep_combine", l, combine);
        }
    }

    /// The tile vLLM runs `tokens` rows entering the kernel of this GPU's `experts` on: the
    /// tuned file's entry nearest the tokens where a file is for this shape and part, else
    /// the default.
    fn moe_tile(&self, tokens: f64, experts: f64) -> MoeTile {
        match self.moe_tuned.and_then(|t| moe_tuned::nearest(t, tokens)) {
            Some(tuned) => moe_tuned_tile(tuned, self.precision.weights),
            None => moe_default_tile(tokens, experts),
        }
    }

    /// Shares of the fused-MoE bandwidth at which its gate-and-up and its down GEMM stream
    /// their weights on `tile`, and the tile's own share (the default large tile's bytes per
    /// SM per clock, [`MOE_LARGE_TILE_BYTES_PER_CLOCK`]; else 1) at which the routed rows
    /// stream: each GEMM's thread blocks over the blocks that saturate the part with the
    /// tile's bytes in flight ([`MOE_LATENCY_CLOCKS`]), at most 1, times the tile's share.
    /// `active` experts of this GPU are hit by `routed` rows.
    fn moe_stream_shares(
        &self,
        tile: MoeTile,
        active: f64,
        routed: f64,
        width: f64,
    ) -> (f64, f64, f64) {
        let own = if tile.capped {
            self.moe_large_tile_share
        } else {
            1.0
        };
        if self.moe_saturating_blocks <= 0.0 || active <= 0.0 {
            return (own, own, own);
        }
        let saturating =
            self.moe_saturating_blocks * MOE_BLOCK_BYTES_IN_FLIGHT / tile.bytes_in_flight;
        let tile_rows = active * (routed / active / tile.rows).ceil().max(1.0);
        let share = |n: f64| (tile_rows * (n / tile.columns).ceil() / saturating).min(1.0);
        (own * share(2.0 * width), own * share(self.hidden), own)
    }

    /// Unrounded time of a GEMM whose MMA work runs at `flops_per_ns`, its launch included,
    /// ns.
    fn gemm_ns(&self, c: Cost, flops_per_ns: f64) -> f64 {
        self.gemm_mma_ns(c.flops / flops_per_ns, c.bytes, GEMM_UNHIDDEN)
    }

    /// [`Roofline::gemm_ns`] of a GEMM whose MMA work takes `compute` ns, moving `bytes`, the
    /// shorter of the two `unhidden` by the longer.
    fn gemm_mma_ns(&self, compute: f64, bytes: f64, unhidden: f64) -> f64 {
        let memory = bytes / self.gemm_bytes_per_ns;
        let busy = compute.max(memory) + unhidden * compute.min(memory);
        (self.gemm_fixed_ns + busy + self.launch_ns).max(KERNEL_FLOOR_NS)
    }

    /// Time of per-tensor FP8 quantizations ([`TensorQuant`]), ns: each a memset of its
    /// scale (the least time of a kernel) and its two row kernels ([`Roofline::quant_ns`]),
    /// each rounded as a layer.
    fn tensor_quant_ns(&self, quant: [TensorQuant; 2]) -> f64 {
        let memset = self.layer_ns(kernel(0.0, 4.0)) as f64;
        let kernels = quant.iter().flat_map(|q| q.row_kernels(self.fp));
        quant.len() as f64 * memset + kernels.map(|k| self.quant_ns(k) as f64).sum::<f64>()
    }

    /// Time of an FP8 quantization's row kernel `work`, ns, launch included: priced as a row
    /// kernel with the quantization's L2 rate ([`rows::RowKernels::quant_ns`]), or as any
    /// kernel on a part without SM figures.
    fn quant_ns(&self, work: Work) -> Nanos {
        match (work, self.row_kernels) {
            (Work::Rows { cost, rows, loads }, Some(k)) => {
                rounded(k.quant_ns(cost.bytes, rows, loads, self.bytes_per_ns) + self.launch_ns)
            }
            (Work::Rows { cost, .. }, None) => self.layer_ns(Work::Kernel(cost)),
            (other, _) => self.layer_ns(other),
        }
    }

    /// Unrounded time of a roofline-priced cost, without launch overhead, ns.
    fn roofline_ns(&self, cost: Cost) -> f64 {
        (cost.flops / self.flops_per_ns).max(cost.bytes / self.bytes_per_ns)
    }

    /// The decodes' part of an attention launch, ns: their KV at the decode efficiency, or,
    /// next to a prefill (`mixed`), per query head at [`MIXED_DECODE_EFFICIENCY`]; plus
    /// [`DECODE_SKEW_ALPHA`] of the reads a skewed batch's longest contexts add.
    fn decode_attention_ns(
        &self,
        decode: Cost,
        decodes: f64,
        context: f64,
        skew_bytes: f64,
        mixed: bool,
    ) -> f64 {
        if !mixed {
            return self.decode_kv_ns(decode, skew_bytes);
        }
        // KV bytes per query head: the rate per KV byte is the table's over the GQA group
        // size.
        let group = self.heads_per_gpu / self.kv_heads_per_gpu;
        let bw = self.peak_bytes_per_ns
            * mixed_decode_efficiency(decodes * self.heads_per_gpu, context)
            / group;
        decode.bytes / bw + DECODE_SKEW_ALPHA * skew_bytes / bw
    }

    /// [`Roofline::decode_attention_ns`] of decodes alone: their KV at the decode efficiency,
    /// plus [`DECODE_SKEW_ALPHA`] of the reads a skewed batch's longest contexts add.
    #[inline]
    fn decode_kv_ns(&self, decode: Cost, skew_bytes: f64) -> f64 {
        let bw = self.attention_bytes_per_ns;
        let ns = (decode.flops / self.attention_flops_per_ns).max(decode.bytes / bw);
        ns + DECODE_SKEW_ALPHA * skew_bytes / bw
    }

    /// Unrounded time of attention launch `a` whose decodes' launch takes `fixed` ns besides
    /// their KV ([`Roofline::decode_fixed_ns`] for decodes alone, else
    /// [`ATTENTION_FIXED_NS`]); a mixed launch on a part with [`MixedKernels`] is its prefills'
    /// price and what its decodes add ([`Roofline::mixed_decodes_ns`]), and so is a launch of
    /// decodes alone where they run unpacked (`unpacked_decodes`), its prefills' price nil.
    #[inline]
    fn attention_ns(&self, a: &AttentionWork, fixed: f64) -> f64 {
        let prefill_ns = a.prefill_flops / self.attention_flops_per_ns;
        let mixed = a.prefill_flops > 0.0;
        if a.decode == Cost::default() {
            PREFILL_ATTENTION_FIXED_NS + prefill_ns
        } else if let (true, Some(k)) = (mixed || self.unpacked_decodes, self.mixed_kernels) {
            PREFILL_ATTENTION_FIXED_NS + prefill_ns + self.mixed_decodes_ns(a, k)
        } else {
            let decode =
                self.decode_attention_ns(a.decode, a.decodes, a.context, a.skew_bytes, mixed);
            fixed + prefill_ns + decode
        }
    }

    /// What the decodes of mixed launch `a` add to it on `k`'s part ([`MixedKernels`]), ns,
    /// plus [`DECODE_SKEW_ALPHA`] of the reads a skewed
    /// batch's longest contexts add at the decode KV bandwidth.
    fn mixed_decodes_ns(&self, a: &AttentionWork, k: MixedKernels) -> f64 {
        let d = MixedDecodes {
            decodes: a.decodes,
            context: a.context,
            query_tiles: a.query_tiles,
            working_clocks: a.mixed_working_clocks,
        };
        let bw = self.attention_bytes_per_ns;
        k.decodes_ns(d, bw) + DECODE_SKEW_ALPHA * a.skew_bytes / bw
    }

    /// The fixed time of a launch of `decodes` decodes alone, the longest reading `longest`
    /// KV tokens: its kernels and waves ([`DecodeKernels::fixed_ns`]), or
    /// [`ATTENTION_FIXED_NS`] on a part without `sm_count` or `sm_clock_mhz`.
    #[inline]
    fn decode_fixed_ns(&self, decodes: f64, longest: f64) -> f64 {
        match self.decode_kernels {
            Some(k) => k.fixed_ns(decodes as u64, longest as u64),
            None => ATTENTION_FIXED_NS,
        }
    }

    /// [`Roofline::decode_fixed_ns`] of a pure-decode launch of `decodes` decodes whose
    /// longest reads `longest` KV tokens: `kept`'s when it holds for the launch's grid, else
    /// worked out and kept.
    #[inline]
    fn kept_decode_fixed_ns(
        &self,
        decodes: u64,
        longest: u64,
        kept: &mut Option<DecodeFixed>,
    ) -> f64 {
        if let Some(k) = kept
            && k.decodes == decodes
            && (k.first..=k.last).contains(&longest)
        {
            return k.ns;
        }
        let ns = self.decode_fixed_ns(decodes as f64, longest as f64);
        let (first, last) = self
            .decode_kernels
            .map_or((0, u64::MAX), |k| k.same_grid(longest));
        *kept = Some(DecodeFixed {
            decodes,
            first,
            last,
            ns,
        });
        ns
    }

    /// Time of one occurrence of a layer, rounded to the nearest ns, at least 1 ns.
    ///
    /// Inlined into its callers in other codegen units (a per-step call otherwise).
    #[inline]
    pub fn layer_ns(&self, work: Work) -> Nanos {
        let ns = match work {
            Work::Kernel(cost) => (self.roofline_ns(cost) + self.launch_ns).max(KERNEL_FLOOR_NS),
            Work::Rows { cost, rows, loads } => match self.row_kernels {
                Some(k) => k.ns(cost.bytes, rows, loads, self.bytes_per_ns) + self.launch_ns,
                None => (self.roofline_ns(cost) + self.launch_ns).max(KERNEL_FLOOR_NS),
            },
            Work::Gemm(c) => self.gemm_ns(c, self.gemm_flops_per_ns),
            Work::Fp8Gemm {
                gemm,
                quant,
                tokens,
                depth,
                outputs,
            } => {
                let quant_ns = self.quant_ns(Work::Rows {
                    cost: quant,
                    rows: tokens,
                    loads: Loads::Vector,
                });
                let (compute, unhidden) = self.fp8_gemms.mma_ns(tokens, depth, outputs);
                self.gemm_mma_ns(compute, gemm.bytes, unhidden) + quant_ns as f64
            }
            Work::Attention(a) if self.tpu.is_some() => {
                (self.tpu.as_ref()).map_or(0.0, |t| t.attention_ns(&a, self.kv_row()))
            }
            Work::Attention(a) => {
                let fixed = if a.pure_decode() {
                    self.decode_fixed_ns(a.decodes, a.longest)
                } else {
                    ATTENTION_FIXED_NS
                };
                self.attention_ns(&a, fixed)
            }
            Work::Experts {
                cost: c,
                streamed_bytes,
                idle_blocks,
                quant,
            } => {
                let (compute, memory) = (
                    c.flops / self.moe_flops_per_ns,
                    streamed_bytes / self.moe_bytes_per_ns,
                );
                let idle = idle_blocks * self.moe_idle_ns_per_block;
                let experts =
                    MOE_FIXED_NS + compute.max(memory) + MOE_UNHIDDEN * compute.min(memory) + idle;
                match quant {
                    Some(quant) => experts + self.tensor_quant_ns(quant),
                    None => experts,
                }
            }
            Work::Kernels { count, each } => {
                count * (self.roofline_ns(each) + self.launch_ns).max(KERNEL_FLOOR_NS)
            }
            Work::Comm { ns } => ns,
            // Emitted only on a TPU.
            Work::Tpu(op) => self.tpu.as_ref().map_or(0.0, |t| t.op_ns(op)),
        };
        rounded(ns)
    }
}

/// A layer occurrence's time `ns` rounded to the nearest nanosecond (halves away from zero,
/// as [`f64::round`]; beyond `Nanos` saturated, as `as` casts), at least 1 ns.
///
/// Without a call: `f64::round` is one into libm on the baseline x86-64 target (no SSE4.1),
/// a few per cent of a decode-heavy run's samples. The cast truncates; the fraction left is
/// exact (`ns` and its whole part are within a factor of two, or `ns` is below 1), and from
/// 2^52 up every `f64` is whole, so the fraction is 0. From 0 up to 2^63 the casts go through
/// `i64`, which gives the same numbers: one instruction each on that target, where `u64`'s
/// take several and a saturation check.
#[inline]
pub fn rounded(ns: f64) -> Nanos {
    if (0.0..SIGNED_CASTS).contains(&ns) {
        let whole = ns as i64;
        let up = ns - whole as f64 >= 0.5;
        return (whole as Nanos + Nanos::from(up)).max(1);
    }
    let whole = ns as Nanos;
    let up = ns - whole as f64 >= 0.5;
    whole.saturating_add(Nanos::from(up)).max(1)
}

/// 2^63: the times below it [`rounded`] casts through `i64`.
const SIGNED_CASTS: f64 = 9_223_372_036_854_775_808.0;

impl LatencyBackend for Roofline {
    fn name(&self) -> &'static str {
        "roofline"
    }

    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        let step = self.step(batch)?;
        let mut total: Nanos = 0;
        self.for_each_layer(&step, |_, repeats, work| {
            total += repeats * self.layer_ns(work)
        });
        Ok(total)
    }

    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        let step = self.step(batch)?;
        out.clear();
        self.for_each_layer(&step, |name, repeats, work| {
            out.push(LayerTiming {
                name,
                repeats,
                time_ns: self.layer_ns(work),
                is_comm: matches!(work, Work::Comm { .. }),
            });
        });
        Ok(())
    }

    fn step_parts(&mut self, batch: &BatchDesc<'_>) -> Result<StepParts, LatencyError> {
        let step = self.step(batch)?;
        let mut parts = StepParts::default();
        self.for_each_layer(&step, |name, repeats, work| {
            add_to_parts(&mut parts, name, repeats, self.layer_ns(work));
        });
        Ok(parts)
    }
}

/// Adds layer `name`, `repeats` times `ns`, to the prologue, one block or the head of `parts`.
fn add_to_parts(parts: &mut StepParts, name: &str, repeats: u64, ns: Nanos) {
    match name {
        "embedding" | EMBEDDING_ALLREDUCE => parts.prologue_ns += repeats * ns,
        "final_layernorm" | "lm_head" | LOGITS_ALLGATHER | "sampler" => {
            parts.head_ns += repeats * ns
        }
        _ => parts.block_ns += ns,
    }
}
