//! Pure-decode attention as vLLM's FlashAttention backend launches it: the kernels of one
//! attention layer and the waves of the split-KV grid, priced in SM clocks.
//!
//! A batch of decodes runs FlashAttention's split-KV kernel. With one query token per
//! sequence the GQA group is packed into the rows of one 64-row query tile, so the grid has a
//! thread block per sequence, KV head and split of the KV; `num_splits_heuristic` picks the
//! splits (FlashAttention-2's `csrc/flash_attn/flash_api.cpp`, vLLM's fork). Each block
//! streams its split of the KV cache in tiles of [`kv_block`] tokens, and an SM holds as many
//! blocks as its shared memory fits query tiles with one K and one V tile. Around the kernel,
//! vLLM's FlashAttention-2 path (every part but Hopper) writes the new tokens' KV, copies the
//! query into the packed layout and the output back out (transposes: the query's is a view
//! with one sequence or one KV head) and, without splits, the softmax statistics likewise;
//! splits add the combine kernel. FlashAttention-3 (Hopper) packs the group inside the kernel:
//! the KV write, the kernel and, with splits, the combine.
//!
//! The constants are fitted per GPU by `scripts/derive_roofline.py` to its pure-decode rows
//! (each term in SM clocks, the KV at a share of peak bandwidth) and are the medians over the
//! GPUs: RTX 4090 and RTX PRO 6000 (LLMServingSim's bundles, vLLM 0.19's FlashAttention-2),
//! H200 (ours, PyTorch's SDPA: no small kernels); H800's FlashInfer rows (contexts of at most
//! 96 tokens) time the fixed part alone and are checked, not fitted. Held out, the median error
//! of pure-decode attention fell from 10.0% to 4.9% (accuracy guide, "Decode attention by its
//! kernels and waves").

use crate::config::Hardware;
use std::cell::Cell;

/// SM clocks of one small kernel beside the attention kernel (the KV-cache write, a
/// transposing copy): RTX 4090 6,777, RTX PRO 6000 4,991 (the median). Frontier's kernel-only
/// KV-cache writes take 4,392 clocks on H800 and 4,187 on RTX PRO 6000 (2.40 and 1.60 µs).
pub const DECODE_SMALL_CLOCKS: f64 = 5_880.0;
/// SM clocks of the attention kernel's first wave: H200 16,171 (SDPA, whatever it launches
/// around the kernel included), RTX 4090 10,473, RTX PRO 6000 12,022 (the median).
pub const DECODE_ATTENTION_CLOCKS: f64 = 12_020.0;
/// SM clocks of the split-KV combine kernel: H200 3,921, RTX 4090 6,009, RTX PRO 6000 9,518.
pub const DECODE_COMBINE_CLOCKS: f64 = 6_010.0;
/// SM clocks of each wave of the grid after the first: H200 447, RTX 4090 8,680, RTX PRO 6000
/// 6,100 (the median).
pub const DECODE_WAVE_CLOCKS: f64 = 6_100.0;

/// Query rows of the split-KV kernel's tile (`kBlockM`).
const TILE_ROWS: u64 = 64;
/// The most splits FlashAttention-2 makes of one block's KV.
const MAX_SPLITS: u64 = 128;

/// KV tokens per tile of the split-KV kernel at `head_dim` (`kBlockN` of
/// `run_mha_fwd_splitkv_dispatch`).
pub fn kv_block(head_dim: u64) -> u64 {
    match head_dim {
        0..=64 => 256,
        65..=128 => 128,
        _ => 64,
    }
}

/// Thread blocks of the split-KV kernel at `head_dim` one SM of `hardware` holds: its shared
/// memory (`shared_memory_per_sm_kib`) over a block's query tile and one K and one V tile,
/// 16-bit values (80 KiB at head dim 128); at least one, and one without the figure.
pub fn blocks_per_sm(hardware: &Hardware, head_dim: u64) -> u64 {
    let block_bytes = (TILE_ROWS + 2 * kv_block(head_dim)) * head_dim.max(1) * 2;
    let smem = hardware.shared_memory_per_sm_kib.map_or(0, u64::from) * 1024;
    (smem / block_bytes).max(1)
}

