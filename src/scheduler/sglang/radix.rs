//! SGLang's radix-tree prefix cache (`mem_cache/radix_cache.py`), at page granularity, with
//! the KV page pool it shares with the requests.
//!
//! Keys are one `u64` per full page of a sequence: at one token per page the token id (as
//! SGLang's own tree keys), at larger pages the page's chained hash
//! ([`crate::scheduler::request_block_hashes`] at the page size), so two sequences share a
//! node exactly where they share a page-aligned token prefix. A router's lookup comes with
//! chained hashes at every page size ([`RadixCache::cached_chain`]). A node holds a run of pages
//! (the tree is compressed: a segment inserted at once stays one node until a later match
//! or insert ends inside it and splits it). As in SGLang:
//! - a request **locks** the path to the node its KV reaches (`lock_ref` up to the root);
//!   locked pages are *protected*, the others *evictable*;
//! - a lookup or insert **touches** every node on its path (its last-access time);
//! - [`RadixCache::evict`] frees whole unlocked **leaves**, least recently used first, a
//!   parent becoming a leaf in turn, until enough pages are free (it may free more than asked:
//!   a leaf goes whole).
//!
//! Access times come from a counter bumped on every lookup and insert, where SGLang reads
//! `time.monotonic()`: the same order, deterministic.
//!
//! The pool counts pages only: `total` of them, held by the tree (evictable or protected) or
//! privately by requests (pages not in the tree: a prompt being computed, the partial last
//! page, decoded tokens), the rest free.

use super::keys::chain_one;
use crate::scheduler::SchedulerBug;
use crate::scheduler::kv::CHAIN_SEED;
use std::collections::{BTreeMap, BTreeSet};

/// A node of the tree (an index into its arena; the root is 0).
pub type NodeId = u32;

/// The root: the empty prefix, never evicted.
pub const ROOT: NodeId = 0;

#[derive(Debug, Clone)]
struct Node {
    /// The page keys of this node's segment.
    key: Segment,
    parent: NodeId,
    /// Children by the key of their first page.
    children: BTreeMap<u64, NodeId>,
    /// When the node took its place among its parent's children: SGLang's children are a
    /// dict, kept in insertion order (a split node's upper half takes the place it had).
    order: u64,
    /// Requests whose locked path runs through here.
    lock_ref: u32,
    last_access: u64,
}

/// The radix cache and page pool of one SGLang instance (see the module docs).
#[derive(Debug)]
pub struct RadixCache {
    nodes: Vec<Node>,
    free_nodes: Vec<NodeId>,
    /// Unlocked leaves, by (last access, id): eviction order.
    leaves: BTreeSet<(u64, NodeId)>,
    clock: u64,
    /// Nodes made so far (the next node's `order`).
    made: u64,
    total_pages: u64,
    evictable_pages: u64,
    protected_pages: u64,
    /// Pages requests hold outside the tree.
    private_pages: u64,
    /// `--disable-radix-cache`: nothing is matched or inserted (SGLang's chunk cache).
    disabled: bool,
    /// Keys are token ids (one token per page), not chained hashes.
    token_keys: bool,
}

impl RadixCache {
    /// An empty tree over a pool of `total_pages` pages.
    pub fn new(total_pages: u64, disabled: bool) -> RadixCache {
        let root = Node {
            key: Segment::default(),
            parent: ROOT,
            children: BTreeMap::new(),
            lock_ref: 1,
            last_access: 0,
            order: 0,
        };
        RadixCache {
            nodes: vec![root],
            free_nodes: Vec::new(),
            leaves: BTreeSet::new(),
            clock: 0,
            made: 0,
            total_pages,
            evictable_pages: 0,
            protected_pages: 0,
            private_pages: 0,
            disabled,
            token_keys: false,
        }
    }

    /// The same tree with keys that are token ids (one token per page) instead of chained
    /// hashes, when `on`.
    pub fn with_token_keys(mut self, on: bool) -> RadixCache {
        self.token_keys = on;
        self
    }

    /// Whether the tree is off (`--disable-radix-cache`).
    pub fn disabled(&self) -> bool {
        self.disabled
    }

    /// Pages of the pool.
    pub fn total_pages(&self) -> u64 {
        self.total_pages
    }

    /// Pages nobody holds.
    pub fn free_pages(&self) -> u64 {
        self.total_pages - self.evictable_pages - self.protected_pages - self.private_pages
    }

    /// Pages the tree holds that no request locks (they can be evicted).
    pub fn evictable_pages(&self) -> u64 {
        self.evictable_pages
    }

    /// Pages the tree holds that requests lock.
    pub fn protected_pages(&self) -> u64 {
        self.protected_pages
    }

