//! KV offloading to a CPU tier (`--kv-cpu-blocks`), as vLLM's native offload connector and
//! BLIS's tiered KV cache do it, on the mechanism of the lower tier ([`super::LowerTier`]).
//!
//! - **Granularity.** The CPU tier holds single KV blocks (not the lower tier's coarse blocks
//!   of 256 tokens), keyed by the block's chained hash; it has room for `--kv-cpu-blocks` of
//!   them and drops the least recently written first.
//! - **Offload.** When the scheduler indexes full KV blocks while the GPU's KV utilisation
//!   (used blocks / all blocks) is above `--kv-offload-threshold`, the blocks not yet in the
//!   CPU tier are copied there (BLIS's rule: offload only under memory pressure). The copy is
//!   asynchronous (it never delays a step) but it occupies the PCIe link.
//! - **Reload.** A later prefix lookup continues, past the GPU's hit, through consecutive
//!   blocks found in the CPU tier; their KV is loaded back into fresh GPU blocks and the step
//!   that admits the request waits for the load.
//! - **Transfer time and contention.** Every transfer takes `latency + bytes / bandwidth`
//!   (`--kv-transfer-base-latency`, `--kv-transfer-bandwidth`) on the instance's one PCIe
//!   link ([`TransferLink`]), first come first served: a transfer starts when the link is
//!   free, so a reload queued behind offloads waits for them. A step's reload is submitted
//!   when the step is formed, before the offloads of the blocks that step indexes (they are
//!   computed by the step, so they cannot leave earlier).

use crate::Nanos;
use std::collections::VecDeque;

/// KV offloading as the flags ask for it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KvOffloadSpec {
    /// CPU tier size: KV blocks (`--kv-cpu-blocks`) or GiB (vLLM's `--kv-offloading-size`).
    pub cpu_size: CpuTierSize,
    /// GPU KV utilisation (0 to 1) above which blocks are offloaded (`--kv-offload-threshold`).
    pub threshold: f64,
    /// PCIe bandwidth, GB/s (`--kv-transfer-bandwidth`).
    pub bandwidth_gbps: f64,
    /// Fixed cost of one transfer, ns (`--kv-transfer-base-latency`, given in µs).
    pub latency_ns: Nanos,
}

/// The size of the CPU tier, as the flags give it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CpuTierSize {
    /// KV blocks of the instance (BLIS's `--kv-cpu-blocks`).
    Blocks(u64),
    /// GiB over the instance's TP ranks (vLLM's `--kv-offloading-size`).
    Gib(f64),
}

impl CpuTierSize {
    /// Whole KV blocks of `block_bytes` bytes that fit (`None`: more than 2^64 bytes).
    pub fn blocks(self, block_bytes: u64) -> Option<u64> {
        match self {
            CpuTierSize::Blocks(n) => Some(n),
            CpuTierSize::Gib(g) => {
                let bytes = g * f64::from(1u32 << 30);
                (bytes < u64::MAX as f64).then(|| bytes as u64 / block_bytes.max(1))
            }
        }
    }
}

/// One PCIe link between an instance's GPUs and its CPU tier: transfers in submission order,
/// one at a time.
#[derive(Debug, Clone)]
pub struct TransferLink {
    /// Bandwidth, GB/s (decimal: bytes per ns).
    bandwidth_gbps: f64,
    /// Fixed cost of one transfer, ns.
    latency_ns: Nanos,
    /// When the last submitted transfer ends.
    busy_until: Nanos,
    /// End times of the transfers submitted and not ended, oldest first (the queue), each
    /// marked `true` for a reload.
    ends: VecDeque<(Nanos, bool)>,
    /// Counters so far.
    stats: LinkStats,
}

/// What a router can see of an instance's KV offloading at an instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OffloadLoad {
    /// KV blocks held by the CPU tier.
    pub cpu_blocks_used: usize,
    /// KV blocks the CPU tier has room for.
    pub cpu_blocks_total: usize,
    /// Transfers (offloads and reloads alike) queued or on the link.
    pub transfer_queue: usize,
    /// Of those, the offloads (GPU to CPU) and the reloads (CPU to GPU) pending.
    pub pending_offloads: usize,
    pub pending_reloads: usize,
}

