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
//! A working block computes whole KV tiles of the split kernel's `kBlockN` (128 tokens at head
//! dimension 128, as a pure decode's, [`decode::kv_block`]), its last one masked, over the
//! decode's cache and its new token. The grid issues its blocks in blockIdx order, query tile
//! fastest and query head slowest (`run_flash_splitkv_fwd`'s `dim3 grid(num_m_block, b, h)`),
//! so each head's decode blocks are issued among its prefill's: they first take the slots the
//! prefill's blocks leave free, for as long as the prefill runs, and only the rest add waves.
//!
//! Hopper, where vLLM runs FlashAttention-3 (another grid: its own scheduler and GQA packing),
//! keeps `MIXED_DECODE_EFFICIENCY`. Every constant is another kernel's: an idle block takes
//! one memory latency (`MOE_LATENCY_CLOCKS`: it reads the sequence lengths, then returns), a
//! working block a pure-decode further wave's clocks ([`DECODE_WAVE_CLOCKS`]) and its tiles'
//! MMA work at the prefill efficiency, and their KV streams from DRAM at the decode
//! efficiency. Held out, the mixed tables' median error went from 19.6% to 7.0% (accuracy
//! guide, "Mixed batches by their kernel").

use super::MOE_LATENCY_CLOCKS;
use super::decode::{self, DECODE_WAVE_CLOCKS, DecodeKernels};
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
    /// The part's L2, bytes (`None`: not known; the group's reads are then counted by the
    /// blocks in flight alone).
    l2_bytes: Option<f64>,
}

/// The shape of one mixed launch's decodes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MixedDecodes {
    /// Decodes in the launch.
    pub decodes: f64,
    /// Their mean KV tokens read (cache and new token).
    pub context: f64,
    /// The grid's query tiles per sequence and head: the longest query's.
    pub query_tiles: f64,
    /// The prefills' query tiles per head: the grid's blocks with prefill rows, per head.
    pub prefill_query_tiles: f64,
}

impl MixedKernels {
    /// The mixed launch of a model with `kv_heads` and `heads` query heads per GPU of
    /// `head_dim` in `fp`-byte values, on `hardware` whose pure-decode launches `decode`
    /// prices: query tiles of [`MIXED_TILE_ROWS`] rows against the split kernel's KV tiles.
    pub fn new(
        hardware: &Hardware,
        decode: &DecodeKernels,
        (kv_heads, heads, head_dim): (u64, u64, u64),
        fp: f64,
    ) -> Self {
        let kv_tile = decode::kv_block(head_dim);
        let head_dim = head_dim as f64;
        MixedKernels {
            slots: decode.slots() as f64,
            clocks_per_ns: decode.clocks_per_ns(),
            q_heads: heads.max(1) as f64,
            kv_heads: kv_heads.max(1) as f64,
            head_bytes: 2.0 * head_dim * fp,
            tile_flops: 4.0 * (MIXED_TILE_ROWS * kv_tile) as f64 * head_dim,
            kv_tile: kv_tile as f64,
            l2_bytes: hardware.l2_cache_mb.map(|mb| mb * 1e6),
        }
    }

    /// Time the decodes `d` add to their launch, whose prefills take `prefill_ns`, ns: the
    /// idle blocks' memory latency over the slots, then the longer of the working blocks
    /// (`working_ns`, below) and their KV from DRAM; `rates` are the MMA FLOPs and
    /// DRAM bytes per ns of the part.
    pub fn decodes_ns(&self, d: MixedDecodes, prefill_ns: f64, rates: (f64, f64)) -> f64 {
        let (mma_flops_per_ns, dram_bytes_per_ns) = rates;
        let idle = (d.query_tiles - 1.0).max(0.0) * d.decodes * self.q_heads;
        let idle_ns = idle * MOE_LATENCY_CLOCKS / (self.slots * self.clocks_per_ns);
        let block_ns = DECODE_WAVE_CLOCKS / self.clocks_per_ns
            + self.slots * (d.context / self.kv_tile).ceil() * self.tile_flops / mma_flops_per_ns;
        let dram_ns = self.dram_bytes(d) / dram_bytes_per_ns;
        idle_ns + self.working_ns(d, block_ns, prefill_ns).max(dram_ns)
    }

    /// What the working blocks of `d`, `block_ns` each, add to a prefill of `prefill_ns`: they
    /// take the slots the prefill's blocks leave free, as many rounds as fit in its time (at
    /// least one, which may outlast it), and the rest run in waves on every slot after it.
    fn working_ns(&self, d: MixedDecodes, block_ns: f64, prefill_ns: f64) -> f64 {
        let blocks = d.decodes * self.q_heads;
        let free = (self.slots - d.prefill_query_tiles * self.q_heads).max(0.0);
        let rounds = (prefill_ns / block_ns).floor().max(1.0);
        let beside = blocks.min(free * rounds);
        let busy = if beside > 0.0 {
            (beside / free).ceil() * block_ns
        } else {
            0.0
        };
        let after = ((blocks - beside) / self.slots).ceil();
        (busy - prefill_ns).max(0.0) + after * block_ns
    }

    /// KV bytes the working blocks read from DRAM: each KV head's once where one head's KV of
    /// every sequence fits L2, else once per window of the slots' blocks in flight that a GQA
    /// group's heads span (a sequence's blocks of consecutive heads are a sequence count of
    /// working blocks apart in blockIdx order, and heads in flight together share a read):
    /// group × sequences / slots reads, at least one and at most one per query head.
    fn dram_bytes(&self, d: MixedDecodes) -> f64 {
        let sequences = d.decodes + 1.0;
        let head_set = d.context * self.head_bytes;
        let group = (self.q_heads / self.kv_heads).floor();
        let fits = self.l2_bytes.is_some_and(|l2| sequences * head_set <= l2);
        let reads = if fits {
            1.0
        } else {
            (group * sequences / self.slots).min(group).max(1.0)
        };
        d.decodes * head_set * self.kv_heads * reads
    }
}
