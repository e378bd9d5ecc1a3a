//! The KV block pool: reference-counted blocks, a free list in eviction order, and the
//! prefix-cache index from chained block hashes to blocks (a port of vLLM V1's `BlockPool`).
//!
//! A block is *pinned* while some request holds it (`ref_cnt > 0`) and *free* otherwise. Free
//! blocks may still carry a hash and be found by the prefix index; they are evicted (their
//! hash dropped) only when popped from the head of the free list to serve a new allocation.
//! Freed blocks go to the tail, so eviction is least-recently-freed first.
//!
//! Until the first block is indexed no block carries a hash, so which free block an
//! allocation takes cannot be observed; the pool then keeps its free blocks on a stack, which
//! hands out the most recently freed block (the one most likely still in the CPU cache). The
//! first [`BlockPool::cache`] turns the stack into the free list; from then on the order is
//! vLLM's. On the stack no block is shared (sharing comes from prefix hits, which need an
//! index), so a block is held by one request exactly when it is off the stack: the blocks'
//! reference counts are not kept then (taking and freeing a block touches only the top of the
//! stack, not the block's bookkeeping) and are written when the stack turns into the list.
//!
//! The index maps a chained hash to the one block indexed under it, and is kept as a tree
//! along the chains: a lookup always walks a chain from its first block (a block's hash
//! covers every token before it, so a chain is found up to its first miss), so the block
//! holding hash `h_i` is looked for among the children of the block the walk found for
//! `h_{i-1}`, and a computed block is indexed by linking it under its parent, a block the
//! request has just touched, instead of writing a slot of a table the size of the instance
//! (whose cache misses were most of the cost of a prompt block). A block keeps at most
//! eight children. The rest of the index is a [`hashbrown::HashTable`] of block
//! ids hashed by the hash their block carries (passed through as it is): the chains' first
//! blocks, the children past a full list, the blocks whose parent's hash the index did not
//! hold when they were indexed, and those whose parent was evicted (orphans: a lookup reaches
//! them only once their parent's hash is indexed again, by another block). A lookup that
//! misses among the children probes the table only when a counting filter of the table's
//! hashes says it may hold it. Every entry is live: an evicted block leaves the index when it
//! is reused, so nothing has to sweep it, and that needs no probe: a block in the table keeps
//! its bucket (read back for every block when the table grows or rehashes, which moves
//! entries), and a child is taken off its parent's short list.
//!
//! Memory follows what the instance holds, not its capacity: a block's bookkeeping exists
//! only once the block has been used, and not at all while the pool is on its stack (where
//! nobody reads it: the stack alone says which blocks are held). The blocks never used yet
//! are free and empty, so they are interchangeable; they sit below the stack (taken after
//! every freed block) and at the head of the free list (taken before any listed block),
//! exactly where a pool that made all its blocks up front keeps them, and get their ids in
//! order as they are first taken. Leaving the stack makes the bookkeeping of the blocks used
//! so far in one allocation; from then on it grows with the blocks used.

use super::SchedulerBug;
use crate::Nanos;
use crate::workload::{PromptBlocks, Request};
use hashbrown::HashTable;
use std::collections::{HashMap, VecDeque};

/// Index of a KV block.
pub type BlockId = u32;

/// A hasher for keys that are already well-mixed 64-bit hashes (chained block hashes, xxh3
/// outputs): it passes the key through instead of hashing it again.
#[derive(Debug, Default, Clone, Copy)]
pub struct PassThroughHasher(u64);

impl std::hash::Hasher for PassThroughHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A map keyed by block hashes ([`PassThroughHasher`]).
pub type BlockHashMap<V> = HashMap<u64, V, std::hash::BuildHasherDefault<PassThroughHasher>>;

const NIL: u32 = u32::MAX;

/// Seed of the hash chain (vLLM's `NONE_HASH`).
pub const CHAIN_SEED: u64 = 0x9E37_79B9_7F4A_7C15;

/// Makes room in `table`, whose entries are indices into `items`, for one more entry. A table
/// that has to grow (or rehash in place) moves its entries, so then `place` gives every item
/// in it its new bucket, and the call returns true; an insertion that follows moves none.
pub(crate) fn reserve_one<T>(
    table: &mut HashTable<u32>,
    items: &mut [T],
    hash: impl Fn(&T) -> u64,
    place: impl Fn(&mut T, u32),
) -> bool {
    if table.len() < table.capacity() {
        return false;
    }
    table.reserve(1, |&i| hash(&items[i as usize]));
    for bucket in table.iter_buckets() {
        let i = *table.get_bucket(bucket).expect("a full bucket");
        place(&mut items[i as usize], bucket as u32);
    }
    true
}

/// Chained hashes of the full blocks of `tokens`: `h_i = H(h_{i-1}, tokens of block i)`.
/// Two requests share block `i` only if they share every token up to the end of that block.
pub fn block_hashes(tokens: &[u32], block_size: u32, out: &mut Vec<u64>) {
    block_hashes_with(tokens, block_size, out, &mut Vec::new());
}

/// [`block_hashes`] with a caller-owned byte buffer, so that repeated calls allocate nothing
/// once the buffers have grown.
pub fn block_hashes_with(tokens: &[u32], block_size: u32, out: &mut Vec<u64>, bytes: &mut Vec<u8>) {
    out.clear();
    extend_block_hashes(tokens, block_size, out, bytes);
}

/// Appends to `out`, which holds the chained hashes of the first `out.len()` full blocks of
/// `tokens`, those of the rest of its full blocks.
fn extend_block_hashes(tokens: &[u32], block_size: u32, out: &mut Vec<u64>, bytes: &mut Vec<u8>) {
    let done = out.len() * block_size as usize;
    out.reserve((tokens.len().saturating_sub(done)) / block_size as usize);
    let bytes = block_bytes(bytes, block_size);
    let mut parent = out.last().copied().unwrap_or(CHAIN_SEED);
    for block in tokens
        .get(done..)
        .unwrap_or_default()
        .chunks_exact(block_size as usize)
    {
        parent = chain(parent, block.iter().copied(), bytes);
        out.push(parent);
    }
}

