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
//! Every working block, a prefill's or a decode's, is the same kernel's: a fixed time
//! ([`MIXED_BLOCK_CLOCKS`]) and whole KV tiles of the split kernel's `kBlockN` (128 tokens at
//! head dimension 128, [`decode::kv_block`]) at the prefill's clocks per tile, a prefill tile
//! up to its last row (causal), a decode's over its cache and new token. The grid issues its
//! blocks in blockIdx order, query tile fastest and query head slowest
//! (`run_flash_splitkv_fwd`'s `dim3 grid(num_m_block, b, h)`; the batch holds the prefill
//! before its decodes, as the profiler that timed the tables builds it), each block on the
//! first slot to come free: a list schedule. What the decodes add is that schedule's span less
//! the prefills' alone ([`MixedKernels::working_clocks`]): a decode block as long as the
//! prefill tile beside it adds nothing, and behind a long prefill tile the decode blocks
//! delay the later heads' prefill tiles.
//!
//! Hopper, where vLLM runs FlashAttention-3 (another grid: its own scheduler and GQA packing),
//! keeps `MIXED_DECODE_EFFICIENCY`. An idle block takes one memory latency
//! (`MOE_LATENCY_CLOCKS`: it reads the sequence lengths, then returns) and the working
//! blocks' KV streams from DRAM at the decode efficiency. Held out, the mixed tables' median
//! error went from 19.6% to 7.0% with the grid, and to 4.0% with the list schedule (accuracy
//! guide, "Mixed batches by their kernel", "The mixed launch as a list schedule").

use super::decode::{self, DecodeKernels};
use super::{MIXED_BLOCK_CLOCKS, MOE_LATENCY_CLOCKS};
use crate::config::Hardware;

/// Query rows of the varlen kernel's tile (`kBlockM`): a decode's working block and the
/// grid's query tiles per sequence.
pub const MIXED_TILE_ROWS: u64 = 64;

/// Block starts one list schedule takes at most. A larger grid is scheduled as every `k`-th
/// query head on `slots / k` slots: the heads' blocks are alike, so the span keeps its shape
/// (held out, 1,024 and 2,048 starts price the mixed tables alike, 4.0% and 4.1%).
const SCHEDULE_BLOCKS: u64 = 1024;

/// Slots a list schedule tracks at most (more than any part holds of this kernel's blocks:
/// 188 SMs of one each on RTX PRO 6000).
const MAX_SLOTS: usize = 1024;

/// What prices a mixed batch's decodes on one part.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MixedKernels {
    /// Thread blocks the SMs hold at once.
    slots: u64,
    /// SM clocks per ns.
    clocks_per_ns: f64,
    q_heads: u64,
    kv_heads: f64,
    /// KV bytes of one token and one KV head (K and V).
    head_bytes: f64,
    /// MMA FLOPs of one query tile against one KV tile.
    tile_flops: f64,
    /// KV tokens per KV tile.
    kv_tile: u64,
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
    /// SM clocks their working blocks add to the launch ([`MixedKernels::working_clocks`]).
    pub working_clocks: f64,
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
            slots: decode.slots(),
            clocks_per_ns: decode.clocks_per_ns(),
            q_heads: heads.max(1),
            kv_heads: kv_heads.max(1) as f64,
            head_bytes: 2.0 * head_dim * fp,
            tile_flops: 4.0 * (MIXED_TILE_ROWS * kv_tile) as f64 * head_dim,
            kv_tile,
            l2_bytes: hardware.l2_cache_mb.map(|mb| mb * 1e6),
        }
    }

    /// Time the decodes `d` add to their launch, ns: the idle blocks' memory latency over the
    /// slots, then the longer of the working blocks' clocks and their KV from DRAM at
    /// `dram_bytes_per_ns`.
    pub fn decodes_ns(&self, d: MixedDecodes, dram_bytes_per_ns: f64) -> f64 {
        let slots = self.slots as f64;
        let idle = (d.query_tiles - 1.0).max(0.0) * d.decodes * self.q_heads as f64;
        let idle_ns = idle * MOE_LATENCY_CLOCKS / (slots * self.clocks_per_ns);
        let dram_ns = self.dram_bytes(d) / dram_bytes_per_ns;
        idle_ns + (d.working_clocks / self.clocks_per_ns).max(dram_ns)
    }

    /// SM clocks `decodes` decodes reading `context` KV tokens each (mean) add to the working
    /// blocks' span beside `prefills` (`(chunk, prefix)`, in batch order), the part's MMA
    /// running at `mma_flops_per_ns`: the list schedule of the grid with them less without
    /// (module docs).
    pub fn working_clocks<I>(&self, prefills: I, decodes: u64, context: f64, mma: f64) -> f64
    where
        I: Iterator<Item = (u64, u64)> + Clone,
    {
        let tile = self.slots as f64 * self.tile_flops / mma * self.clocks_per_ns;
        let decode_tiles = (context / self.kv_tile as f64).ceil();
        let decode_block = (MIXED_BLOCK_CLOCKS + decode_tiles * tile).round() as u64;
        let grid = Grid {
            prefills,
            kv_tile: self.kv_tile,
            block: MIXED_BLOCK_CLOCKS,
            tile,
        };
        let with = grid.span(self.q_heads, self.slots, decodes, decode_block);
        let without = grid.span(self.q_heads, self.slots, 0, 0);
        with.saturating_sub(without) as f64
    }

    /// KV bytes the working blocks read from DRAM: each KV head's once where one head's KV of
    /// every sequence fits L2, else once per window of the slots' blocks in flight that a GQA
    /// group's heads span (a sequence's blocks of consecutive heads are a sequence count of
    /// working blocks apart in blockIdx order, and heads in flight together share a read):
    /// group × sequences / slots reads, at least one and at most one per query head.
    fn dram_bytes(&self, d: MixedDecodes) -> f64 {
        let sequences = d.decodes + 1.0;
        let head_set = d.context * self.head_bytes;
        let group = (self.q_heads as f64 / self.kv_heads).floor();
        let fits = self.l2_bytes.is_some_and(|l2| sequences * head_set <= l2);
        let reads = if fits {
            1.0
        } else {
            (group * sequences / self.slots as f64).min(group).max(1.0)
        };
        d.decodes * head_set * self.kv_heads * reads
    }
}