    /// Pages requests hold outside the tree.
    pub fn private_pages(&self) -> u64 {
        self.private_pages
    }

    /// Pages in use: locked by or private to requests (the evictable ones are reusable).
    pub fn pinned_pages(&self) -> u64 {
        self.protected_pages + self.private_pages
    }

    /// Takes `n` free pages for a request's private use, evicting leaves first if needed.
    /// Returns false, taking nothing, when even eviction leaves too few.
    pub fn allocate(&mut self, n: u64) -> bool {
        if n > self.free_pages() {
            self.evict(n - self.free_pages());
        }
        if n > self.free_pages() {
            return false;
        }
        self.private_pages += n;
        true
    }

    /// Gives `n` private pages back to the pool.
    pub fn release(&mut self, n: u64) {
        debug_assert!(n <= self.private_pages, "released more pages than held");
        self.private_pages -= n.min(self.private_pages);
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The number of leading pages of the chain `hashes` (a sequence's chained page hashes,
    /// what a router looks up) the tree holds, without touching or splitting anything.
    pub fn cached_chain(&self, hashes: &[u64]) -> usize {
        if !self.token_keys {
            return self.cached_pages(hashes);
        }
        if self.disabled {
            return 0;
        }
        // Token keys: a tree token extends the chain where hashing it after the previous
        // page's hash gives the next hash. Each check reads the given hashes only, so the
        // checks are independent of one another.
        let extends = |matched: usize, token: u64| {
            let parent = matched.checked_sub(1).map_or(CHAIN_SEED, |k| hashes[k]);
            chain_one(parent, token as u32) == hashes[matched]
        };
        let (mut node, mut matched) = (ROOT, 0);
        while matched < hashes.len() {
            let mut children = self.nodes[node as usize].children.iter();
            let Some((_, &child)) = children.find(|&(&t, _)| extends(matched, t)) else {
                break;
            };
            let key = &self.nodes[child as usize].key;
            let common = 1
                + (1..key.len())
                    .take_while(|&k| matched + k < hashes.len() && extends(matched + k, key.get(k)))
                    .count();
            matched += common;
            if common < key.len() {
                break;
            }
            node = child;
        }
        matched
    }

    /// The number of leading pages of `pages` (keys as the tree's) the tree holds, without
    /// touching or splitting anything.
    pub fn cached_pages(&self, pages: &[u64]) -> usize {
        if self.disabled {
            return 0;
        }
        let (mut node, mut matched) = (ROOT, 0);
        while matched < pages.len() {
            let Some(&child) = self.nodes[node as usize].children.get(&pages[matched]) else {
                break;
            };
            let key = &self.nodes[child as usize].key;
            let common = key.common_prefix(&pages[matched..]);
            matched += common;
            if common < key.len() {
                break;
            }
            node = child;
        }
        matched
    }

    /// SGLang's `match_prefix`: the longest cached prefix of `pages`, as (pages matched, the
    /// node it ends at). Every node on the path is touched; a match ending inside a node
    /// splits it there.
    pub fn match_prefix(&mut self, pages: &[u64]) -> (u32, NodeId) {
        if self.disabled || pages.is_empty() {
            return (0, ROOT);
        }
        let now = self.tick();
        self.touch(ROOT, now);
        let (mut node, mut matched) = (ROOT, 0usize);
        while matched < pages.len() {
            let Some(&child) = self.nodes[node as usize].children.get(&pages[matched]) else {
                break;
            };
            self.touch(child, now);
            let common = self.nodes[child as usize]
                .key
                .common_prefix(&pages[matched..]);
            matched += common;
            if common < self.nodes[child as usize].key.len() {
                node = self.split(child, common);
                break;
            }
            node = child;
        }
        (matched as u32, node)
    }

    /// SGLang's `insert`: adds `pages` to the tree; returns how many leading pages it held
    /// already and the node the sequence ends at. The new pages come from the caller's
    /// private pages (see [`RadixCache::adopt`]).
    pub fn insert(&mut self, pages: &[u64]) -> (u32, NodeId) {
        if self.disabled || pages.is_empty() {
            return (0, ROOT);
        }
        let now = self.tick();
        self.touch(ROOT, now);
        self.extend(ROOT, pages, now)
    }

    /// [`RadixCache::insert`] of a sequence whose leading pages end at `node` (a request's
    /// locked path), given by the hashes of its pages after them: the same tree and access
    /// times as inserting the whole sequence from the root, without its leading hashes.
    /// Returns how many of `pages` the tree held already and the node they end at.
    pub fn insert_below(&mut self, node: NodeId, pages: &[u64]) -> (u32, NodeId) {
        if self.disabled || pages.is_empty() {
            return (0, node);
        }
        let now = self.tick();
        let mut up = node;
        while up != ROOT {
            self.touch(up, now);
            up = self.nodes[up as usize].parent;
        }
        self.touch(ROOT, now);
        self.extend(node, pages, now)
    }

    /// Walks `pages` down from `start` (touching each node at `now`, splitting where they
    /// part) and hangs what is left under where the walk ended.
    fn extend(&mut self, start: NodeId, pages: &[u64], now: u64) -> (u32, NodeId) {
        let (mut node, mut matched) = (start, 0usize);
        while matched < pages.len() {
            let Some(&child) = self.nodes[node as usize].children.get(&pages[matched]) else {
                break;
            };
            self.touch(child, now);
            let common = self.nodes[child as usize]
                .key
                .common_prefix(&pages[matched..]);
            matched += common;
            node = if common < self.nodes[child as usize].key.len() {
                self.split(child, common)
            } else {
                child
            };
        }
        if matched < pages.len() {
            let rest = Segment::new(&pages[matched..]);
            let len = rest.len() as u64;
            let id = self.new_node(rest, node, now);
            self.nodes[node as usize]
                .children
                .insert(pages[matched], id);
            self.evictable_pages += len;
            self.update_leaf(node);
            self.update_leaf(id);
            node = id;
        }
        (matched as u32, node)
    }

    /// Hands a request's private pages to the tree after [`RadixCache::insert`] of its first
    /// `inserted` pages, of which it held the first `held` through its locked path already.
    /// The insert counted the pages new to the tree; the request's copies of pages the tree
    /// had already are freed (SGLang frees the duplicates an insert exposes).
    pub fn adopt(&mut self, inserted: u32, held: u32) {
        self.release(u64::from(inserted.saturating_sub(held)));
    }

    /// Locks the path from `node` up to the root (SGLang's `inc_lock_ref`).
    pub fn lock(&mut self, mut node: NodeId) {
        while node != ROOT {
            let n = &mut self.nodes[node as usize];
            if n.lock_ref == 0 {
                let len = n.key.len() as u64;
                self.evictable_pages -= len;
                self.protected_pages += len;
            }
            n.lock_ref += 1;
            let parent = n.parent;
            self.update_leaf(node);
            node = parent;
        }
    }

    /// Unlocks the path from `node` up to the root (SGLang's `dec_lock_ref`).
    pub fn unlock(&mut self, mut node: NodeId) {
        while node != ROOT {
            let n = &mut self.nodes[node as usize];
            debug_assert!(n.lock_ref > 0, "unlocking an unlocked node");
            if n.lock_ref == 1 {
                let len = n.key.len() as u64;
                self.evictable_pages += len;
                self.protected_pages -= len;
            }
            n.lock_ref -= 1;
            let parent = n.parent;
            self.update_leaf(node);
            node = parent;
        }
    }

    /// SGLang's `evict`: frees unlocked leaves, least recently used first, until at least
    /// `pages` are freed or none is left; returns the pages freed.
    pub fn evict(&mut self, pages: u64) -> u64 {
        let mut freed = 0;
        while freed < pages {
            let Some((_, leaf)) = self.leaves.pop_first() else {
                break;
            };
            let node = &self.nodes[leaf as usize];
            let (parent, first, len) = (node.parent, node.key.get(0), node.key.len() as u64);
            self.nodes[parent as usize].children.remove(&first);
            self.evictable_pages -= len;
            freed += len;
            self.free_nodes.push(leaf);
            self.nodes[leaf as usize].key = Segment::default();
            self.update_leaf(parent);
        }
        freed
    }

    /// The order eviction would free the current unlocked leaves in: each one's first page
    /// hash, least recently used first (for tests and checks).
    pub fn eviction_order(&self) -> Vec<u64> {
        self.leaves
            .iter()
            .map(|&(_, id)| self.nodes[id as usize].key.get(0))
            .collect()
    }

    /// The parent of `node` (the root's is itself).
    pub fn parent(&self, node: NodeId) -> NodeId {
        self.nodes[node as usize].parent
    }

    /// The children of `node` (in no particular order).
    pub fn children(&self, node: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes[node as usize].children.values().copied()
    }

    /// When `node` took its place among its parent's children (SGLang's dict order).
    pub fn child_order(&self, node: NodeId) -> u64 {
        self.nodes[node as usize].order
    }

    /// Pages on the path from the root to `node`.
    pub fn depth(&self, mut node: NodeId) -> u32 {
        let mut pages = 0;
        while node != ROOT {
            pages += self.nodes[node as usize].key.len() as u32;
            node = self.nodes[node as usize].parent;
        }
        pages
    }

    /// Checks the pool's and the tree's counts against each other (tests, debug checks).
    pub fn audit(&self) -> Result<(), SchedulerBug> {
        let (mut evictable, mut protected) = (0, 0);
        let mut stack = vec![ROOT];
        while let Some(id) = stack.pop() {
            let n = &self.nodes[id as usize];
            if id != ROOT {
                let len = n.key.len() as u64;
                if n.lock_ref == 0 {
                    evictable += len;
                } else {
                    protected += len;
                }
            }
            stack.extend(n.children.values());
        }
        if (evictable, protected) != (self.evictable_pages, self.protected_pages) {
            return Err(format!(
                "tree holds {evictable} evictable and {protected} protected pages, counted \
                 {} and {}",
                self.evictable_pages, self.protected_pages
            )
            .into());
        }
        let used = evictable + protected + self.private_pages;
        if used > self.total_pages {
            return Err(format!("{used} pages in use of {}", self.total_pages).into());
        }
        Ok(())
    }

    fn new_node(&mut self, key: Segment, parent: NodeId, now: u64) -> NodeId {
        self.made += 1;
        let node = Node {
            key,
            parent,
            children: BTreeMap::new(),
            lock_ref: 0,
            last_access: now,
            order: self.made,
        };
        match self.free_nodes.pop() {
            Some(id) => {
                self.nodes[id as usize] = node;
                id
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as NodeId
            }
        }
    }

    /// Splits `child` after its first `at` pages: a new node takes them (and the child's
    /// locks and access time) between the child and its parent. Returns the new node.
    fn split(&mut self, child: NodeId, at: usize) -> NodeId {
        let c = &mut self.nodes[child as usize];
        let tail = c.key.split_off(at);
        let head = std::mem::replace(&mut c.key, tail);
        let (parent, lock_ref, access) = (c.parent, c.lock_ref, c.last_access);
        let first_tail = c.key.get(0);
        let first_head = head.get(0);
        let order = c.order;
        let mid = self.new_node(head, parent, access);
        self.nodes[mid as usize].lock_ref = lock_ref;
        self.nodes[mid as usize].order = order;
        self.nodes[mid as usize].children.insert(first_tail, child);
        self.nodes[child as usize].parent = mid;
        self.nodes[parent as usize].children.insert(first_head, mid);
        mid
    }

    /// Sets `node`'s last access to `now`, keeping the leaf order.
    fn touch(&mut self, node: NodeId, now: u64) {
        let old = self.nodes[node as usize].last_access;
        if self.leaves.remove(&(old, node)) {
            self.leaves.insert((now, node));
        }
        self.nodes[node as usize].last_access = now;
    }

    /// Puts `node` in the evictable leaves if it is one (unlocked, childless, not the root),
    /// else takes it out.
    fn update_leaf(&mut self, node: NodeId) {
        let n = &self.nodes[node as usize];
        let entry = (n.last_access, node);
        if node != ROOT && n.lock_ref == 0 && n.children.is_empty() {
            self.leaves.insert(entry);
        } else {
            self.leaves.remove(&entry);
        }
    }
}

/// A node's page keys, held in four bytes a page when they all fit (token ids, one token
/// a page: half of what the cached tokens would take as `u64`s), else in eight (hashes).
#[derive(Debug, Clone)]
enum Segment {
    Narrow(Vec<u32>),
    Wide(Vec<u64>),
}

impl Default for Segment {
    fn default() -> Segment {
        Segment::Narrow(Vec::new())
    }
}

impl Segment {
    fn new(keys: &[u64]) -> Segment {
        match keys.iter().map(|&k| u32::try_from(k)).collect() {
            Ok(narrow) => Segment::Narrow(narrow),
            Err(_) => Segment::Wide(keys.to_vec()),
        }
    }

    fn len(&self) -> usize {
        match self {
            Segment::Narrow(k) => k.len(),
            Segment::Wide(k) => k.len(),
        }
    }

    fn get(&self, i: usize) -> u64 {
        match self {
            Segment::Narrow(k) => u64::from(k[i]),
            Segment::Wide(k) => k[i],
        }
    }

    /// Leaves the first `at` keys here and returns the rest.
    fn split_off(&mut self, at: usize) -> Segment {
        match self {
            Segment::Narrow(k) => Segment::Narrow(k.split_off(at)),
            Segment::Wide(k) => Segment::Wide(k.split_off(at)),
        }
    }

    /// Length of the common prefix of these keys and `keys`.
    fn common_prefix(&self, keys: &[u64]) -> usize {
        match self {
            Segment::Narrow(k) => k
                .iter()
                .zip(keys)
                .take_while(|&(&a, &b)| u64::from(a) == b)
                .count(),
            Segment::Wide(k) => k.iter().zip(keys).take_while(|(a, b)| a == b).count(),
        }
    }
}