/// Chained hashes of the full blocks of the first `max_tokens` token ids of `request`, listed
/// or made from its prompt blocks (the same hashes either way), with a caller-owned byte
/// buffer.
pub fn request_block_hashes(
    request: &Request,
    block_size: u32,
    max_tokens: usize,
    out: &mut Vec<u64>,
    bytes: &mut Vec<u8>,
) {
    request_block_hashes_after(request, block_size, max_tokens, &[], out, bytes);
}

/// [`request_block_hashes`] given `known`, the hashes of the request's leading full blocks at
/// `block_size` that someone computed already (the router, ranking instances by their cached
/// prefix), or those the request carries ([`Request::known_hashes`]) if more: they are copied,
/// and only the blocks after them are hashed.
pub fn request_block_hashes_after(
    request: &Request,
    block_size: u32,
    max_tokens: usize,
    known: &[u64],
    out: &mut Vec<u64>,
    bytes: &mut Vec<u8>,
) {
    out.clear();
    let carried = request.known_hashes_at(block_size);
    let known = if carried.len() > known.len() {
        carried
    } else {
        known
    };
    let Some(blocks) = &request.prompt_blocks else {
        let end = max_tokens.min(request.token_ids.len());
        out.reserve(end / block_size as usize);
        out.extend_from_slice(&known[..known.len().min(end / block_size as usize)]);
        return extend_block_hashes(&request.token_ids[..end], block_size, out, bytes);
    };
    let full = max_tokens.min(request.input_toks as usize) / block_size as usize;
    // Sized once for the whole list (the copy first would leave growing to the rest).
    out.reserve(full);
    out.extend_from_slice(&known[..known.len().min(full)]);
    if prompt_block_hashes(blocks, block_size, full, out, bytes) {
        return;
    }
    let bytes = block_bytes(bytes, block_size);
    let mut parent = out.last().copied().unwrap_or(CHAIN_SEED);
    for start in (out.len()..full).map(|k| k * block_size as usize) {
        blocks.write_tokens_le(start, &mut bytes[8..]);
        parent = hash_block(parent, bytes);
        out.push(parent);
    }
}

/// Appends to `out`, which holds the chained hashes of the first `out.len()` KV blocks of
/// `kv_block` tokens of prompt blocks `blocks` (from [`CHAIN_SEED`]), those of the next ones
/// up to the first `full`, prompt block after prompt block: a KV block's tokens are then
/// consecutive ids from its first, written by adding one, not looked up. Returns false,
/// appending nothing, where a KV block would straddle two prompt blocks or the prompt blocks
/// hold fewer than `full` KV blocks.
fn prompt_block_hashes(
    blocks: &PromptBlocks,
    kv_block: u32,
    full: usize,
    out: &mut Vec<u64>,
    bytes: &mut Vec<u8>,
) -> bool {
    let prompt_block = blocks.block_size();
    if kv_block == 0 || !prompt_block.is_multiple_of(kv_block) {
        return false;
    }
    let per = (prompt_block / kv_block) as usize;
    if full > blocks.firsts().len() * per {
        return false;
    }
    let done = out.len();
    out.reserve(full.saturating_sub(done));
    let bytes = block_bytes(bytes, kv_block);
    let mut parent = out.last().copied().unwrap_or(CHAIN_SEED);
    let mut k = done;
    while k < full {
        let (at, within) = (k / per, k % per);
        let run = (per - within).min(full - k);
        let mut token = blocks.firsts()[at] + (within as u32) * kv_block;
        for _ in 0..run {
            for dst in bytes[8..].chunks_exact_mut(4) {
                dst.copy_from_slice(&token.to_le_bytes());
                token += 1;
            }
            parent = hash_block(parent, bytes);
            out.push(parent);
        }
        k += run;
    }
    true
}

/// `bytes` sized for one block's hash input: the parent hash and `block_size` token ids.
fn block_bytes(bytes: &mut Vec<u8>, block_size: u32) -> &mut [u8] {
    bytes.clear();
    bytes.resize(8 + 4 * block_size as usize, 0);
    bytes
}

/// The hash of one block chained on `parent`: xxh3 of the parent's and the block's token
/// ids' little-endian bytes, written into `bytes` (from [`block_bytes`]), which takes exactly
/// one block's tokens from `tokens`.
fn chain(parent: u64, tokens: impl Iterator<Item = u32>, bytes: &mut [u8]) -> u64 {
    let body = &mut bytes[8..];
    // The chunks come first, so that `tokens` is not read past the block.
    for (dst, t) in body.chunks_exact_mut(4).zip(tokens) {
        dst.copy_from_slice(&t.to_le_bytes());
    }
    hash_block(parent, bytes)
}

/// The hash of one block chained on `parent`, its token ids' bytes already in `bytes` after
/// the first 8 (which take the parent's).
fn hash_block(parent: u64, bytes: &mut [u8]) -> u64 {
    bytes[..8].copy_from_slice(&parent.to_le_bytes());
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// Whether a table entry's block carries `hash` (the table's equality on hashes).
fn carries(blocks: &[Block], hash: u64) -> impl Fn(&BlockId) -> bool + '_ {
    move |&b| blocks[b as usize].hash() == Some(hash)
}

/// The bit of [`Block::home`] that says the rest is a table bucket, not a parent block.
const LOOSE: u32 = 1 << 31;

/// The most children a block keeps on its own list; the index puts more in the table.
pub const MAX_CHILDREN: usize = 8;

