//! The decodes of a mixed batch (prefill chunks and decodes in one varlen attention launch)
//! as vLLM's FlashAttention-2 launch runs them: the grid's working and idle thread blocks.
//!
//! On the parts with mixed-batch tables (RTX 4090, RTX PRO 6000) vLLM 0.19 picks FLASH_ATTN
//! (`_get_backend_priorities` in `vllm/platforms/cuda.py`, vllm-project/vllm 0084b78: FlashInfer
//! first only on compute capability 10), FlashAttention-2 there. With a query of more than one
//! token, `mha_varlen_fwd` (vllm-project/flash-attention 617264c,
//! `csrc/flash_attn/flash_api.cpp`) packs no GQA group and, with a paged KV cache, takes no
//! split of the KV (vLLM passes `num_splits` 0 without CUDA graphs), but runs the split-KV
//! kernel on a grid of ceil(longest query / 64) query tiles × sequences × query heads
//! (`run_mha_fwd_splitkv_dispatch`). So each decode has, per query head, one working block, a
//! whole 64-row query tile (one row used) computed against its KV head's cache like a prefill
//! tile, and one block per further query tile of the grid that finds no rows and returns
//! (`compute_attn_1rowblock_splitkv`).
//!
//! Hopper, where vLLM runs FlashAttention-3 (another grid: its own scheduler and GQA packing),
//! keeps `MIXED_DECODE_EFFICIENCY`. Every constant is another kernel's: an idle block takes
//! one memory latency (`MOE_LATENCY_CLOCKS`: it reads the sequence lengths, then returns), a
//! wave of working blocks a pure-decode wave's clocks ([`DECODE_WAVE_CLOCKS`]) and its tiles'
//! MMA work at the prefill efficiency, and their KV streams from DRAM at the decode
//! efficiency. Held out, the mixed tables' median error went from 28.5% to 19.6% (accuracy
//! guide, "Mixed batches by their kernel").

use super::MOE_LATENCY_CLOCKS;
use super::decode::{DECODE_WAVE_CLOCKS, DecodeKernels};
use crate::config::Hardware;

/// Query rows of the varlen kernel's tile (`kBlockM`): a decode's working block and the
/// grid's query tiles per sequence.
pub const MIXED_TILE_ROWS: u64 = 64;

/// What prices a mixed batch's decodes on one part.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MixedKernels {
    /// Thread blocks the SMs hold at once.
    slots: f64,
    /// SM clocks per ns.
    clocks_per_ns: f64,
    q_heads: f64,
    kv_heads: f64,
    /// KV bytes of one token and one KV head (K and V).
    head_bytes: f64,
    /// MMA FLOPs of one query tile against one KV tile.
    tile_flops: f64,
    /// KV tokens per KV tile.
    kv_tile: f64,
    /// The part's L2, bytes (`None`: not known; the re-reads then miss unless run together).
    l2_bytes: Option<f64>,
}

/// The shape of one mixed launch's decodes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MixedDecodes {
    /// Decodes in the launch.
    pub decodes: f64,
    /// Their mean context, KV tokens.
    pub context: f64,
    /// The grid's query tiles per sequence and head: the longest query's.
    pub query_tiles: f64,
}

impl MixedKernels {
    /// The mixed launch of a model with `kv_heads` and `heads` query heads per GPU of
    /// `head_dim` in `fp`-byte values, on `hardware` whose pure-decode launches `decode`
    /// prices, with prefill tiles of `tile_rows` rows against KV tiles of `kv_tile` tokens.
    pub fn new(
        hardware: &Hardware,
        decode: &DecodeKernels,
        (kv_heads, heads, head_dim): (u64, u64, u64),
        fp: f64,
        (tile_rows, kv_tile): (u64, u64),
    ) -> Self {
        let head_dim = head_dim as f64;
        MixedKernels {
            slots: decode.slots() as f64,
            clocks_per_ns: decode.clocks_per_ns(),
            q_heads: heads.max(1) as f64,
            kv_heads: kv_heads.max(1) as f64,
            head_bytes: 2.0 * head_dim * fp,
            tile_flops: 4.0 * (tile_rows * kv_tile) as f64 * head_dim,
            kv_tile: kv_tile as f64,
            l2_bytes: hardware.l2_cache_mb.map(|mb| mb * 1e6),
        }
    }

    /// Time the decodes `d` add to their launch, ns: the idle blocks' memory latency over the
    /// slots, then the longer of the working blocks' waves (each [`DECODE_WAVE_CLOCKS`] and
    /// one tile's MMA work over the KV tiles of the mean context at `mma_flops_per_ns` per
    /// part) and their KV from DRAM at `dram_bytes_per_ns`.
    pub fn decodes_ns(
        &self,
        d: MixedDecodes,
        mma_flops_per_ns: f64,
        dram_bytes_per_ns: f64,
    ) -> f64 {
        let idle = (d.query_tiles - 1.0).max(0.0) * d.decodes * self.q_heads;
        let idle_ns = idle * MOE_LATENCY_CLOCKS / (self.slots * self.clocks_per_ns);
        let waves = (d.decodes * self.q_heads / self.slots).ceil();
        let kv_tiles = (d.context / self.kv_tile).ceil();
        let wave_ns = DECODE_WAVE_CLOCKS / self.clocks_per_ns
            + self.slots * kv_tiles * self.tile_flops / mma_flops_per_ns;
        let dram_ns = self.dram_bytes(d) / dram_bytes_per_ns;
        idle_ns + (waves * wave_ns).max(dram_ns)
    }

    /// KV bytes the working blocks read from DRAM: each KV head's once while a GQA group's
    /// blocks run together (the group's next head's blocks start one sequence count of blocks
    /// later) or one head's KV of every sequence fits L2, else once per query head.
    fn dram_bytes(&self, d: MixedDecodes) -> f64 {
        let sequences = d.decodes + 1.0;
        let head_set = d.context * self.head_bytes;
        let group = (self.q_heads / self.kv_heads).floor();
        let together = sequences * (group - 1.0) < self.slots;
        let fits = self.l2_bytes.is_some_and(|l2| sequences * head_set <= l2);
        let heads = if together || fits {
            self.kv_heads
        } else {
            self.q_heads
        };
        d.decodes * head_set * heads
    }
}