/// The working blocks of one query head of a mixed launch's grid: the prefills' query tiles,
/// then the decodes'.
struct Grid<I> {
    prefills: I,
    kv_tile: u64,
    /// SM clocks of a block besides its KV tiles, and of one KV tile.
    block: f64,
    tile: f64,
}

impl<I: Iterator<Item = (u64, u64)> + Clone> Grid<I> {
    /// SM clocks a prefill's query tile `m` takes: its KV tiles up to its last row.
    fn prefill_block(&self, (chunk, prefix): (u64, u64), m: u64) -> u64 {
        let last_row = ((m + 1) * MIXED_TILE_ROWS).min(chunk) + prefix;
        let tiles = last_row.div_ceil(self.kv_tile) as f64;
        (self.block + tiles * self.tile).round() as u64
    }

    /// End of the list schedule of `heads` heads' blocks, `decodes` decode blocks of
    /// `decode_block` clocks after each head's prefill tiles, on `slots` slots, SM clocks.
    /// Past [`SCHEDULE_BLOCKS`] block starts, every `k`-th head on `slots / k` slots.
    fn span(&self, heads: u64, slots: u64, decodes: u64, decode_block: u64) -> u64 {
        let tiles: u64 = self
            .prefills
            .clone()
            .map(|(c, _)| c.div_ceil(MIXED_TILE_ROWS))
            .sum();
        let k = (heads * (tiles + decodes)).div_ceil(SCHEDULE_BLOCKS).max(1);
        let heads = heads.div_ceil(k);
        let slots = (slots as f64 / k as f64)
            .round()
            .clamp(1.0, MAX_SLOTS as f64) as usize;
        let mut buffer = [0u64; 2 * MAX_SLOTS];
        let mut schedule = ListSchedule::new(&mut buffer, slots);
        for _ in 0..heads {
            for p in self.prefills.clone() {
                let tiles = 0..p.0.div_ceil(MIXED_TILE_ROWS);
                schedule.start_each(tiles.map(|m| self.prefill_block(p, m)));
            }
            schedule.start_many(decodes, decode_block);
        }
        schedule.end()
    }
}

/// The slots' free times of a list schedule, in ascending order, in a buffer of twice their
/// number: each block starts on the slot that comes free first, and its end moves the fewer
/// of the times before or after it. The last is the latest end of a block started on them.
pub struct ListSchedule<'a> {
    buffer: &'a mut [u64],
    /// Where the free times start in `buffer`, and their number.
    head: usize,
    slots: usize,
}

impl<'a> ListSchedule<'a> {
    /// A schedule on `slots` slots (at least one), free from the times in `buffer`'s first
    /// `slots`, which it sorts; `buffer` holds at least twice as many.
    pub fn new(buffer: &'a mut [u64], slots: usize) -> Self {
        assert!(
            slots > 0 && buffer.len() >= 2 * slots,
            "a list schedule needs a slot and a buffer of twice the slots"
        );
        buffer[..slots].sort_unstable();
        ListSchedule {
            buffer,
            head: 0,
            slots,
        }
    }

    /// The slots' free times, ascending.
    fn free(&mut self) -> &mut [u64] {
        &mut self.buffer[self.head..self.head + self.slots]
    }

    /// The latest end of a block started, SM clocks (the latest free time).
    pub fn end(&self) -> u64 {
        self.buffer[self.head + self.slots - 1]
    }

