//! Decode stretches: requests stepped in bulk while the batch around them changes.
//!
//! A request that decodes steadily (one token a step, nothing of its prompt left, its blocks
//! exactly those of its context, its full blocks indexed in the prefix cache) is stepped
//! without being visited: it joins the instance's *members*, which lead the running order,
//! the step and its batch. Each later step allocates the KV blocks of the members whose last block
//! filled (members are bucketed by when their blocks fill, so the blocks are taken in the
//! order single steps take them, at the same pool clock), and forms the rest of the step
//! (requests behind the members, admissions) the usual way. A member is visited once more
//! when it finishes: it is brought up to date (its progress, its token times as one run of
//! consecutive steps) and completes as any request would. So an arrival or a finish costs
//! work for its own request only, and the steps in between cost work per step, not per
//! request. Members are kept by an id that does not change while they are members, their
//! finishing steps in a min-heap and their blocks in their buckets' entries: a finish reads
//! the members that finish, not every member, and members leaving move no other member and
//! rebuild no bucket.
//!
//! A member whose output has token ids (a session that carries its context on) fills blocks
//! the prefix cache indexes: the step that fills one indexes it, as single steps do. It is
//! visited then, once a block, and only where that is exact whatever the step allocates
//! around it ([`BlockPool::indexes_alike`]: nothing indexed under its hash yet, its own
//! previous block the chain parent); else the stretch is settled.
//!
//! Nor are the members' batch items written every step: every member's context grows by one
//! a step, so each item holds its context less the steps since it was last written
//! (`Stretch::lag`, wrapping), and the items are written, to exactly the values single steps
//! give, only when something reads them one by one ([`Scheduler::written_batch`] and
//! [`Scheduler::completed_batch`]: a backend that prices the step from its items, a step
//! with requests behind the members, an observer of the completed step; a settle). A step
//! that the backend prices from the members' sums ([`DecodeLead`], formed by
//! [`Scheduler::form_step`]) writes no member's item.
//!
//! Everything is brought up to date ([`Scheduler::settle_stretch`]) when the members' blocks
//! do not fit (where a preemption could follow), or when something reaches into the running
//! requests from outside: a cancellation or an eviction. Stretches need one step in flight at
//! a time (no pipeline), no prefill hand-off, and LIFO preemption (a victim is then always
//! behind the members) or priority preemption where the step's free blocks rule out any
//! preemption (else the stretch is settled first). With a lower tier of the prefix cache,
//! members that fill indexed blocks settle the stretch: a fill may complete a coarse block to
//! write down, which single steps do as they index it. The anomaly watch reads only
//! admissions and the prefix cache's evictions and lookups, which stretches leave as single
//! steps make them (the pool's clock is set before a stretch takes its blocks). The engine
//! still sees one step per step, priced by the backend as before, so every output is the
//! same as stepping one at a time.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Range;

use super::request::Phase;
use super::{BlockId, BlockPool, Completions, PreemptionOrder, Scheduler};
use crate::Nanos;
use crate::latency::{BatchItem, DecodeLead};

/// A request stepped in bulk, and where it stood when it joined. Members are kept by a
/// stable id (their index in [`Stretch::members`]) so that members leaving move no other
/// member, and its buckets need no rebuilding.
#[derive(Debug)]
struct Member {
    slot: u32,
    /// Its bucket: a step formed as the instance's `f`-th, `f % block_size == key`, gives it
    /// a new block.
    key: u32,
    /// Its computed tokens, and the instance's steps formed, when it joined.
    computed: u32,
    formed: u64,
    /// Its reached tokens once the instance has completed `completed` steps (the step it
    /// joined after included).
    reached: u32,
    completed: u64,
    /// The index of the completed step that produces its last token (`LEFT` once it has).
    finish: u64,
}

/// How many of a member's newest blocks its bucket entry holds in itself (see [`Holding`]).
const TAIL: usize = 8;