/// Splits of the KV FlashAttention-2 gives `blocks` thread blocks on `slots` resident blocks
/// when each block's KV is `kv_tiles` tiles long (`num_splits_heuristic`): none when the
/// blocks nearly fill the slots; else the fewest splits whose waves are at least 0.85 as full
/// as the fullest, counting only split counts that change the tiles per split.
///
/// Inlined into its callers in other codegen units (a per-step call otherwise).
#[inline]
pub fn num_splits(blocks: u64, slots: u64, kv_tiles: u64) -> u64 {
    // Answered before the memo: most decode batches fill the slots (the memo's entry is a
    // cache miss more than this comparison).
    if fills_slots(blocks, slots) {
        return 1;
    }
    let key = (blocks ^ kv_tiles.rotate_left(24) ^ slots.rotate_left(48))
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let slot = (key >> (64 - SPLITS_SEEN_BITS)) as usize;
    SPLITS_SEEN.with(|seen| {
        let [b, s, k, splits] = seen[slot].get();
        if splits != 0 && (b, s, k) == (blocks, slots, kv_tiles) {
            return splits;
        }
        let splits = search_splits(blocks, slots, kv_tiles);
        seen[slot].set([blocks, slots, kv_tiles, splits]);
        splits
    })
}

/// Bits of the index of [`SPLITS_SEEN`]: 1,024 entries of 32 bytes.
const SPLITS_SEEN_BITS: u32 = 10;

thread_local! {
    /// Split counts this thread computed, by their arguments (`[blocks, slots, kv_tiles,
    /// splits]` in the entry their hash picks, splits 0 while empty; a newer one replaces an
    /// older at the same entry). Every decode step asks for one, the instances' steps
    /// interleave, and the search takes up to twice [`MAX_SPLITS`] candidates: without the
    /// memo it was 40% of a long-prompt run's CPU (the Mooncake trace on 8 instances).
    static SPLITS_SEEN: [Cell<[u64; 4]>; 1 << SPLITS_SEEN_BITS] =
        const { [const { Cell::new([0; 4]) }; 1 << SPLITS_SEEN_BITS] };
}

/// [`num_splits`] searched for, for blocks that do not fill the slots (its caller has
/// answered those).
fn search_splits(blocks: u64, slots: u64, kv_tiles: u64) -> u64 {
    let top = MAX_SPLITS.min(slots).min(kv_tiles);
    let eligible = |s: u64| s == 1 || kv_tiles.div_ceil(s) != kv_tiles.div_ceil(s - 1);
    let fill = |s: u64| {
        let waves = (blocks * s) as f64 / slots as f64;
        waves / waves.ceil()
    };
    let best = (1..=top)
        .filter(|&s| eligible(s))
        .map(fill)
        .fold(0.0, f64::max);
    (1..=top)
        .find(|&s| eligible(s) && fill(s) >= 0.85 * best)
        .unwrap_or(1)
}

/// Whether `blocks` thread blocks nearly fill `slots` resident blocks: then there are no
/// splits.
fn fills_slots(blocks: u64, slots: u64) -> bool {
    blocks as f64 >= 0.8 * slots as f64
}

/// The split-KV grid of one pure-decode launch and the small kernels around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeGrid {
    /// Splits of each block's KV (1: no combine kernel).
    pub splits: u64,
    /// Waves of thread blocks over the blocks the SMs hold.
    pub waves: u64,
    /// Small kernels launched beside the attention kernel.
    pub small_kernels: u64,
}

