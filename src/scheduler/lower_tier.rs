//! The second tier of the prefix cache (`--prefix-storage CPU|CXL`): an inclusive victim cache
//! in host (CPU) or CXL memory below an instance's KV blocks.
//!
//! The tier holds **coarse blocks**: runs of `C` prompt tokens, `C` being 256 rounded down to a
//! multiple of the KV block size (at least one block). A coarse block is identified by the
//! chained hash of its last KV block, which covers every token before it, so a hit means that
//! the whole prefix up to the end of that coarse block is stored.
//!
//! - **Write-down.** When the scheduler indexes KV blocks in its prefix cache, every coarse
//!   block they complete is copied into the tier (free of charge: the copy overlaps the
//!   compute). A block already there becomes the most recently written.
//! - **Eviction.** A full tier drops its least recently written coarse blocks first.
//! - **Lookup.** After the device-side hit, consecutive coarse blocks found in the tier extend
//!   the hit ([`LowerTier::extend_hit`]). The extension is recalled: its KV is loaded back into
//!   freshly allocated device blocks, at `latency + bytes / bandwidth` of the tier's memory
//!   ([`TierMemory::load_ns`]), added to the time of the step that admits the request.
//!
//! A pool is private to an instance or shared by several ([`SharedLowerPool`]); entries are
//! keyed by a *KV space* as well as the hash, so that instances of different models (or KV
//! layouts) sharing a pool never hit each other's blocks. The engine processes instances one
//! at a time, in id order, so a shared pool sees a deterministic sequence of operations.
//!
//! KV offloading (`--kv-cpu-blocks`, [`LowerTier::offload`]) uses the same tier with coarse
//! blocks of one KV block, written down only above a GPU KV utilisation threshold, and its
//! transfers priced on one link (see `kv_offload.rs`).

use super::SchedulerBug;
use super::kv_offload::{KvOffloadSpec, LinkStats, OffloadLoad, TransferLink};
use crate::Nanos;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

/// Tokens of a coarse block before rounding to the KV block size.
const COARSE_TOKENS: u32 = 256;

/// Bytes in a GiB (the cluster config's "GB", as LLMServingSim reads it).
const GIB: f64 = (1u64 << 30) as f64;

/// The memory a lower-tier pool lives in: its size and how fast KV comes back from it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TierMemory {
    /// Capacity, bytes.
    pub capacity_bytes: u64,
    /// Bandwidth, GB/s (decimal: bytes per ns).
    pub bandwidth_gbps: f64,
    /// Access latency, ns.
    pub latency_ns: f64,
}

impl TierMemory {
    /// A memory of `mem_size` GB (taken as GiB, like LLMServingSim), `mem_bw` GB/s and
    /// `mem_latency` ns: the units of the cluster config's `cpu_mem` and `cxl_mem`.
    pub fn from_config(mem_size: f64, mem_bw: f64, mem_latency: f64) -> TierMemory {
        TierMemory {
            capacity_bytes: (mem_size * GIB) as u64,
            bandwidth_gbps: mem_bw,
            latency_ns: mem_latency,
        }
    }

    /// Time to load `bytes` from this memory: `latency + ⌊bytes / bandwidth⌋` ns (ASTRA-Sim's
    /// analytical memory model, bandwidth in bytes per ns); 0 for nothing.
    pub fn load_ns(&self, bytes: u64) -> Nanos {
        if bytes == 0 {
            return 0;
        }
        self.latency_ns.round() as Nanos + (bytes as f64 / self.bandwidth_gbps) as Nanos
    }
}

/// Key of a stored coarse block: KV space, then the chained hash of its last KV block.
type Key = (u32, u64);

const NIL: u32 = u32::MAX;

/// One stored coarse block, linked into the write order.
#[derive(Debug, Clone, Copy)]
struct Entry {
    key: Key,
    bytes: u64,
    /// Neighbours in write order (`NIL` at the ends).
    prev: u32,
    next: u32,
}