/// A member's KV blocks, moved here from the request while it is a member (so that a step's
/// new blocks are added without visiting the request or the member), in its bucket. The
/// newest blocks (up to [`TAIL`]) sit in the entry itself and go to the list only when the
/// next one does not fit: a step's new block is written into the cache line the step reads
/// anyway, not at the end of a list of its own elsewhere (with hundreds of instances taking
/// turns, each such end was a miss of its own).
#[derive(Debug)]
#[repr(C, align(64))]
struct Holding {
    member: u32,
    /// How many blocks `tail` holds.
    held: u16,
    /// Whether the member indexes the blocks it fills (it has hashes for blocks it has not
    /// filled yet).
    indexes: bool,
    /// The member's blocks but those in `tail`.
    blocks: Vec<BlockId>,
    /// Its newest blocks, after `blocks`.
    tail: [BlockId; TAIL],
}

// One entry a cache line.
const _: () = assert!(size_of::<Holding>() == 64);

impl Holding {
    fn new(member: u32, blocks: Vec<BlockId>, indexes: bool) -> Holding {
        Holding {
            member,
            held: 0,
            indexes,
            blocks,
            tail: [0; TAIL],
        }
    }

    /// Adds the member's next block.
    #[inline]
    fn push(&mut self, block: BlockId) {
        if self.held as usize == TAIL {
            self.flush();
        }
        self.tail[self.held as usize] = block;
        self.held += 1;
    }

    /// Moves the blocks in `tail` to the list.
    fn flush(&mut self) {
        self.blocks
            .extend_from_slice(&self.tail[..self.held as usize]);
        self.held = 0;
    }

    /// The member's blocks as one list, taken out of the entry.
    fn take_blocks(&mut self) -> Vec<BlockId> {
        self.flush();
        std::mem::take(&mut self.blocks)
    }

    /// The member's last block and the one before it, if any.
    fn last_two(&self) -> (BlockId, Option<BlockId>) {
        match (&self.blocks[..], &self.tail[..self.held as usize]) {
            (_, [.., before, last]) => (*last, Some(*before)),
            (blocks, [last]) => (*last, blocks.last().copied()),
            ([.., before, last], []) => (*last, Some(*before)),
            ([last], []) => (*last, None),
            ([], []) => unreachable!("a member holds the blocks of its context"),
        }
    }

    /// The member's blocks, in order.
    fn all_blocks(&self) -> Vec<BlockId> {
        [&self.blocks[..], &self.tail[..self.held as usize]].concat()
    }
}

/// A member's finishing step in [`Stretch::finishes`], with its request's slot, so that the
/// step can be warmed without reading the member (in the 16 bytes a step and an id take).
/// Ordered by step, then id (ids are unique among members).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Finish {
    step: u64,
    id: u32,
    slot: u32,
}

/// The block a stretch member fills with the step being formed, which the prefix cache
/// indexes then (see [`Scheduler::index_filled`]).
struct Filled {
    /// The member's request's slot.
    slot: u32,
    /// The block's index among the request's blocks, and its hash.
    index: usize,
    hash: u64,
    /// The block, and the one before it (its chain parent), if any.
    block: BlockId,
    before: Option<BlockId>,
}

/// [`Member::finish`] of a member that finished (it is dropped when the next step is formed).
const LEFT: u64 = u64::MAX;

/// The KV reads (`context + 1`) of the members leaving a stretch: their sum and the longest.
#[derive(Debug, Default)]
struct LeftReads {
    sum: u64,
    longest: u64,
}

impl LeftReads {
    /// Adds the read of a leaving member's batch item, which lags `lag` steps behind.
    fn note(&mut self, item: &BatchItem, lag: u32) {
        let read = read_of(item, lag);
        self.sum += read;
        self.longest = self.longest.max(read);
    }
}

/// The KV read (`context + 1`) of a member's batch item that lags `lag` steps behind.
#[inline]
fn read_of(item: &BatchItem, lag: u32) -> u64 {
    u64::from(item.context_tokens.wrapping_add(lag)) + 1
}

/// Whether `req` has indexed every full block it has (those it has hashes for): all of them,
/// or, where a member's blocks can be indexed in bulk (blocks of more than one token, so that
/// a block fills a step before the next is taken, and a pool that records nothing of when its
/// index changes), those so far, the next ones being indexed as the member fills them.
fn indexed_alike(req: &super::RunningRequest, bs: u32, pool: &BlockPool) -> bool {
    req.cached_blocks >= req.hashes.len()
        || (bs > 1 && pool.history.is_none() && req.cached_blocks == (req.computed / bs) as usize)
}