/// What prices a pure-decode launch on one part: its SMs and clock, the blocks an SM holds,
/// the KV heads and query tiles per sequence on one GPU, and which kernel sequence it runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecodeKernels {
    sm_count: u64,
    /// Split-KV thread blocks one SM holds.
    blocks_per_sm: u64,
    /// SM clocks per ns.
    clocks_per_ns: f64,
    kv_heads: u64,
    /// Query tiles per sequence and KV head (the GQA group over [`TILE_ROWS`]).
    query_tiles: u64,
    kv_block: u64,
    /// FlashAttention-3's sequence (Hopper): no transposing copies.
    packs_in_kernel: bool,
}

impl DecodeKernels {
    /// The decode kernels of a model with `kv_heads` KV heads and `heads` query heads per GPU
    /// of `head_dim` on `hardware`; `None` without `sm_count` or `sm_clock_mhz` (the part
    /// then pays the roofline's fixed attention time). Without `shared_memory_per_sm_kib` an
    /// SM holds one block.
    pub fn new(hardware: &Hardware, kv_heads: u64, heads: u64, head_dim: u64) -> Option<Self> {
        let sm_count = u64::from(hardware.sm_count?);
        let clock_mhz = hardware.sm_clock_mhz?;
        let kv_block = kv_block(head_dim);
        let kv_heads = kv_heads.max(1);
        Some(DecodeKernels {
            sm_count,
            blocks_per_sm: blocks_per_sm(hardware, head_dim),
            clocks_per_ns: clock_mhz / 1e3,
            kv_heads,
            query_tiles: (heads / kv_heads).max(1).div_ceil(TILE_ROWS),
            kv_block,
            packs_in_kernel: hardware.is_hopper(),
        })
    }

    /// Thread blocks of the split-KV kernel the SMs hold at once.
    pub fn slots(&self) -> u64 {
        self.sm_count * self.blocks_per_sm
    }

    /// SM clocks per ns.
    pub fn clocks_per_ns(&self) -> f64 {
        self.clocks_per_ns
    }

    /// The grid of `decodes` sequences whose longest reads `longest` KV tokens.
    ///
    /// Inlined into its callers in other codegen units (a per-step call otherwise).
    #[inline]
    pub fn grid(&self, decodes: u64, longest: u64) -> DecodeGrid {
        let blocks = decodes * self.kv_heads * self.query_tiles;
        let splits = num_splits(blocks, 2 * self.sm_count, longest.div_ceil(self.kv_block));
        let waves = (blocks * splits).div_ceil(self.sm_count * self.blocks_per_sm);
        let small_kernels = if self.packs_in_kernel {
            1
        } else if decodes >= 2 && self.kv_heads >= 2 {
            // KV write, output copy, query copy and, without splits, the statistics' copy.
            3 + u64::from(splits == 1)
        } else {
            2
        };
        DecodeGrid {
            splits,
            waves,
            small_kernels,
        }
    }

    /// The longest KV reads, `first..=last`, whose launches of any number of decodes have the
    /// grid (and so the fixed time) of `longest`'s: those of as many KV tiles per thread block.
    pub fn same_grid(&self, longest: u64) -> (u64, u64) {
        match longest.div_ceil(self.kv_block) {
            0 => (0, 0),
            tiles => (
                (tiles - 1) * self.kv_block + 1,
                tiles.saturating_mul(self.kv_block),
            ),
        }
    }

    /// The launch's time other than its KV stream, ns.
    ///
    /// Inlined into its callers in other codegen units (a per-step call otherwise).
    #[inline]
    pub fn fixed_ns(&self, decodes: u64, longest: u64) -> f64 {
        let g = self.grid(decodes, longest);
        let combine = if g.splits > 1 {
            DECODE_COMBINE_CLOCKS
        } else {
            0.0
        };
        let clocks = g.small_kernels as f64 * DECODE_SMALL_CLOCKS
            + DECODE_ATTENTION_CLOCKS
            + combine
            + g.waves.saturating_sub(1) as f64 * DECODE_WAVE_CLOCKS;
        clocks / self.clocks_per_ns
    }
}