/// One block's bookkeeping, kept together so that a free-list operation touches one cache
/// line per block instead of one per field (32 bytes, aligned to 32: two blocks a line, and
/// none across two lines, so that fetching a block ahead fetches all of it).
#[derive(Debug, Clone, Copy)]
#[repr(align(32))]
pub struct Block {
    /// Requests holding the block.
    ref_cnt: u32,
    /// How many times the block has gone on the free list (wrapping): of its entries in
    /// [`BlockPool::free`], only the one carrying this count, while nobody holds the block,
    /// is live.
    turn: u32,
    /// Where the block's index entry is while it carries a hash (`NIL`: it carries none):
    /// `LOOSE | bucket` for the table's bucket (so that evicting the block removes its entry
    /// without a probe), else the block whose child it is.
    home: u32,
    /// Chained hash of the tokens the block holds, when indexed.
    pub hash: u64,
    /// The first of the blocks indexed as its children, and the next child of its own parent
    /// (`NIL`: none).
    child: u32,
    sibling: u32,
}

// Two blocks a cache line, none across two.
const _: () = assert!(size_of::<Block>() == 32 && align_of::<Block>() == 32);

/// How many free-list entries ahead of the head an allocation asks the CPU to fetch the
/// block of (see [`BlockPool::free`]): enough allocations to cover a miss to memory. The
/// chain parent an eviction unlinks the block from is nearly always the next entry (a
/// request frees its blocks last first), so it is fetched too.
const FETCH_AHEAD: usize = 16;

/// How many free-list entries ahead of the head an allocation fetches the list itself
/// (eight entries a line): the list is read once, front to back, and its lines are cold by
/// the time an allocation reaches them.
const LIST_AHEAD: usize = 8 * FETCH_AHEAD;

/// How many blocks ahead a release fetches: a release does less than an allocation, so it
/// looks further ahead.
const RELEASE_AHEAD: usize = 32;

/// Asks the CPU to bring `block`'s bookkeeping into its cache (a hint: it changes nothing).
fn prefetch(block: &Block) {
    super::warm::line(std::ptr::from_ref(block));
}

impl Block {
    const EMPTY: Block = Block {
        ref_cnt: 0,
        turn: 0,
        home: NIL,
        hash: 0,
        child: NIL,
        sibling: NIL,
    };

    /// A block held by one request, carrying no hash.
    const HELD: Block = Block {
        ref_cnt: 1,
        ..Block::EMPTY
    };

    fn hashed(&self) -> bool {
        self.home != NIL
    }

    fn hash(&self) -> Option<u64> {
        self.hashed().then_some(self.hash)
    }

    /// The table bucket holding the block's entry, if it is in the table.
    fn bucket(&self) -> Option<usize> {
        (self.hashed() && self.home & LOOSE != 0).then_some((self.home & !LOOSE) as usize)
    }

    /// The block whose child it is, if it is one.
    pub fn parent(&self) -> Option<BlockId> {
        (self.home & LOOSE == 0).then_some(self.home)
    }

    /// The blocks indexed as its children, in list order.
    pub fn children<'a>(&self, blocks: &'a [Block]) -> impl Iterator<Item = BlockId> + 'a {
        let real = |c: BlockId| (c != NIL).then_some(c);
        std::iter::successors(real(self.child), move |&c| real(blocks[c as usize].sibling))
    }
}

/// Counters of the table's entries by the top bits of their hashes, four per table bucket (a
/// counting filter: a zero says that no block in the table carries a hash with those bits,
/// so a lookup need not probe the table). A counter that reaches 255 stays there.
#[derive(Debug)]
struct LooseFilter {
    counts: Vec<u8>,
    shift: u32,
}

impl LooseFilter {
    #[inline]
    fn slot(&self, hash: u64) -> usize {
        // `checked_shr`: an empty filter (shift 64) has no slot but the first.
        hash.checked_shr(self.shift).unwrap_or(0) as usize
    }

    #[inline]
    fn may_hold(&self, hash: u64) -> bool {
        self.counts.get(self.slot(hash)).is_some_and(|&c| c > 0)
    }

    fn add(&mut self, hash: u64) {
        let slot = self.slot(hash);
        let c = &mut self.counts[slot];
        *c = c.saturating_add(1);
    }

    fn remove(&mut self, hash: u64) {
        let slot = self.slot(hash);
        let c = &mut self.counts[slot];
        if *c != u8::MAX {
            *c -= 1;
        }
    }

    /// Recounts the hashes of a table of `buckets` buckets.
    fn rebuild(&mut self, buckets: usize, hashes: impl Iterator<Item = u64>) {
        let size = (4 * buckets).next_power_of_two();
        self.shift = 64 - size.trailing_zeros();
        self.counts.clear();
        self.counts.resize(size, 0);
        for h in hashes {
            self.add(h);
        }
    }
}

/// The pool of KV blocks of one instance. Laid out (`repr(C)`) with what taking a block off
/// the stack and setting the clock read first, in one cache line.
#[derive(Debug)]
#[repr(C)]
pub struct BlockPool {
    /// The free blocks while no block has been indexed yet (see the module docs); `None`
    /// once the free list is in use.
    stack: Option<Vec<BlockId>>,
    num_free: usize,
    /// When the prefix index changed, for routers that see it late (`None`: not kept).
    pub history: Option<Box<CacheHistory>>,
    /// Recent evictions, for KV thrashing (`None`: not watched).
    thrash: Option<Box<ThrashWatch>>,
    /// Total blocks.
    capacity: u32,
    /// How many blocks have been used so far: ids from `used` to `capacity` are fresh.
    used: u32,
    /// The bookkeeping of the blocks used so far, by id, once off the stack (`used` long);
    /// empty on the stack, which keeps none (see the module docs).
    pub blocks: Vec<Block>,
    /// The free list, least recently freed first, as entries `(block, turn)` in an array
    /// rather than links through the blocks: an allocation knows the blocks it takes next
    /// and fetches their bookkeeping ahead (a walk along links would wait for each block's
    /// cache miss in turn). A block taken off the list out of order (a prefix hit on a free
    /// block) leaves its entry behind, stale: an entry is live only while its block is free
    /// and carries the entry's turn. Stale entries are skipped when they reach the head and
    /// swept out when they outnumber the live ones.
    pub free: VecDeque<(BlockId, u32)>,
    /// How many of the free list's entries are stale.
    pub stale: usize,
    /// The prefix index's table: the indexed blocks that are no other block's children
    /// (see the module docs), found by their hashes, and its filter.
    pub index: HashTable<BlockId>,
    filter: LooseFilter,
}