    /// Starts a block of `clocks` on the slot that comes free first.
    pub fn start(&mut self, clocks: u64) {
        let (head, slots) = (self.head, self.slots);
        let ends = self.buffer[head].saturating_add(clocks);
        // Free times before `ends`: all of them when it ends last, as a prefill's next tile
        // mostly does.
        let before = if ends >= self.end() {
            slots - 1
        } else {
            self.buffer[head + 1..head + slots].partition_point(|&f| f <= ends)
        };
        if before <= slots - 1 - before {
            self.buffer.copy_within(head + 1..=head + before, head);
            self.buffer[head + before] = ends;
            return;
        }
        if head + slots == self.buffer.len() {
            self.buffer.copy_within(head..head + slots, 0);
            self.head = 0;
        }
        let at = self.head + 1 + before;
        self.buffer.copy_within(at..self.head + slots, at + 1);
        self.buffer[at] = ends;
        self.head += 1;
    }

    /// Starts blocks of `clocks` one after another, as a call of [`Self::start`] each would:
    /// a rising run (a prefill's query tiles) at once while each block starts on its own slot
    /// before the first of the run ends.
    pub fn start_each<I: Iterator<Item = u64>>(&mut self, clocks: I) {
        let mut clocks = clocks.peekable();
        while let Some(first) = clocks.next() {
            let ends = self.buffer[self.head].saturating_add(first);
            // Slots free by the first block's end: a rising run's later blocks start on them
            // in order, since none of the run ends before.
            let fit = 1 + self.free()[1..].partition_point(|&f| f <= ends);
            if self.head + self.slots + fit > self.buffer.len() {
                self.buffer
                    .copy_within(self.head..self.head + self.slots, 0);
                self.head = 0;
            }
            let (head, slots) = (self.head, self.slots);
            let (mut run, mut last) = (1, first);
            self.buffer[head + slots] = ends;
            while run < fit {
                match clocks.next_if(|&c| c >= last) {
                    Some(c) => {
                        let end = self.buffer[head + run].saturating_add(c);
                        self.buffer[head + slots + run] = end;
                        (run, last) = (run + 1, c);
                    }
                    None => break,
                }
            }
            self.merge_run(run);
        }
    }

    /// Replaces the first `run` free times by the ends written after the free times (rising),
    /// keeping the times in order.
    fn merge_run(&mut self, run: usize) {
        let (head, slots) = (self.head, self.slots);
        let ends = head + slots;
        if self.buffer[ends] >= self.buffer[ends - 1] {
            // All the run's ends are the latest: drop the free times they replace.
            self.head += run;
            return;
        }
        let (mut at, mut a, mut b) = (head, ends, head + run);
        while a < ends + run {
            if b < ends && self.buffer[b] < self.buffer[a] {
                self.buffer[at] = self.buffer[b];
                b += 1;
            } else {
                self.buffer[at] = self.buffer[a];
                a += 1;
            }
            at += 1;
        }
    }

    /// Starts `n` blocks of `clocks` one after another, as `n` calls of [`Self::start`]
    /// would, in time independent of `n` once the slots come free within `clocks` of each
    /// other.
    pub fn start_many(&mut self, n: u64, clocks: u64) {
        if n == 0 || clocks == 0 {
            return;
        }
        let n = n - self.catch_up(n, clocks);
        // Within `clocks` of each other, a block's end is no earlier than the last slot comes
        // free: every round of a block per slot takes the slots in order.
        let len = self.slots as u64;
        let (rounds, rest) = (n / len, (n % len) as usize);
        let round_clocks = rounds.saturating_mul(clocks);
        let free = self.free();
        for f in free.iter_mut() {
            *f = f.saturating_add(round_clocks);
        }
        for f in &mut free[..rest] {
            *f = f.saturating_add(clocks);
        }
        free.rotate_left(rest);
    }

    /// Starts at most `n` blocks of `clocks` (not 0) until the slots come free within
    /// `clocks` of each other; returns how many. The blocks that start before the latest free
    /// time are each slot's up to it: if they number `n` or fewer, they start at once.
    fn catch_up(&mut self, n: u64, clocks: u64) -> u64 {
        let latest = self.end();
        let free = self.free();
        if latest - free[0] <= clocks {
            return 0;
        }
        let before = |f: u64| (latest - f).div_ceil(clocks);
        let blocks: u64 = free.iter().map(|&f| before(f)).sum();
        if blocks <= n {
            for f in free.iter_mut() {
                *f = f.saturating_add(before(*f) * clocks);
            }
            free.sort_unstable();
            return blocks;
        }
        let mut started = 0;
        while started < n && self.end() - self.buffer[self.head] > clocks {
            self.start(clocks);
            started += 1;
        }
        started
    }
}