/// A lower-tier pool: coarse blocks in write order (least recently written first), bounded by
/// the capacity of its memory.
#[derive(Debug)]
pub struct LowerPool {
    memory: TierMemory,
    used_bytes: u64,
    /// Entry slots; those in `vacant` hold nothing.
    entries: Vec<Entry>,
    vacant: Vec<u32>,
    /// Least and most recently written entries.
    head: u32,
    tail: u32,
    index: HashMap<Key, u32>,
    /// Recent evictions, for KV thrashing (`None`: not watched).
    watch: Option<Box<EvictionWatch>>,
}

/// The coarse blocks a pool evicted within the last `window` ns, with when: a prefix lookup
/// that needs one of them again is KV thrashing. Allocates only while growing to the largest
/// number of evictions in one window.
#[derive(Debug, Default)]
struct EvictionWatch {
    window: Nanos,
    /// The time of the pool's current changes (set when a step is formed).
    clock: Nanos,
    /// Per key: its latest eviction.
    latest: HashMap<Key, Nanos>,
    /// Evictions, oldest first.
    order: VecDeque<(Nanos, Key)>,
}

impl EvictionWatch {
    fn record(&mut self, key: Key) {
        self.latest.insert(key, self.clock);
        self.order.push_back((self.clock, key));
    }

    /// Moves the clock to `now` and forgets the evictions more than a window before it.
    fn set_clock(&mut self, now: Nanos) {
        self.clock = self.clock.max(now);
        while let Some(&(at, key)) = self.order.front() {
            if self.clock - at <= self.window {
                break;
            }
            self.order.pop_front();
            if self.latest.get(&key) == Some(&at) {
                self.latest.remove(&key);
            }
        }
    }

    fn evicted_lately(&self, key: Key) -> bool {
        self.latest
            .get(&key)
            .is_some_and(|&at| self.clock - at <= self.window)
    }
}

/// A pool that several instances may hold (they run one at a time, never concurrently).
pub type SharedLowerPool = Rc<RefCell<LowerPool>>;

impl LowerPool {
    /// An empty pool in `memory`.
    pub fn new(memory: TierMemory) -> LowerPool {
        LowerPool {
            memory,
            used_bytes: 0,
            entries: Vec::new(),
            vacant: Vec::new(),
            head: NIL,
            tail: NIL,
            index: HashMap::new(),
            watch: None,
        }
    }

    /// Starts remembering the evictions of the last `window_ns` ns (see
    /// [`LowerPool::evicted_lately`]); a pool already watched keeps its window.
    pub fn watch_evictions(&mut self, window_ns: Nanos) {
        if self.watch.is_none() {
            self.watch = Some(Box::new(EvictionWatch {
                window: window_ns,
                ..EvictionWatch::default()
            }));
        }
    }

    /// Stamps the evictions that follow with time `now` (a no-op unless watched; the clock
    /// never goes back: instances sharing the pool form their steps in time order).
    pub fn set_clock(&mut self, now: Nanos) {
        if let Some(w) = &mut self.watch {
            w.set_clock(now);
        }
    }

    /// Whether the coarse block ending with chained hash `hash` of KV space `space` was
    /// evicted within the window before the pool's clock (false unless watched).
    pub fn evicted_lately(&self, space: u32, hash: u64) -> bool {
        self.watch
            .as_ref()
            .is_some_and(|w| w.evicted_lately((space, hash)))
    }

    /// An empty pool in `memory`, ready to be shared.
    pub fn shared(memory: TierMemory) -> SharedLowerPool {
        Rc::new(RefCell::new(LowerPool::new(memory)))
    }

    /// The memory the pool lives in.
    pub fn memory(&self) -> &TierMemory {
        &self.memory
    }

    /// Coarse blocks stored.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Bytes stored.
    pub fn used_bytes(&self) -> u64 {
        self.used_bytes
    }

    /// Whether the coarse block ending with chained hash `hash` of KV space `space` is stored.
    pub fn contains(&self, space: u32, hash: u64) -> bool {
        self.index.contains_key(&(space, hash))
    }