/// Closing the gaps that the places `left` (ascending, with their ids) leave in a list of
/// `len`: for each place, the run of places after it up to the next one (or `len`), and where
/// that run moves down to. Copied in order, the runs leave the list's first `len - left.len()`
/// places holding what stays, in order.
pub(super) fn runs_kept(
    left: &[(u32, u32)],
    len: usize,
) -> impl Iterator<Item = (Range<usize>, usize)> + '_ {
    let first = left.first().map_or(len, |&(p, _)| p as usize);
    left.iter()
        .enumerate()
        .scan(first, move |kept, (i, &(p, _))| {
            let from = p as usize + 1;
            let to = left.get(i + 1).map_or(len, |&(q, _)| q as usize);
            let at = *kept;
            *kept += to - from;
            Some((from..to, at))
        })
}

/// The members of an instance, its buffers reused from one stretch to the next. Laid out
/// (`repr(C)`) with what every step reads first (the warming's heap top and buckets, the
/// members' count and sums), then what only steps that finish or admit members read.
#[derive(Debug, Default)]
#[repr(C)]
pub(super) struct Stretch {
    /// The members that have not finished, earliest finish first.
    finishes: BinaryHeap<Reverse<Finish>>,
    /// Per bucket, its members' blocks in running order.
    buckets: Vec<Vec<Holding>>,
    /// The members' ids in running order: the first `order.len()` entries of `running`, of
    /// the step and of its batch.
    order: Vec<u32>,
    /// Members that finished and are still listed: their positions (ascending) and ids.
    left: Vec<(u32, u32)>,
    /// How many members lead the step in flight.
    in_flight: usize,
    /// How many steps the members' batch items (the first `order.len()` of the batch) lag
    /// behind: each holds its context less this, wrapping (see the module docs).
    lag: u32,
    /// How many members index the blocks they fill ([`Holding::indexes`]): without any, a
    /// step reads no bucket but the one taking new blocks.
    indexing: u32,
    /// The members' KV reads in the last formed step (`context + 1` each, summed) and the
    /// longest, kept as members join, grow and leave.
    kv_tokens: u64,
    longest: u64,
    /// The lead of the last formed step: its members, as pricing reads them.
    formed_lead: DecodeLead,
    /// By id; the ids in `free_ids` are unused.
    members: Vec<Member>,
    free_ids: Vec<u32>,
    /// Scratch: the ids of the members finishing with the step completed now.
    finishing: Vec<u32>,
}

impl Stretch {
    /// How many members lead the step in flight.
    pub fn members_in_flight(&self) -> usize {
        self.in_flight
    }

    /// Whether the members' batch items hold their values (none lags, see the module docs).
    pub fn items_written(&self) -> bool {
        self.lag == 0
    }

    /// The members as the lead of the step formed last ([`DecodeLead`]).
    pub fn formed_lead(&self) -> DecodeLead {
        self.formed_lead
    }

    /// Notes the step just formed: its lead is the members now.
    pub(super) fn note_formed(&mut self) {
        self.formed_lead = DecodeLead {
            count: self.order.len(),
            kv_tokens: self.kv_tokens,
            longest: self.longest,
        };
    }

    /// Warms what giving bucket `key` its new blocks touches: the bucket's entries (which
    /// take the blocks, a list's end only once in [`TAIL`] blocks).
    pub(super) fn warm(&self, key: usize) {
        if let Some(bucket) = self.buckets.get(key) {
            super::warm::slice(bucket);
        }
    }

    /// Warms what completing the `index`-th step touches first for the earliest member it
    /// finishes, if any: the member and its request among `slots`.
    pub(super) fn warm_finishing<T>(&self, index: u64, slots: &[T]) {
        let Some(&Reverse(next)) = self.finishes.peek() else {
            return;
        };
        if next.step != index {
            return;
        }
        if let Some(member) = self.members.get(next.id as usize) {
            super::warm::value(member);
        }
        if let Some(request) = slots.get(next.slot as usize) {
            super::warm::value(request);
        }
    }