/// The hashes evicted from the prefix index within the last `window` ns, with when: a
/// lookup that misses one of them is KV thrashing. Allocates only while growing to the
/// largest number of evictions in one window.
#[derive(Debug, Default)]
struct ThrashWatch {
    window: Nanos,
    /// The time of the pool's current changes (set when a step is formed).
    clock: Nanos,
    /// Per hash: its latest eviction.
    latest: BlockHashMap<Nanos>,
    /// Evictions, oldest first.
    order: VecDeque<(Nanos, u64)>,
}

impl ThrashWatch {
    fn record(&mut self, hash: u64) {
        self.latest.insert(hash, self.clock);
        self.order.push_back((self.clock, hash));
    }

    /// Forgets the evictions more than a window before the clock.
    fn expire(&mut self) {
        while let Some(&(at, hash)) = self.order.front() {
            if self.clock - at <= self.window {
                break;
            }
            self.order.pop_front();
            if self.latest.get(&hash) == Some(&at) {
                self.latest.remove(&hash);
            }
        }
    }
}

/// The prefix index's past, kept so that a router can ask what the index held at an earlier
/// time without anyone copying it: when each indexed block got its hash, and the hashes
/// evicted since the oldest time still asked about, each with when it was indexed and
/// evicted. Index changes happen only while steps are formed, so "the index as a router saw
/// it at `t`" is every hash indexed before `t` and not evicted before `t`.
#[derive(Debug, Default)]
pub struct CacheHistory {
    /// The time of the pool's current changes (set when a step is formed).
    clock: Nanos,
    /// Per block used so far: when its current hash was indexed.
    since: Vec<Nanos>,
    /// Evictions, oldest first; entry `k` has sequence number `first + k`.
    pub evicted: VecDeque<Evicted>,
    first: u64,
    /// Per hash: the sequence number of its latest eviction still in `evicted`.
    latest: BlockHashMap<u64>,
}

/// One eviction from the prefix index.
#[derive(Debug, Clone, Copy)]
pub struct Evicted {
    hash: u64,
    since: Nanos,
    /// When it was evicted.
    pub at: Nanos,
    /// Sequence number of the previous eviction of the same hash (`u64::MAX`: none).
    prev: u64,
}

impl CacheHistory {
    /// Whether `hash` was in the index as seen at `t`, given its current entry.
    fn held_at(&self, current: Option<BlockId>, hash: u64, t: Nanos) -> bool {
        if current.is_some_and(|b| self.since[b as usize] < t) {
            return true;
        }
        let mut seq = self.latest.get(&hash).copied().unwrap_or(u64::MAX);
        while seq != u64::MAX && seq >= self.first {
            let e = &self.evicted[(seq - self.first) as usize];
            if e.at < t {
                return false;
            }
            if e.since < t {
                return true;
            }
            seq = e.prev;
        }
        false
    }

    fn record_eviction(&mut self, hash: u64, block: BlockId) {
        let seq = self.first + self.evicted.len() as u64;
        let prev = self.latest.insert(hash, seq).unwrap_or(u64::MAX);
        self.evicted.push_back(Evicted {
            hash,
            since: self.since[block as usize],
            at: self.clock,
            prev,
        });
    }

    /// Drops the evictions before `t`: nobody asks about earlier times any more.
    fn forget_before(&mut self, t: Nanos) {
        while let Some(e) = self.evicted.front().copied() {
            if e.at >= t {
                break;
            }
            if self.latest.get(&e.hash) == Some(&self.first) {
                self.latest.remove(&e.hash);
            }
            self.evicted.pop_front();
            self.first += 1;
        }
    }
}

impl BlockPool {
    /// A pool of `num_blocks` free, empty blocks, taken in id order; nothing is allocated per
    /// block until the block is first used.
    pub fn new(num_blocks: u32) -> BlockPool {
        BlockPool {
            blocks: Vec::new(),
            capacity: num_blocks,
            used: 0,
            stack: Some(Vec::new()),
            free: VecDeque::new(),
            stale: 0,
            num_free: num_blocks as usize,
            index: HashTable::new(),
            filter: LooseFilter {
                counts: Vec::new(),
                shift: 64,
            },
            history: None,
            thrash: None,
        }
    }

    /// Starts keeping the prefix index's history (see [`BlockPool::held_at`]); before its
    /// first change, so that the history is complete.
    pub fn keep_history(&mut self) {
        if self.history.is_none() {
            self.history = Some(Box::new(CacheHistory {
                since: vec![0; self.used as usize],
                ..CacheHistory::default()
            }));
        }
    }

    /// Starts remembering the evictions of the last `window_ns` ns (see
    /// [`BlockPool::evicted_lately`]).
    pub fn watch_thrashing(&mut self, window_ns: Nanos) {
        self.thrash = Some(Box::new(ThrashWatch {
            window: window_ns,
            ..ThrashWatch::default()
        }));
    }

    /// Whether the block with chained hash `hash` was evicted from the prefix index within
    /// the thrash window before the pool's clock (false unless watched).
    pub fn evicted_lately(&self, hash: u64) -> bool {
        self.thrash.as_ref().is_some_and(|t| {
            t.latest
                .get(&hash)
                .is_some_and(|&at| t.clock - at <= t.window)
        })
    }