    /// Stores a coarse block of `bytes` bytes, evicting the least recently written ones as
    /// needed, or makes it the most recently written if already stored. A block larger than
    /// the whole pool is not stored; returns whether the block is stored now.
    pub fn store(&mut self, space: u32, hash: u64, bytes: u64) -> bool {
        let key = (space, hash);
        if let Some(&e) = self.index.get(&key) {
            self.unlink(e);
            self.push_tail(e);
            return true;
        }
        if bytes > self.memory.capacity_bytes {
            return false;
        }
        while self.used_bytes + bytes > self.memory.capacity_bytes {
            self.evict_head();
        }
        let entry = Entry {
            key,
            bytes,
            prev: NIL,
            next: NIL,
        };
        let e = match self.vacant.pop() {
            Some(e) => {
                self.entries[e as usize] = entry;
                e
            }
            None => {
                self.entries.push(entry);
                (self.entries.len() - 1) as u32
            }
        };
        self.index.insert(key, e);
        self.used_bytes += bytes;
        self.push_tail(e);
        true
    }

    /// Checks the pool's invariants: the write order holds exactly the indexed entries, each
    /// once, and their bytes add up to the used bytes, within the capacity.
    pub fn audit(&self) -> Result<(), SchedulerBug> {
        let mut seen = vec![false; self.entries.len()];
        let (mut count, mut bytes) = (0usize, 0u64);
        let mut e = self.head;
        let mut prev = NIL;
        while e != NIL {
            if std::mem::replace(&mut seen[e as usize], true) {
                return Err(format!("entry {e} is twice in the write order").into());
            }
            let entry = &self.entries[e as usize];
            if entry.prev != prev {
                return Err(format!("entry {e} has a broken back link").into());
            }
            if self.index.get(&entry.key) != Some(&e) {
                return Err(format!("entry {e} is not indexed under its key").into());
            }
            count += 1;
            bytes += entry.bytes;
            prev = e;
            e = entry.next;
        }
        if prev != self.tail {
            return Err(SchedulerBug::new("the tail is not the last entry".into()));
        }
        if count != self.index.len() || count + self.vacant.len() != self.entries.len() {
            return Err(format!(
                "{count} entries in order, {} indexed, {} vacant of {}",
                self.index.len(),
                self.vacant.len(),
                self.entries.len()
            )
            .into());
        }
        if bytes != self.used_bytes || bytes > self.memory.capacity_bytes {
            return Err(format!(
                "entries hold {bytes} bytes, counter says {}, capacity {}",
                self.used_bytes, self.memory.capacity_bytes
            )
            .into());
        }
        Ok(())
    }

    fn evict_head(&mut self) {
        let e = self.head;
        debug_assert!(e != NIL, "evicting from an empty pool");
        self.unlink(e);
        let entry = self.entries[e as usize];
        self.index.remove(&entry.key);
        if let Some(w) = &mut self.watch {
            w.record(entry.key);
        }
        self.used_bytes -= entry.bytes;
        self.vacant.push(e);
    }

    fn push_tail(&mut self, e: u32) {
        let tail = self.tail;
        let entry = &mut self.entries[e as usize];
        entry.prev = tail;
        entry.next = NIL;
        if tail == NIL {
            self.head = e;
        } else {
            self.entries[tail as usize].next = e;
        }
        self.tail = e;
    }

    fn unlink(&mut self, e: u32) {
        let entry = &mut self.entries[e as usize];
        let (p, n) = (entry.prev, entry.next);
        entry.prev = NIL;
        entry.next = NIL;
        if p == NIL {
            self.head = n;
        } else {
            self.entries[p as usize].next = n;
        }
        if n == NIL {
            self.tail = p;
        } else {
            self.entries[n as usize].prev = p;
        }
    }
}