    /// The earliest completed step whose token a member has not noted yet (see
    /// [`Scheduler::settle_stretch`]), if any member.
    pub fn first_unsettled(&self) -> Option<u64> {
        let members = &self.members;
        self.order
            .iter()
            .map(|&id| members[id as usize].completed)
            .min()
    }

    /// The places (ascending) and ids of the members that finished with the step just
    /// completed, if they are all of the `leaving` requests that left with it: a member's
    /// place in the running set is its place among the members.
    pub(super) fn left_members(&self, leaving: usize) -> Option<&[(u32, u32)]> {
        (!self.left.is_empty() && self.left.len() == leaving).then_some(&self.left[..])
    }

    /// Adds `member` under an unused id, returns the id.
    fn add(&mut self, member: Member) -> u32 {
        if let Some(id) = self.free_ids.pop() {
            self.members[id as usize] = member;
            return id;
        }
        self.members.push(member);
        (self.members.len() - 1) as u32
    }

    /// The entry holding member `id`'s blocks while it is one.
    fn holding(&mut self, id: u32) -> &mut Holding {
        let key = self.members[id as usize].key as usize;
        let mut bucket = self.buckets[key].iter_mut();
        let h = bucket.find(|h| h.member == id);
        h.expect("a member holds its blocks in its bucket")
    }

    /// Forgets every member.
    fn clear(&mut self) {
        self.members.clear();
        self.free_ids.clear();
        self.order.clear();
        for bucket in &mut self.buckets {
            bucket.clear();
        }
        self.finishes.clear();
        self.left.clear();
        self.in_flight = 0;
        self.lag = 0;
        self.indexing = 0;
        (self.kv_tokens, self.longest) = (0, 0);
    }
}

impl Scheduler {
    /// The KV blocks of each slot holding a request, slot by slot: a stretch member's own
    /// while it is one, else the request's.
    pub fn blocks_by_slot(&self) -> Vec<Vec<BlockId>> {
        let st = &self.stretch;
        let member = |slot: usize| {
            let live = |h: &&Holding| {
                let m = &st.members[h.member as usize];
                m.slot as usize == slot && m.finish != LEFT
            };
            st.buckets.iter().flatten().find(live)
        };
        (self.slots.iter().enumerate())
            .filter_map(|(k, r)| {
                Some(member(k).map_or(r.as_ref()?.blocks.clone(), Holding::all_blocks))
            })
            .collect()
    }

    /// Whether completing the step in flight would end no request: every entry of it is a
    /// stretch member (so nothing is handed off or cancelled with it) and none finishes with
    /// it. Completing it then changes nothing but the instance's own state.
    pub fn in_flight_ends_nothing(&self) -> bool {
        let m = self.stretch.in_flight;
        let index = self.step_finish_ns.count();
        m > 0
            && m == self.step.len()
            && self.cancelled.is_empty()
            && (self.stretch.finishes.peek()).is_none_or(|f| f.0.step != index)
    }

    /// How many stretch members lead the step in flight.
    pub fn stretch_members_in_flight(&self) -> usize {
        self.stretch.members_in_flight()
    }

    /// Turns decode stretches on or off (on by default); off, every step visits its requests.
    pub fn step_in_stretches(&mut self, on: bool) {
        self.settle_stretch();
        self.stretches = on;
    }

    /// Whether this instance may step requests in bulk at all.
    fn stretch_allowed(&self) -> bool {
        self.stretches
            && self.depth == 1
            && !self.hand_off
            && matches!(
                self.preemption,
                PreemptionOrder::Lifo | PreemptionOrder::Priority
            )
    }