    /// Stamps the changes that follow with time `now` (a no-op without history or thrash
    /// watch). Asked before every step is formed, and nearly always a no-op, so the test is
    /// inlined and the stamping called.
    #[inline]
    pub fn set_clock(&mut self, now: Nanos) {
        if self.history.is_some() || self.thrash.is_some() {
            self.stamp(now);
        }
    }

    /// [`BlockPool::set_clock`] of a pool that keeps its history or watches thrashing.
    #[cold]
    fn stamp(&mut self, now: Nanos) {
        if let Some(h) = &mut self.history {
            h.clock = now;
        }
        if let Some(t) = &mut self.thrash {
            t.clock = now;
            t.expire();
        }
    }

    /// Forgets the history before `t` (no later question is about an earlier time).
    pub fn forget_before(&mut self, t: Nanos) {
        if let Some(h) = &mut self.history {
            h.forget_before(t);
        }
    }

    /// Whether the block with chained hash `hash` was in the prefix index as a router saw it
    /// at `t` (indexed before `t`, not evicted before `t`); without history, whether it is
    /// now. `t` must not be older than the last [`BlockPool::forget_before`]. `parent` is as
    /// for [`BlockPool::lookup_after`]; the block holding `hash` now comes back too.
    pub fn held_after(
        &self,
        parent: Option<BlockId>,
        hash: u64,
        t: Nanos,
    ) -> (bool, Option<BlockId>) {
        let current = self.lookup_after(parent, hash);
        let held = match &self.history {
            Some(h) => h.held_at(current, hash, t),
            None => current.is_some(),
        };
        (held, current)
    }

    /// How many leading blocks of the chain `hashes` the index holds now, each of their
    /// blocks given to `found` in chain order.
    pub fn cached_prefix(&self, hashes: &[u64], mut found: impl FnMut(BlockId)) -> usize {
        let mut parent = None;
        (hashes.iter())
            .take_while(|&&h| {
                parent = self.lookup_after(parent, h);
                parent.inspect(|&b| found(b)).is_some()
            })
            .count()
    }

    /// The block the index holds for the last hash of the chain `hashes` (walked from its
    /// start, through the hashes it misses).
    fn holder_of_last(&self, hashes: &[u64]) -> Option<BlockId> {
        (hashes.iter()).fold(None, |parent, &h| self.lookup_after(parent, h))
    }

    /// The block the index holds for `hashes[i - 1]`, the chain parent of block `i` of a
    /// request whose blocks are `blocks` (`None` for the first block, or a parent the index
    /// does not hold): the request's own block when it is the indexed one, as it nearly
    /// always is.
    pub fn chain_parent(&self, blocks: &[BlockId], hashes: &[u64], i: usize) -> Option<BlockId> {
        let q = *blocks.get(i.checked_sub(1)?)?;
        self.chain_parent_of(q, hashes, i)
    }

    /// [`BlockPool::chain_parent`] of block `i` of a request whose block `i - 1` is `q`.
    pub fn chain_parent_of(&self, q: BlockId, hashes: &[u64], i: usize) -> Option<BlockId> {
        // On the stack no block has bookkeeping, nor a hash.
        match self.blocks.get(q as usize).and_then(Block::hash) == Some(hashes[i - 1]) {
            true => Some(q),
            false => self.holder_of_last(&hashes[..i]),
        }
    }

    /// Total blocks.
    pub fn num_blocks(&self) -> usize {
        self.capacity as usize
    }

    /// Blocks used at least once so far (the others have no bookkeeping yet).
    pub fn num_used_ever(&self) -> usize {
        self.used as usize
    }

    /// The next block never used before, pinned, if any is left.
    fn allocate_fresh(&mut self) -> Option<BlockId> {
        let b = self.used;
        if b >= self.capacity {
            return None;
        }
        self.used += 1;
        if self.stack.is_none() {
            self.blocks.push(Block::HELD);
        }
        if let Some(h) = &mut self.history {
            h.since.push(0);
        }
        self.num_free -= 1;
        Some(b)
    }

    /// Blocks on the free list (including cached blocks nobody holds).
    pub fn num_free(&self) -> usize {
        self.num_free
    }

    /// Blocks held by at least one request.
    pub fn num_pinned(&self) -> usize {
        self.num_blocks() - self.num_free
    }

    /// The cached block holding the block with chained hash `hash`, if any, given the block
    /// the index holds for the hash's chain parent (`None`: the chain's first block, or a
    /// parent the index does not hold). Lookups walk a chain from its start, passing each
    /// answer on as the next hash's parent.
    pub fn lookup_after(&self, parent: Option<BlockId>, hash: u64) -> Option<BlockId> {
        if let Some(q) = parent
            && let (Some(b), _) = self.child_with(q, hash)
        {
            return Some(b);
        }
        self.lookup_loose(hash)
    }

    /// The block carrying `hash` in the table, if any. Every computed block is looked for
    /// here before it is indexed, and the filter turns away nine in ten, so its test is
    /// inlined and only the probe is called.
    #[inline]
    fn lookup_loose(&self, hash: u64) -> Option<BlockId> {
        if !self.filter.may_hold(hash) {
            return None;
        }
        self.probe_loose(hash)
    }

    /// The block carrying `hash` in the table, if any, found by a probe.
    fn probe_loose(&self, hash: u64) -> Option<BlockId> {
        let blocks = &self.blocks;
        self.index.find(hash, carries(blocks, hash)).copied()
    }

    /// The child of `q` carrying `hash`, if any, and how many children were looked at.
    fn child_with(&self, q: BlockId, hash: u64) -> (Option<BlockId>, usize) {
        let mut c = self.blocks[q as usize].child;
        let mut seen = 0;
        while c != NIL {
            let child = &self.blocks[c as usize];
            if child.hash == hash {
                return (Some(c), seen);
            }
            seen += 1;
            c = child.sibling;
        }
        (None, seen)
    }