/// What a link carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// GPU-to-CPU transfers (one per step that offloaded something) and their KV blocks.
    pub offloads: u64,
    pub offloaded_blocks: u64,
    /// CPU-to-GPU transfers (one per step that reloaded something).
    pub reloads: u64,
    /// Time reloads waited for the link before starting, ns.
    pub reload_wait_ns: u64,
    /// The most transfers in the queue at once (the one on the link included).
    pub max_queue_depth: u64,
}

impl LinkStats {
    /// The counters of two links together (the deepest queue of either).
    pub fn merged(self, other: LinkStats) -> LinkStats {
        LinkStats {
            offloads: self.offloads + other.offloads,
            offloaded_blocks: self.offloaded_blocks + other.offloaded_blocks,
            reloads: self.reloads + other.reloads,
            reload_wait_ns: self.reload_wait_ns + other.reload_wait_ns,
            max_queue_depth: self.max_queue_depth.max(other.max_queue_depth),
        }
    }
}

impl TransferLink {
    /// An idle link of `bandwidth_gbps` GB/s and `latency_ns` ns per transfer.
    pub fn new(bandwidth_gbps: f64, latency_ns: Nanos) -> TransferLink {
        assert!(bandwidth_gbps > 0.0, "a link moves bytes");
        TransferLink {
            bandwidth_gbps,
            latency_ns,
            busy_until: 0,
            ends: VecDeque::new(),
            stats: LinkStats::default(),
        }
    }

    /// Time `bytes` take on the idle link: `latency + ⌊bytes / bandwidth⌋` ns; 0 for nothing.
    pub fn transfer_ns(&self, bytes: u64) -> Nanos {
        if bytes == 0 {
            return 0;
        }
        self.latency_ns + (bytes as f64 / self.bandwidth_gbps) as Nanos
    }

    /// Queues a transfer of `bytes` at `now`: it starts when the link is free (at `now` or
    /// when the transfer before it ends). Returns when it ends.
    fn submit(&mut self, now: Nanos, bytes: u64, reload: bool) -> Nanos {
        self.depth(now);
        let start = self.busy_until.max(now);
        let end = start.saturating_add(self.transfer_ns(bytes));
        self.busy_until = end;
        self.ends.push_back((end, reload));
        self.stats.max_queue_depth = self.stats.max_queue_depth.max(self.ends.len() as u64);
        end
    }

    /// Reloads `bytes` needed by a step formed at `now`: returns how long the step waits for
    /// them (the queue before it, then the transfer); 0 for nothing.
    pub fn reload(&mut self, now: Nanos, bytes: u64) -> Nanos {
        if bytes == 0 {
            return 0;
        }
        self.stats.reloads += 1;
        self.stats.reload_wait_ns += self.busy_until.saturating_sub(now);
        self.submit(now, bytes, true) - now
    }

    /// Offloads `blocks` KV blocks of `bytes` in all, leaving at `now`; returns when the copy
    /// ends. Nothing waits for it but the transfers queued after it.
    pub fn offload(&mut self, now: Nanos, blocks: u64, bytes: u64) -> Nanos {
        if blocks == 0 {
            return now;
        }
        self.stats.offloads += 1;
        self.stats.offloaded_blocks += blocks;
        self.submit(now, bytes, false)
    }

    /// Transfers queued or on the link at `now` (those ended by then are dropped).
    pub fn depth(&mut self, now: Nanos) -> usize {
        while self.ends.front().is_some_and(|&(end, _)| end <= now) {
            self.ends.pop_front();
        }
        self.ends.len()
    }

    /// Transfers queued or on the link at `now`, without dropping the ended ones (what an
    /// observer sees; the same count as [`TransferLink::depth`]).
    pub fn depth_at(&self, now: Nanos) -> usize {
        // End times are ascending: each transfer starts when the one before it ends.
        self.ends.len() - self.ended_by(now)
    }

    /// Offloads and reloads queued or on the link at `now` (an observer's count, as
    /// [`TransferLink::depth_at`]).
    pub fn pending_at(&self, now: Nanos) -> (usize, usize) {
        let pending = self.ends.range(self.ended_by(now)..);
        let all = pending.len();
        let reloads = pending.filter(|&&(_, reload)| reload).count();
        (all - reloads, reloads)
    }

    /// How many queued transfers have ended by `now` (the oldest ones).
    fn ended_by(&self, now: Nanos) -> usize {
        self.ends.partition_point(|&(end, _)| end <= now)
    }

    /// Counters so far.
    pub fn stats(&self) -> LinkStats {
        self.stats
    }
}