    /// The most blocks the running requests behind the `m` members can take in the step
    /// formed now, where a preemption could pick a member as its victim (priority
    /// preemption); 0 under LIFO, whose victim is always behind the members. A request
    /// computing `t` new tokens takes at most `⌈t / block⌉` blocks, and the requests behind
    /// the members compute at most the budget the members leave, so a step whose free blocks
    /// cover the members' and this many preempts nobody.
    fn blocks_behind_members(&self, m: usize) -> usize {
        if self.preemption == PreemptionOrder::Lifo {
            return 0;
        }
        let budget = self.config.max_num_batched_tokens.saturating_sub(m as u32);
        let behind = self.running.len().saturating_sub(m);
        (budget / self.config.block_size) as usize + behind
    }

    /// Before the next step is formed at `now`: drops the members that finished, gives the
    /// others their next token's blocks and batch items; returns how many members lead the
    /// step (0, everything settled, when their blocks do not fit).
    pub(super) fn advance_stretch(&mut self, now: Nanos) -> usize {
        if !self.stretch.left.is_empty() {
            self.drop_left_members();
        }
        let m = self.stretch.order.len();
        if m == 0 {
            return 0;
        }
        let bs = u64::from(self.config.block_size);
        let key = ((self.formed + 1) % bs) as usize;
        // Members whose last block fills with this step, and which index it (as single steps
        // do); the step allocates the next block of those in bucket `key`.
        let filling = ((self.formed + 2) % bs) as usize;
        // A lower tier takes the coarse blocks a fill completes, as single steps write them
        // down: members that index settle the stretch there.
        let indexing = self.stretch.indexing > 0;
        let taken = self.stretch.buckets[key].len() + self.blocks_behind_members(m);
        let settles = indexing && (self.lower.is_some() || !self.fills_alike(filling));
        if taken > self.pool.num_free() || settles {
            self.settle_stretch();
            return 0;
        }
        self.pool.set_clock(now);
        for h in &mut self.stretch.buckets[key] {
            h.push(self.pool.allocate().expect("checked free blocks"));
        }
        if indexing {
            self.index_filled(filling);
        }
        // Every member's context grows by one: their items are written when read.
        self.stretch.lag = self.stretch.lag.wrapping_add(1);
        self.stretch.kv_tokens += m as u64;
        self.stretch.longest += 1;
        self.stretch.in_flight = m;
        m
    }

    /// The block that the member of entry `h`, in the bucket filling its last block with the
    /// step formed now, fills, if its request has a hash for it.
    fn filled_block(&self, h: &Holding) -> Option<Filled> {
        let member = &self.stretch.members[h.member as usize];
        let computed = member.computed + (self.formed - member.formed) as u32;
        let index = (computed / self.config.block_size) as usize;
        let req = self.slots[member.slot as usize].as_ref()?;
        let &hash = req.hashes.get(index)?;
        let (block, before) = h.last_two();
        Some(Filled {
            slot: member.slot,
            index,
            hash,
            block,
            before,
        })
    }

    /// Whether the members of bucket `filling` index the blocks they fill with the step
    /// formed now exactly as single steps would, whatever the step allocates around them
    /// ([`BlockPool::indexes_alike`]): else the stretch is settled and the step formed one
    /// request at a time.
    fn fills_alike(&self, filling: usize) -> bool {
        let bucket = self.stretch.buckets[filling].iter();
        bucket.filter(|h| h.indexes).all(|h| {
            let Some(f) = self.filled_block(h) else {
                return true;
            };
            let req = self.slots[f.slot as usize].as_ref().expect("member slot");
            // Its own block before is the chain parent single steps would find.
            let parent = match (f.index, f.before) {
                (0, _) => None,
                (k, Some(q)) if self.pool.chain_parent_of(q, &req.hashes, k) == Some(q) => Some(q),
                _ => return false,
            };
            self.pool.indexes_alike(parent, f.block, f.hash)
        })
    }

    /// Indexes the blocks the members of bucket `filling` fill with the step formed now,
    /// in running order, as single steps do ([`Scheduler::fills_alike`] checked first).
    fn index_filled(&mut self, filling: usize) {
        for i in 0..self.stretch.buckets[filling].len() {
            let h = &self.stretch.buckets[filling][i];
            if !h.indexes {
                continue;
            }
            let Some(f) = self.filled_block(h) else {
                self.stop_indexing(filling, i);
                continue;
            };
            let parent = f.before.filter(|_| f.index > 0);
            self.pool.cache_run(parent, &[f.block], &[f.hash]);
            let req = self.slots[f.slot as usize].as_mut().expect("member slot");
            req.cached_blocks = f.index + 1;
            if req.cached_blocks == req.hashes.len() {
                // Its last hashed block is indexed: it has nothing left to index.
                self.stop_indexing(filling, i);
            }
        }
    }