/// One instance's view of its lower-tier pool: the pool, the instance's KV space in it, and the
/// sizes that turn tokens into coarse blocks and bytes.
#[derive(Debug, Clone)]
pub struct LowerTier {
    pool: SharedLowerPool,
    space: u32,
    /// KV bytes of one token over the whole instance (every layer, head and TP rank).
    token_bytes: u64,
    block_size: u32,
    /// KV blocks per coarse block.
    blocks_per_coarse: u32,
    /// KV offloading (`--kv-cpu-blocks`): the tier is written only under memory pressure, and
    /// its transfers share one PCIe link (see [`super::kv_offload`]).
    offload: Option<Box<Offload>>,
}

/// The state of KV offloading: its threshold, its link, and the blocks written down by the
/// step being formed, whose copy leaves when the step is formed.
#[derive(Debug, Clone)]
struct Offload {
    threshold: f64,
    link: TransferLink,
    pending_blocks: u64,
}

impl LowerTier {
    /// The tier of an instance with KV blocks of `block_size` tokens and `kv_bytes_per_token`
    /// KV bytes per token, storing into `pool` under KV space `space`.
    pub fn new(
        pool: SharedLowerPool,
        space: u32,
        kv_bytes_per_token: u64,
        block_size: u32,
    ) -> LowerTier {
        assert!(block_size > 0, "KV blocks hold at least one token");
        LowerTier {
            pool,
            space,
            token_bytes: kv_bytes_per_token,
            block_size,
            blocks_per_coarse: (COARSE_TOKENS / block_size).max(1),
            offload: None,
        }
    }

    /// The CPU tier of KV offloading (`spec`) of an instance with KV blocks of `block_size`
    /// tokens and `kv_bytes_per_token` KV bytes per token, in its private `pool`: single KV
    /// blocks, written down above the threshold, moved over one link.
    pub fn offload(
        pool: SharedLowerPool,
        kv_bytes_per_token: u64,
        block_size: u32,
        spec: KvOffloadSpec,
    ) -> LowerTier {
        let mut tier = LowerTier::new(pool, 0, kv_bytes_per_token, block_size);
        tier.blocks_per_coarse = 1;
        tier.offload = Some(Box::new(Offload {
            threshold: spec.threshold,
            link: TransferLink::new(spec.bandwidth_gbps, spec.latency_ns),
            pending_blocks: 0,
        }));
        tier
    }

    /// The offload link's counters (`None` unless KV offloading).
    pub fn link_stats(&self) -> Option<LinkStats> {
        self.offload.as_ref().map(|o| o.link.stats())
    }

    /// The CPU tier's occupancy and the link's queue at `now` (`None` unless KV offloading).
    pub fn offload_load(&self, now: Nanos) -> Option<OffloadLoad> {
        let o = self.offload.as_ref()?;
        let pool = self.pool.borrow();
        let block_bytes = self.bytes(u64::from(self.block_size)).max(1);
        let (pending_offloads, pending_reloads) = o.link.pending_at(now);
        Some(OffloadLoad {
            cpu_blocks_used: pool.len(),
            cpu_blocks_total: usize::try_from(pool.memory().capacity_bytes / block_bytes)
                .unwrap_or(usize::MAX),
            transfer_queue: o.link.depth_at(now),
            pending_offloads,
            pending_reloads,
        })
    }

    /// Transfers queued or on the offload link at `now` (0 unless KV offloading).
    pub fn transfer_queue_depth(&mut self, now: Nanos) -> usize {
        self.offload.as_mut().map_or(0, |o| o.link.depth(now))
    }

    /// Ends the forming of a step at `now` that recalls `tokens` tokens: returns how long the
    /// step waits for them. With KV offloading the reload queues on the link, then the blocks
    /// the step wrote down are offloaded behind it; otherwise the load takes the memory's
    /// [`TierMemory::load_ns`].
    pub fn finish_step(&mut self, now: Nanos, tokens: u64) -> Nanos {
        let bytes = self.bytes(tokens);
        let block_bytes = self.bytes(u64::from(self.block_size));
        match &mut self.offload {
            None => self.pool.borrow().memory.load_ns(bytes),
            Some(o) => {
                let wait = o.link.reload(now, bytes);
                let blocks = std::mem::take(&mut o.pending_blocks);
                o.link.offload(now, blocks, blocks * block_bytes);
                wait
            }
        }
    }