    /// Reference count of a block.
    pub fn ref_count(&self, block: BlockId) -> u32 {
        match &self.stack {
            // Not kept on the stack (see the module docs): held exactly when off it.
            Some(stack) => u32::from(!stack.contains(&block)),
            None => self.blocks[block as usize].ref_cnt,
        }
    }

    /// Hints that `n` blocks are about to be allocated in a row: fetches the bookkeeping of
    /// the first of the free list's blocks they would take (up to [`FETCH_AHEAD`] of them), so
    /// that those misses overlap rather than follow one another; [`BlockPool::pop_free`]
    /// fetches the later ones as it goes. It changes nothing.
    #[inline]
    pub fn expect_allocations(&self, n: usize) {
        if self.stack.is_some() {
            return;
        }
        for &(b, _) in self.free.iter().take(n.min(FETCH_AHEAD)) {
            prefetch(&self.blocks[b as usize]);
        }
    }

    /// Pops the least recently freed block, evicting its cached hash. `None` when empty.
    /// A block off the stack (nothing to evict, no bookkeeping) is taken inline; the rest
    /// is a call.
    #[inline]
    pub fn allocate(&mut self) -> Option<BlockId> {
        if let Some(stack) = &mut self.stack
            && let Some(b) = stack.pop()
        {
            self.num_free -= 1;
            return Some(b);
        }
        self.allocate_slow()
    }

    /// [`BlockPool::allocate`] past the stack's top: a fresh block, or, off the stack, the
    /// free list's head with its cached hash evicted.
    #[inline(never)]
    fn allocate_slow(&mut self) -> Option<BlockId> {
        let fresh = self.allocate_fresh();
        if fresh.is_some() || self.stack.is_some() {
            return fresh;
        }
        let b = self.pop_free()?;
        // Only the block carrying a hash is its index entry (a duplicate is never indexed).
        if self.blocks[b as usize].hashed() {
            self.unindex(b);
        }
        self.blocks[b as usize].ref_cnt = 1;
        Some(b)
    }

    /// Drops an evicted block's index entry: from the table bucket it is known to sit in
    /// (no probe, the entry itself not read) or from its parent's list; its own children,
    /// whose chain parent the index no longer holds, move to the table.
    fn unindex(&mut self, b: BlockId) {
        let block = self.blocks[b as usize];
        self.blocks[b as usize] = Block {
            ref_cnt: block.ref_cnt,
            turn: block.turn,
            ..Block::EMPTY
        };
        match block.bucket() {
            Some(bucket) => {
                if let Ok(entry) = self.index.get_bucket_entry(bucket) {
                    debug_assert_eq!(*entry.get(), b, "block {b}'s bucket names another block");
                    entry.remove();
                }
                self.filter.remove(block.hash);
            }
            None => self.drop_child(block.home, b, block.sibling),
        }
        let mut c = block.child;
        while c != NIL {
            let child = &mut self.blocks[c as usize];
            let next = std::mem::replace(&mut child.sibling, NIL);
            let hash = child.hash;
            self.insert_loose(c, hash);
            c = next;
        }
        if let Some(h) = &mut self.history {
            h.record_eviction(block.hash, b);
        }
        if let Some(t) = &mut self.thrash {
            t.record(block.hash);
        }
    }

    /// Takes `b` (whose next sibling is `after`) off `q`'s list of children.
    fn drop_child(&mut self, q: BlockId, b: BlockId, after: u32) {
        let first = &mut self.blocks[q as usize].child;
        if *first == b {
            *first = after;
            return;
        }
        let mut c = *first;
        while self.blocks[c as usize].sibling != b {
            c = self.blocks[c as usize].sibling;
        }
        self.blocks[c as usize].sibling = after;
    }

    /// Takes a reference on a cached block found by [`BlockPool::lookup_after`], pulling it off the
    /// free list if nobody held it. A shared block ends the stack (see the module docs).
    pub fn touch(&mut self, block: BlockId) {
        self.use_free_list();
        let rc = &mut self.blocks[block as usize].ref_cnt;
        *rc += 1;
        if *rc == 1 {
            // Its entry on the free list goes stale.
            self.num_free -= 1;
            self.stale += 1;
            self.sweep_stale();
        }
    }

    /// Drops one reference; a block nobody holds goes to the tail of the free list, keeping
    /// its hash so that it can still be hit until evicted.
    pub fn release(&mut self, block: BlockId) {
        self.release_all([block]);
    }

    /// Drops one reference on each of `blocks`, in their order, as [`BlockPool::release`]
    /// one by one would (a request frees its blocks last first:
    /// `release_all(blocks.iter().rev().copied())`). On the stack they are pushed in one go,
    /// their bookkeeping untouched; on the list, the bookkeeping of the block
    /// [`RELEASE_AHEAD`] places on is fetched meanwhile.
    pub fn release_all<I>(&mut self, blocks: I)
    where
        I: IntoIterator<Item = BlockId>,
        I::IntoIter: Clone,
    {
        if let Some(stack) = &mut self.stack {
            let before = stack.len();
            stack.extend(blocks);
            self.num_free += stack.len() - before;
            return;
        }
        let blocks = blocks.into_iter();
        let mut ahead = blocks.clone().skip(RELEASE_AHEAD);
        for block in blocks {
            if let Some(b) = ahead.next() {
                prefetch(&self.blocks[b as usize]);
            }
            let rc = &mut self.blocks[block as usize].ref_cnt;
            debug_assert!(*rc > 0, "release of a free block {block}");
            *rc -= 1;
            if *rc == 0 {
                self.push_tail(block);
            }
        }
    }