    /// The `i`-th member of bucket `filling` has no block left to index.
    fn stop_indexing(&mut self, filling: usize, i: usize) {
        let st = &mut self.stretch;
        if std::mem::take(&mut st.buckets[filling][i].indexes) {
            st.indexing -= 1;
        }
    }

    /// Removes the members that finished from the members, their buckets, the step and its
    /// batch (the step's entries behind the members are dropped: the next step forms them),
    /// and takes their KV reads off the members' sums.
    fn drop_left_members(&mut self) {
        let st = &mut self.stretch;
        let kept = st.order.len() - st.left.len();
        let mut read = LeftReads::default();
        // Those before the first that left stay where they are; each run of members between
        // two that left moves down in one copy.
        for (run, to) in runs_kept(&st.left, st.order.len()) {
            read.note(&self.step_items[run.start - 1], st.lag);
            self.step.copy_within(run.clone(), to);
            self.step_items.copy_within(run.clone(), to);
            st.order.copy_within(run, to);
        }
        for &(_, id) in &st.left {
            let bucket = &mut st.buckets[st.members[id as usize].key as usize];
            let at = bucket.iter().position(|h| h.member == id);
            let left = bucket.remove(at.expect("a member is in its bucket"));
            st.indexing -= u32::from(left.indexes);
            st.free_ids.push(id);
        }
        st.left.clear();
        st.order.truncate(kept);
        self.step.truncate(kept);
        self.step_items.truncate(kept);
        st.kv_tokens -= read.sum;
        if kept == 0 {
            st.lag = 0;
        }
        // The longest read is another member's unless one of those that left had it.
        let lag = st.lag;
        if read.longest == st.longest {
            let reads = self.step_items.iter().map(|b| read_of(b, lag));
            st.longest = reads.max().unwrap_or(0);
        }
        debug_assert_eq!(
            (self.step_items.iter()).fold((0, 0), |(sum, top), b| {
                (sum + read_of(b, lag), u64::max(top, read_of(b, lag)))
            }),
            (st.kv_tokens, st.longest),
            "the members' sums are their items' sums"
        );
    }

    /// Writes the members' batch items (those of the step formed last, and of members that
    /// finished with it) as single steps would have left them (see the module docs).
    pub(super) fn write_member_items(&mut self) {
        let lag = std::mem::take(&mut self.stretch.lag);
        if lag == 0 {
            return;
        }
        let m = self.stretch.order.len();
        // Whole items written (a member's is a decode), so that the adds run side by side.
        for item in &mut self.step_items[..m] {
            *item = BatchItem {
                new_tokens: 1,
                context_tokens: item.context_tokens.wrapping_add(lag),
            };
        }
    }