    /// Tokens of a coarse block.
    pub fn coarse_tokens(&self) -> u32 {
        self.blocks_per_coarse * self.block_size
    }

    /// KV bytes of `tokens` tokens.
    pub fn bytes(&self, tokens: u64) -> u64 {
        tokens * self.token_bytes
    }

    /// The pool.
    pub fn pool(&self) -> &SharedLowerPool {
        &self.pool
    }

    /// Starts remembering the pool's evictions of the last `window_ns` ns (KV thrashing).
    pub fn watch_thrashing(&self, window_ns: Nanos) {
        self.pool.borrow_mut().watch_evictions(window_ns);
    }

    /// Stamps the pool's evictions that follow with time `now`.
    pub fn set_clock(&self, now: Nanos) {
        self.pool.borrow_mut().set_clock(now);
    }

    /// Whether KV block `block` of a request with block hashes `hashes` lies in a coarse
    /// block the pool evicted within the thrash window (false when that coarse block is not
    /// complete within `hashes`: it was never stored).
    pub fn evicted_lately(&self, hashes: &[u64], block: usize) -> bool {
        let per = self.blocks_per_coarse as usize;
        let last = (block / per + 1) * per - 1;
        hashes
            .get(last)
            .is_some_and(|&h| self.pool.borrow().evicted_lately(self.space, h))
    }

    /// Prompt tokens the tier adds to a device-side hit of `npu_hit` tokens (a multiple of the
    /// block size) for a request that has reached `reached` tokens with block hashes `hashes`.
    ///
    /// From the coarse block holding token `npu_hit`, consecutive coarse blocks (within the
    /// reached tokens) found in the tier count. They are used only if the reached tokens hold
    /// a whole coarse block past the device hit and the hit ends at least one coarse block
    /// past it (LLMServingSim's rules). The total hit is then capped so that at least one
    /// token is left to compute, rounded down to a block, like the device-side hit.
    pub fn extend_hit(&self, hashes: &[u64], npu_hit: u32, reached: u32) -> u32 {
        let coarse = self.coarse_tokens();
        let in_reach = reached / coarse;
        if in_reach * coarse < npu_hit + coarse {
            return 0;
        }
        let pool = self.pool.borrow();
        let per = self.blocks_per_coarse as usize;
        let mut end = npu_hit / coarse;
        while end < in_reach {
            match hashes.get((end as usize + 1) * per - 1) {
                Some(&h) if pool.contains(self.space, h) => end += 1,
                _ => break,
            }
        }
        let hit = end * coarse;
        if hit < npu_hit + coarse {
            return 0;
        }
        let cap = reached.saturating_sub(1) / self.block_size * self.block_size;
        hit.min(cap).saturating_sub(npu_hit)
    }

    /// Copies into the tier the coarse blocks completed by indexing the KV blocks
    /// `from..to` of a request with block hashes `hashes`, the device's KV utilisation
    /// (used / all blocks) being `utilisation`. With KV offloading, only above the threshold,
    /// and the blocks not stored yet are queued for the link.
    pub fn write_down(&mut self, hashes: &[u64], from: usize, to: usize, utilisation: f64) {
        if let Some(o) = &mut self.offload {
            if utilisation <= o.threshold {
                return;
            }
            let mut pool = self.pool.borrow_mut();
            for &h in &hashes[from..to] {
                if !pool.contains(self.space, h) {
                    o.pending_blocks += 1;
                }
                pool.store(self.space, h, self.token_bytes * u64::from(self.block_size));
            }
            return;
        }
        let per = self.blocks_per_coarse as usize;
        // The first block at or after `from` that ends a coarse block.
        let first = (from + 1).div_ceil(per) * per - 1;
        if first >= to {
            return;
        }
        let bytes = self.bytes(u64::from(self.coarse_tokens()));
        let mut pool = self.pool.borrow_mut();
        for i in (first..to).step_by(per) {
            pool.store(self.space, hashes[i], bytes);
        }
    }
}