    /// Records that `block` holds the full block with chained hash `hash`, whose chain
    /// parent's hash the index holds in block `parent` (`None`: the chain's first block, or
    /// a parent the index does not hold; see [`BlockPool::chain_parent`]). The first block
    /// indexed under a hash keeps it; a duplicate stays unindexed. Returns the block that
    /// holds `hash` in the index now, the parent of the chain's next block.
    #[inline(always)]
    pub fn cache_after(&mut self, parent: Option<BlockId>, block: BlockId, hash: u64) -> BlockId {
        self.use_free_list();
        if self.blocks[block as usize].hashed() {
            return block;
        }
        let mut children = 0;
        if let Some(q) = parent {
            let (found, seen) = self.child_with(q, hash);
            if let Some(b) = found {
                return b;
            }
            children = seen;
        }
        if let Some(b) = self.lookup_loose(hash) {
            return b;
        }
        match parent {
            // A block id with the top bit set cannot be a `home` (it reads as a bucket).
            Some(q) if children < MAX_CHILDREN && q < LOOSE && self.blocks[q as usize].hashed() => {
                let first = std::mem::replace(&mut self.blocks[q as usize].child, block);
                let entry = &mut self.blocks[block as usize];
                (entry.home, entry.sibling, entry.hash) = (q, first, hash);
            }
            _ => self.insert_loose(block, hash),
        }
        if let Some(h) = &mut self.history {
            h.since[block as usize] = h.clock;
        }
        block
    }

    /// Whether indexing `block` under `hash` after `parent` ([`BlockPool::cache_after`]) puts
    /// it in the index, and the same way whatever the step takes off the free list before or
    /// after: the free list is in use (indexing would not end stack mode), no block carries
    /// `hash` yet, `parent` (if any) is its block's own indexed block with room for a child
    /// even before evictions, and nothing records when the index changes.
    pub fn indexes_alike(&self, parent: Option<BlockId>, block: BlockId, hash: u64) -> bool {
        if self.stack.is_some() || self.history.is_some() || self.thrash.is_some() {
            return false;
        }
        if self.blocks[block as usize].hashed() || self.lookup_loose(hash).is_some() {
            return false;
        }
        parent.is_none_or(|q| {
            let (found, children) = self.child_with(q, hash);
            found.is_none()
                && children < MAX_CHILDREN
                && q < LOOSE
                && self.blocks[q as usize].hashed()
        })
    }

    /// Indexes a run of a request's blocks as [`BlockPool::cache_after`] one after the other
    /// would: `blocks[k]` under `hashes[k]`, the first after `parent`, each later one after
    /// the block the index holds for the hash before it. One call for a chunk's blocks, with
    /// `cache_after` inlined into its loop.
    pub fn cache_run(&mut self, parent: Option<BlockId>, blocks: &[BlockId], hashes: &[u64]) {
        let mut parent = parent;
        for (&block, &hash) in blocks.iter().zip(hashes) {
            parent = Some(self.cache_after(parent, block, hash));
        }
    }

    /// [`BlockPool::cache_after`] for a block no index entry is the chain parent of.
    pub fn cache(&mut self, block: BlockId, hash: u64) {
        self.cache_after(None, block, hash);
    }

    /// Puts `block`, carrying `hash` and in the index nowhere yet, in the table.
    fn insert_loose(&mut self, block: BlockId, hash: u64) {
        self.reserve_entry();
        let blocks = &self.blocks;
        let by_hash = |&b: &BlockId| blocks[b as usize].hash;
        let bucket = self
            .index
            .insert_unique(hash, block, by_hash)
            .bucket_index();
        let bucket = u32::try_from(bucket)
            .ok()
            .filter(|&b| b < LOOSE - 1)
            .expect("a prefix table of fewer than 2^31 buckets");
        let entry = &mut self.blocks[block as usize];
        (entry.home, entry.hash) = (LOOSE | bucket, hash);
        self.filter.add(hash);
    }

    /// Makes room in the index for one more entry. A table that has to grow (or rehash in
    /// place) moves its entries, so every block's bucket is read back afterwards; the
    /// insertion that follows then moves none.
    fn reserve_entry(&mut self) {
        let moved = reserve_one(
            &mut self.index,
            &mut self.blocks,
            |block| block.hash,
            |block, bucket| block.home = LOOSE | bucket,
        );
        if moved {
            let blocks = &self.blocks;
            let hashes = self.index.iter().map(|&b| blocks[b as usize].hash);
            self.filter.rebuild(self.index.num_buckets(), hashes);
        }
    }

    /// Recounts the pool from scratch and checks its invariants: pinned + free = total, the
    /// free list holds exactly the blocks nobody references, and every index entry points at
    /// a block carrying that hash.
    pub fn audit(&self) -> Result<(), SchedulerBug> {
        let used = self.used as usize;
        let mut on_list = vec![false; used];
        // The blocks never used are free, off the stack and the list.
        let fresh = self.num_blocks() - used;
        let mut count = fresh;
        let mut mark = |b: BlockId| {
            if std::mem::replace(&mut on_list[b as usize], true) {
                return Err(format!("block {b} is twice on the free list"));
            }
            count += 1;
            Ok(())
        };
        match &self.stack {
            Some(stack) => {
                if !self.index.is_empty() || !self.free.is_empty() || !self.blocks.is_empty() {
                    return Err(SchedulerBug::new(
                        "the free stack is in use beside an index, a list or bookkeeping".into(),
                    ));
                }
                for &b in stack {
                    mark(b)?;
                }
            }
            None => {
                if self.blocks.len() != used {
                    return Err(format!(
                        "bookkeeping of {} blocks for {used} used",
                        self.blocks.len()
                    )
                    .into());
                }
                let mut stale = 0;
                for &(b, turn) in &self.free {
                    match self.is_live(b, turn) {
                        true => mark(b)?,
                        false => stale += 1,
                    }
                }
                if stale != self.stale {
                    return Err(format!(
                        "free list has {stale} stale entries, counter says {}",
                        self.stale
                    )
                    .into());
                }
            }
        }
        if count != self.num_free {
            return Err(format!(
                "free list has {count} blocks, counter says {}",
                self.num_free
            )
            .into());
        }
        // On the stack the counts are not kept: a block is held (once) exactly when off it.
        let ref_cnt = |i: usize| match self.blocks.get(i) {
            Some(b) => b.ref_cnt,
            None => u32::from(!on_list[i]),
        };
        for (i, &listed) in on_list.iter().enumerate() {
            let rc = ref_cnt(i);
            if (rc == 0) != listed {
                return Err(format!("block {i} has ref_cnt {rc} but on_free_list={listed}").into());
            }
        }
        let pinned = (0..used).filter(|&i| ref_cnt(i) > 0).count();
        if pinned + self.num_free != self.num_blocks() {
            return Err(format!(
                "pinned {pinned} + free {} != total {}",
                self.num_free,
                self.num_blocks()
            )
            .into());
        }
        self.audit_index()
    }