    /// After a step was formed: the steady decoders right behind the members (in running
    /// order) join them.
    pub(super) fn join_stretch(&mut self) {
        if !self.stretch_allowed() || self.step_recall_tokens > 0 {
            return;
        }
        let bs = self.config.block_size;
        let st = &mut self.stretch;
        if st.order.is_empty() {
            (st.kv_tokens, st.longest, st.lag) = (0, 0, 0);
        }
        if st.buckets.len() != bs as usize {
            st.buckets.resize_with(bs as usize, Vec::new);
        }
        // The step formed now completes as the `completed - 1`-th.
        let completed = self.step_finish_ns.count() + 1;
        let mut p = st.order.len();
        while p < self.step.len() && self.running.get(p) == Some(&self.step[p].slot) {
            let s = self.step[p];
            let req = self.slots[s.slot as usize]
                .as_mut()
                .expect("scheduled slot");
            let steady = s.new_tokens == 1
                && req.phase == Phase::Decode
                && req.computed == req.reached
                && req.blocks.len() == req.computed.div_ceil(bs) as usize
                && indexed_alike(req, bs, &self.pool)
                && req.target - req.computed >= 2;
            if !steady {
                break;
            }
            let key = ((self.formed + 1) % u64::from(bs) + u64::from(bs - req.computed % bs))
                % u64::from(bs);
            // Its reached tokens once the step formed now completes, and the step its last
            // token comes with.
            let reached = req.computed + 1;
            let finish = completed + u64::from(req.target - reached) - 1;
            let id = st.add(Member {
                slot: s.slot,
                key: key as u32,
                computed: req.computed,
                formed: self.formed,
                reached,
                completed,
                finish,
            });
            st.order.push(id);
            let blocks = std::mem::take(&mut req.blocks);
            let indexes = req.cached_blocks < req.hashes.len();
            st.indexing += u32::from(indexes);
            st.buckets[key as usize].push(Holding::new(id, blocks, indexes));
            st.finishes.push(Reverse(Finish {
                step: finish,
                id,
                slot: s.slot,
            }));
            // Its item, written now, lags as the other members' do.
            let item = &mut self.step_items[p];
            let read = u64::from(item.context_tokens) + 1;
            item.context_tokens = item.context_tokens.wrapping_sub(st.lag);
            st.kv_tokens += read;
            st.longest = st.longest.max(read);
            p += 1;
        }
    }

    /// Completes the members' part of the step in flight, the `index`-th completed step,
    /// which finished at `finish`: counts their tokens and completes the members it
    /// finishes as single steps would. Returns whether any finished.
    pub(super) fn complete_members(
        &mut self,
        index: u64,
        finish: Nanos,
        instance_id: u32,
        finished: &mut Completions,
    ) -> bool {
        let m = std::mem::take(&mut self.stretch.in_flight);
        let st = &mut self.stretch;
        while let Some(&Reverse(next)) = st.finishes.peek()
            && next.step == index
        {
            st.finishes.pop();
            st.finishing.push(next.id);
            // Settling it reads the member and its request first: fetched while the
            // members are searched for it.
            super::warm::value(&st.members[next.id as usize]);
            if let Some(request) = self.slots.get(next.slot as usize) {
                super::warm::value(request);
            }
        }
        let done = st.finishing.len();
        if done > 0 {
            // In running order, as single steps complete them.
            for k in 0..m {
                let id = self.stretch.order[k];
                if self.stretch.finishing.contains(&id) {
                    self.settle_member(id, k, index);
                    self.complete_entry(self.step[k], index, finish, instance_id, finished);
                    self.stretch.members[id as usize].finish = LEFT;
                    self.stretch.left.push((k as u32, id));
                }
            }
            self.stretch.finishing.clear();
        }
        self.last_step_tokens.generated += (m - done) as u64;
        done > 0
    }

    /// Brings member `id`, at position `k`, up to the steps formed so far and the first
    /// `completed` steps completed, and its step entry with it; gives it its blocks back.
    fn settle_member(&mut self, id: u32, k: usize, completed: u64) {
        let blocks = self.stretch.holding(id).take_blocks();
        let member = &self.stretch.members[id as usize];
        let req = self.slots[member.slot as usize]
            .as_mut()
            .expect("member slot");
        req.blocks = blocks;
        req.computed = member.computed + (self.formed - member.formed) as u32;
        if completed > member.completed {
            let n = (completed - member.completed) as u32;
            req.reached = member.reached + n;
            req.note_tokens(member.completed, n);
        }
        self.step[k].upto = req.computed;
    }

    /// Ends the stretch, if any: brings each member up to the steps formed and completed,
    /// as single steps would have left it; the step in flight then completes as a single
    /// step.
    pub(super) fn settle_stretch(&mut self) {
        if self.stretch.order.is_empty() {
            return;
        }
        self.write_member_items();
        let completed = self.step_finish_ns.count();
        for k in 0..self.stretch.order.len() {
            let id = self.stretch.order[k];
            if self.stretch.members[id as usize].finish != LEFT {
                self.settle_member(id, k, completed);
            }
        }
        self.stretch.clear();
    }
}