    /// Checks the index: every block carrying a hash is in the table (in the bucket it
    /// remembers, counted by the filter) or on its parent's list of children (the parent
    /// indexed, the list at most [`MAX_CHILDREN`] long), exactly once, and no two carry the
    /// same hash.
    fn audit_index(&self) -> Result<(), SchedulerBug> {
        let blocks = &self.blocks;
        let mut hashes = std::collections::HashSet::new();
        let mut loose = 0;
        for (b, block) in blocks.iter().enumerate() {
            let b = b as BlockId;
            let Some(h) = block.hash() else {
                if (block.child, block.sibling) != (NIL, NIL) {
                    return Err(format!("block {b} carries no hash but has index links").into());
                }
                continue;
            };
            if !hashes.insert(h) {
                return Err(format!("block {b}'s hash {h:#x} is indexed twice").into());
            }
            let found = match (block.bucket(), block.parent()) {
                (Some(bucket), _) => {
                    loose += 1;
                    self.filter.may_hold(h)
                        && self.index.get_bucket(bucket) == Some(&b)
                        && self.lookup_loose(h) == Some(b)
                }
                (None, Some(q)) => {
                    let siblings = blocks.get(q as usize).filter(|p| p.hashed());
                    siblings.is_some_and(|p| p.children(blocks).filter(|&c| c == b).count() == 1)
                }
                (None, None) => false,
            };
            if !found || block.children(blocks).count() > MAX_CHILDREN {
                return Err(
                    format!("block {b}'s index entry (home {:#x}) is amiss", block.home).into(),
                );
            }
            if block.children(blocks).any(|c| blocks[c as usize].home != b) {
                return Err(format!("a child of block {b} names another parent").into());
            }
        }
        if self.index.len() != loose {
            return Err(format!(
                "{} table entries for {loose} blocks in it",
                self.index.len()
            )
            .into());
        }
        Ok(())
    }

    /// Leaves stack mode, if the pool is still in it (see [`BlockPool::leave_stack`]): asked
    /// before every indexing and every hit, so the common answer (left already) is inlined.
    #[inline]
    fn use_free_list(&mut self) {
        if self.stack.is_some() {
            self.leave_stack();
        }
    }

    /// Leaves stack mode: the free blocks, all without a hash and so interchangeable, form
    /// the free list (oldest freed first, after the blocks never used).
    #[cold]
    fn leave_stack(&mut self) {
        if let Some(stack) = self.stack.take() {
            // The bookkeeping, not kept on the stack: held once if off it.
            self.blocks = vec![Block::HELD; self.used as usize];
            for &b in &stack {
                self.blocks[b as usize].ref_cnt = 0;
            }
            self.num_free = self.num_blocks() - self.used as usize;
            for b in stack {
                self.push_tail(b);
            }
        }
    }

    /// Puts `b`, which nobody holds now, at the tail of the free list.
    fn push_tail(&mut self, b: BlockId) {
        let block = &mut self.blocks[b as usize];
        block.turn = block.turn.wrapping_add(1);
        self.free.push_back((b, block.turn));
        self.num_free += 1;
    }

    /// Whether the free-list entry `(b, turn)` is live (see [`BlockPool::free`]).
    fn is_live(&self, b: BlockId, turn: u32) -> bool {
        live(&self.blocks, b, turn)
    }

    /// Takes the least recently freed block off the free list (skipping stale entries),
    /// fetching meanwhile the bookkeeping of the block [`FETCH_AHEAD`] entries behind it.
    fn pop_free(&mut self) -> Option<BlockId> {
        while let Some((b, turn)) = self.free.pop_front() {
            if let Some(&(ahead, _)) = self.free.get(FETCH_AHEAD) {
                prefetch(&self.blocks[ahead as usize]);
            }
            if let Some(entry) = self.free.get(LIST_AHEAD) {
                super::warm::line(entry);
            }
            if self.is_live(b, turn) {
                self.num_free -= 1;
                return Some(b);
            }
            self.stale -= 1;
        }
        None
    }

    /// Sweeps the stale entries out of the free list once they outnumber the live ones
    /// (and a few), so that the list stays within about twice the free blocks. A block
    /// turns 2^32 times only after as many entries of it went stale, so a swept list never
    /// holds a stale entry whose turn came round again.
    fn sweep_stale(&mut self) {
        if self.stale <= 64 || 2 * self.stale <= self.free.len() {
            return;
        }
        let blocks = &self.blocks;
        self.free.retain(|&(b, turn)| live(blocks, b, turn));
        self.stale = 0;
    }
}

/// Whether the free-list entry `(b, turn)` is live: nobody holds `b` and this is its latest
/// turn on the list.
fn live(blocks: &[Block], b: BlockId, turn: u32) -> bool {
    let block = &blocks[b as usize];
    block.ref_cnt == 0 && block.turn == turn
}
