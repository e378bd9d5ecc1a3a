use blis_cosim::Nanos;
use blis_cosim::scheduler::kv::{
    BlockId, BlockPool, CHAIN_SEED, MAX_CHILDREN, block_hashes, request_block_hashes,
    request_block_hashes_after,
};
use blis_cosim::workload::{PromptBlocks, Request};
use std::collections::{HashMap, HashSet, VecDeque};

/// A xorshift64 stream from `seed` (non-zero): each call draws a number below `n`.
fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    }
}

/// Lookups of hashes the tests cache with no chain parent.
trait Unchained {
    fn lookup(&self, hash: u64) -> Option<BlockId>;
    fn held_at(&self, hash: u64, t: Nanos) -> bool;
}

impl Unchained for BlockPool {
    /// The block carrying `hash`, a hash the tests cache with no chain parent.
    fn lookup(&self, hash: u64) -> Option<BlockId> {
        self.lookup_after(None, hash)
    }

    fn held_at(&self, hash: u64, t: Nanos) -> bool {
        self.held_after(None, hash, t).0
    }
}

#[test]
fn a_new_pool_has_every_block_free() {
    let pool = BlockPool::new(4);
    assert_eq!(pool.num_free(), 4);
    assert_eq!(pool.num_pinned(), 0);
    pool.audit().unwrap();
}

#[test]
fn a_pool_holds_bookkeeping_only_for_the_blocks_it_used() {
    let mut pool = BlockPool::new(u32::MAX);
    assert_eq!(pool.num_used_ever(), 0);
    let taken: Vec<BlockId> = (0..3).map(|_| pool.allocate().unwrap()).collect();
    assert_eq!(taken, [0, 1, 2]);
    pool.release(1);
    assert_eq!(pool.allocate(), Some(1), "a freed block before a new one");
    assert_eq!(pool.num_used_ever(), 3);
    assert_eq!(pool.num_free(), u32::MAX as usize - 3);
    pool.cache(0, 7);
    pool.release(0);
    assert_eq!(
        pool.allocate(),
        Some(3),
        "never-used blocks head the free list"
    );
    assert_eq!(pool.num_used_ever(), 4);
    pool.audit().unwrap();
}

/// On its stack a pool keeps no bookkeeping per block (the stack says which are held);
/// leaving it makes the bookkeeping of exactly the blocks used so far, with their counts,
/// and later fresh blocks get theirs as they are first taken.
#[test]
fn a_pool_on_its_stack_keeps_no_bookkeeping() {
    let mut pool = BlockPool::new(64);
    let taken: Vec<BlockId> = (0..10).map(|_| pool.allocate().unwrap()).collect();
    pool.release_all(taken[5..].iter().rev().copied());
    assert!(pool.blocks.is_empty(), "no bookkeeping on the stack");
    assert_eq!(pool.num_used_ever(), 10);
    assert_eq!(
        pool.chain_parent(&taken[..2], &[1, 2], 1),
        None,
        "no block carries a hash on the stack"
    );
    pool.audit().unwrap();
    pool.cache(taken[0], 7);
    assert_eq!(pool.blocks.len(), 10, "bookkeeping for the blocks used");
    for b in 0..10 {
        assert_eq!(pool.ref_count(b), u32::from(b < 5), "block {b}");
    }
    assert_eq!(pool.num_free(), 64 - 5);
    pool.audit().unwrap();
    let fresh: Vec<BlockId> = (0..3).map(|_| pool.allocate().unwrap()).collect();
    assert_eq!(fresh, [10, 11, 12], "never-used blocks head the free list");
    assert_eq!(pool.blocks.len(), 13);
    pool.audit().unwrap();
}

/// Releasing a request's blocks in one go leaves the pool as releasing them one by one
/// does, on the stack (where the counts are not kept) and on the free list, and the counts
/// come out right when the stack turns into the list.
#[test]
fn releasing_blocks_in_one_go_equals_one_by_one() {
    for hashed in [false, true] {
        let (mut one, mut all) = (BlockPool::new(64), BlockPool::new(64));
        let mut held = Vec::new();
        for round in 0..6u64 {
            let taken: Vec<BlockId> = (0..5 + round).map(|_| one.allocate().unwrap()).collect();
            let same: Vec<BlockId> = (0..5 + round).map(|_| all.allocate().unwrap()).collect();
            assert_eq!(taken, same);
            if hashed {
                one.cache(taken[0], round);
                all.cache(same[0], round);
            }
            held.push(taken);
            if round % 2 == 1 {
                let blocks = held.remove(0);
                for &b in blocks.iter().rev() {
                    one.release(b);
                }
                all.release_all(blocks.iter().rev().copied());
            }
            one.audit().unwrap();
            all.audit().unwrap();
            assert_eq!(one.num_free(), all.num_free());
        }
        all.cache(held[0][1], 99);
        all.audit().unwrap();
        for b in 0..all.num_used_ever() as BlockId {
            let held_now = held.iter().flatten().any(|&h| h == b);
            assert_eq!(all.ref_count(b), u32::from(held_now), "block {b}");
        }
        let order = |pool: &mut BlockPool| -> Vec<_> {
            (0..pool.num_free())
                .map(|_| pool.allocate().unwrap())
                .collect()
        };
        one.cache(held[0][1], 99);
        assert_eq!(order(&mut one), order(&mut all));
    }
}

#[test]
fn allocation_takes_blocks_in_free_list_order_and_runs_dry() {
    let mut pool = BlockPool::new(2);
    assert_eq!(pool.allocate(), Some(0));
    assert_eq!(pool.allocate(), Some(1));
    assert_eq!(pool.allocate(), None);
    assert_eq!(pool.num_pinned(), 2);
    pool.audit().unwrap();
}

#[test]
fn freed_cached_blocks_stay_hittable_until_evicted_least_recently_freed_first() {
    let mut pool = BlockPool::new(3);
    let a = pool.allocate().unwrap();
    let b = pool.allocate().unwrap();
    pool.cache(a, 11);
    pool.cache(b, 22);
    // Free b first, then a: b is the least recently freed.
    pool.release(b);
    pool.release(a);
    assert_eq!(pool.lookup(11), Some(a));
    assert_eq!(pool.lookup(22), Some(b));
    // Block 2 was never used and sits at the head: no eviction yet.
    assert_eq!(pool.allocate(), Some(2));
    assert_eq!(pool.lookup(22), Some(b));
    // Next allocation evicts b (freed before a).
    assert_eq!(pool.allocate(), Some(b));
    assert_eq!(pool.lookup(22), None);
    assert_eq!(pool.lookup(11), Some(a));
    pool.audit().unwrap();
}

#[test]
fn touching_a_free_cached_block_pins_it_and_protects_it_from_eviction() {
    let mut pool = BlockPool::new(2);
    let a = pool.allocate().unwrap();
    pool.cache(a, 7);
    pool.release(a);
    pool.touch(a);
    assert_eq!(pool.ref_count(a), 1);
    assert_eq!(pool.num_free(), 1);
    assert_eq!(pool.allocate(), Some(1));
    assert_eq!(pool.allocate(), None);
    assert_eq!(pool.lookup(7), Some(a));
    pool.audit().unwrap();
}

#[test]
fn a_shared_block_returns_to_the_free_list_only_when_the_last_holder_releases_it() {
    let mut pool = BlockPool::new(1);
    let a = pool.allocate().unwrap();
    pool.touch(a);
    pool.release(a);
    assert_eq!(pool.num_free(), 0);
    pool.release(a);
    assert_eq!(pool.num_free(), 1);
    pool.audit().unwrap();
}

#[test]
fn an_evicted_hash_leaves_the_index_and_is_missed() {
    let mut pool = BlockPool::new(1);
    let a = pool.allocate().unwrap();
    pool.cache(a, 7);
    pool.release(a);
    assert_eq!(pool.lookup(7), Some(a));
    // Reused: its hash is evicted and its entry removed.
    assert_eq!(pool.allocate(), Some(a));
    assert_eq!(pool.index.len(), 0, "no stale entry stays");
    assert_eq!(pool.lookup(7), None);
    assert!(!pool.held_at(7, 0));
    pool.cache(a, 8);
    pool.release(a);
    assert_eq!(pool.allocate(), Some(a));
    // Indexed again, under the hash it carried before.
    pool.cache(a, 7);
    assert_eq!((pool.lookup(7), pool.lookup(8)), (Some(a), None));
    pool.audit().unwrap();
}

#[test]
fn the_index_holds_only_the_blocks_carrying_a_hash() {
    let mut pool = BlockPool::new(2);
    for h in 0..5_000 {
        let b = pool.allocate().unwrap();
        pool.cache(b, h);
        pool.release(b);
        assert!(pool.index.len() <= 2);
    }
    assert_eq!((pool.lookup(4_999), pool.lookup(4_998)), (Some(1), Some(0)));
    assert_eq!(pool.lookup(4_997), None);
    pool.audit().unwrap();
}

#[test]
fn an_index_under_churn_stays_the_size_of_its_blocks() {
    let mut pool = BlockPool::new(100);
    for h in 0..20_000 {
        let b = pool.allocate().unwrap();
        pool.cache(b, h);
        pool.release(b);
        // Room for the 100 blocks' entries, nothing for the evicted hashes.
        assert!(pool.index.capacity() < 256, "{}", pool.index.capacity());
        // The buckets the blocks remember survive the table's rehashes in place.
        if h % 97 == 0 {
            pool.audit().unwrap();
        }
    }
    assert!((19_900..20_000).all(|h| pool.lookup(h).is_some()));
    assert_eq!(pool.lookup(19_899), None);
    pool.audit().unwrap();
}

#[test]
fn an_index_of_live_entries_grows() {
    let mut pool = BlockPool::new(5_000);
    let held: Vec<BlockId> = (0..5_000).map(|_| pool.allocate().unwrap()).collect();
    for (h, &b) in held.iter().enumerate() {
        pool.cache(b, h as u64);
    }
    assert_eq!(pool.index.len(), 5_000);
    assert!((0..5_000).all(|h| pool.lookup(h).is_some()));
    pool.audit().unwrap();
}

#[test]
fn a_duplicate_hash_keeps_the_first_block_indexed() {
    let mut pool = BlockPool::new(2);
    let a = pool.allocate().unwrap();
    let b = pool.allocate().unwrap();
    pool.cache(a, 5);
    pool.cache(b, 5);
    assert_eq!(pool.lookup(5), Some(a));
    pool.release(b);
    pool.release(a);
    // Evicting b (unindexed) must not drop a's index entry.
    assert_eq!(pool.allocate(), Some(b));
    assert_eq!(pool.lookup(5), Some(a));
    pool.audit().unwrap();
}

#[test]
fn before_any_hash_the_most_recently_freed_block_is_reused_and_after_the_oldest() {
    let mut pool = BlockPool::new(4);
    let (a, b) = (pool.allocate().unwrap(), pool.allocate().unwrap());
    assert_eq!((a, b), (0, 1), "a new pool hands out blocks in id order");
    pool.release(a);
    pool.release(b);
    pool.audit().unwrap();
    assert_eq!(
        pool.allocate(),
        Some(b),
        "no hash yet: the order is not observable"
    );
    pool.cache(b, 9);
    pool.audit().unwrap();
    pool.release(b);
    // Free list now: the two blocks never used (their ids given as they are taken), a
    // (the stack, oldest first), then b with its hash.
    let order: Vec<BlockId> = (0..4).map(|_| pool.allocate().unwrap()).collect();
    assert_eq!(order, [2, 3, a, b]);
    assert_eq!(pool.lookup(9), None, "evicted when reused");
    pool.audit().unwrap();
}

#[test]
fn prompt_blocks_hash_like_their_listed_token_ids() {
    use blis_cosim::workload::PromptBlocks;
    let listed = Request {
        id: 0,
        line: 1,
        model: None,
        arrival_ns: 0,
        input_toks: 1300,
        output_toks: 1,
        token_ids: (0..512).chain(3584..4096).chain(1024..1300).collect(),
        prompt_blocks: None,
        known_hashes: None,
    };
    let blocks = Request {
        token_ids: Vec::new(),
        prompt_blocks: Some(PromptBlocks::new(&[0, 7, 2], 512).unwrap()),
        known_hashes: None,
        ..listed.clone()
    };
    let (mut a, mut b, mut bytes) = (Vec::new(), Vec::new(), Vec::new());
    for (bs, max) in [(16, usize::MAX), (16, 1299), (512, usize::MAX), (7, 100)] {
        request_block_hashes(&listed, bs, max, &mut a, &mut bytes);
        request_block_hashes(&blocks, bs, max, &mut b, &mut bytes);
        assert_eq!(a, b, "block size {bs}, {max} tokens");
        assert_eq!(a.len(), max.min(1300) / bs as usize);
    }
}

/// The chained hashes of `tokens`' full blocks of `block_size`, each the xxh3-64 of the
/// parent's and the block's token ids' little-endian bytes, as the hash crate computes it.
fn reference_hashes(tokens: &[u32], block_size: usize) -> Vec<u64> {
    let mut parent = CHAIN_SEED;
    let chain = |block: &[u32]| {
        let mut bytes = parent.to_le_bytes().to_vec();
        bytes.extend(block.iter().flat_map(|t| t.to_le_bytes()));
        parent = xxhash_rust::xxh3::xxh3_64(&bytes);
        parent
    };
    tokens.chunks_exact(block_size).map(chain).collect()
}

#[test]
fn block_hashes_are_xxh3_of_the_parent_and_the_tokens_at_every_block_size() {
    let mut draw = xorshift(0x5EED);
    let mut out = Vec::new();
    for block_size in [1, 2, 7, 15, 16, 17, 32] {
        for _ in 0..50 {
            let len = draw(200) as usize;
            let tokens: Vec<u32> = (0..len).map(|_| draw(1 << 32) as u32).collect();
            block_hashes(&tokens, block_size as u32, &mut out);
            assert_eq!(out, reference_hashes(&tokens, block_size), "{block_size}");
        }
    }
    // Block-id prompts, near the largest token id.
    let ids = [PromptBlocks::max_id(512), 0, 3];
    let req = block_id_request(&ids, 512, 3 * 512);
    let tokens: Vec<u32> = req
        .prompt_blocks
        .as_ref()
        .unwrap()
        .tokens(3 * 512)
        .collect();
    request_block_hashes(&req, 16, usize::MAX, &mut out, &mut Vec::new());
    assert_eq!(out, reference_hashes(&tokens, 16));
}

#[test]
fn block_hashes_chain_over_full_blocks_only() {
    let mut h1 = Vec::new();
    let mut h2 = Vec::new();
    block_hashes(&[1, 2, 3, 4, 5], 2, &mut h1);
    assert_eq!(h1.len(), 2);
    block_hashes(&[9, 2, 3, 4], 2, &mut h2);
    // Same second block, different first block: the chain differs from the start.
    assert_ne!(h1[0], h2[0]);
    assert_ne!(h1[1], h2[1]);
    block_hashes(&[1, 2, 3, 4, 6, 6], 2, &mut h2);
    assert_eq!(h1[..2], h2[..2]);
}

#[test]
fn the_history_answers_what_the_index_held_at_an_earlier_time() {
    let mut pool = BlockPool::new(2);
    pool.keep_history();
    pool.set_clock(10);
    let a = pool.allocate().unwrap();
    pool.cache(a, 7);
    pool.release(a);
    // Indexed at 10: a router at 10 decided before it was (steps form after routing).
    assert!(!pool.held_at(7, 10));
    assert!(pool.held_at(7, 11));
    pool.set_clock(20);
    let b = pool.allocate().unwrap();
    let c = pool.allocate().unwrap();
    assert!(pool.lookup(7).is_none(), "evicted at 20");
    // Seen at 20 it was still there; from 21 on it is gone.
    assert!(pool.held_at(7, 20) && pool.held_at(7, 15));
    assert!(!pool.held_at(7, 21));
    // Indexed again at 30, evicted again at 40: both spans are answered.
    pool.set_clock(30);
    pool.cache(b, 7);
    pool.release(b);
    pool.release(c);
    pool.set_clock(40);
    let _ = pool.allocate().unwrap();
    let _ = pool.allocate().unwrap();
    for (t, held) in [
        (10, false),
        (15, true),
        (20, true),
        (25, false),
        (30, false),
    ] {
        assert_eq!(pool.held_at(7, t), held, "at {t}");
    }
    assert!(pool.held_at(7, 35) && pool.held_at(7, 40) && !pool.held_at(7, 41));
    // Forgetting before 25 drops the first span only.
    pool.forget_before(25);
    assert!(pool.held_at(7, 35));
    pool.audit().unwrap();
}

/// Random traffic (runs of allocations, hits on free blocks, requests' blocks released in
/// one go) takes blocks exactly as a plain list in freeing order would (the never-used
/// blocks first, a hit taking its block out of the middle), and the list's stale entries
/// are swept so that it stays within twice the free blocks (and a few).
#[test]
fn the_free_list_hands_out_blocks_in_freeing_order_through_hits_and_sweeps() {
    let mut next = xorshift(0x5EED_F00D_1234_5678u64);
    const CAP: u32 = 600;
    let mut pool = BlockPool::new(CAP);
    let (mut list, mut fresh) = (VecDeque::<BlockId>::new(), 0);
    let mut refs = vec![0u32; CAP as usize];
    let mut held: Vec<Vec<BlockId>> = Vec::new();
    let mut sweeps = 0;
    for step in 0..20_000 {
        match next(3) {
            0 if !held.is_empty() => {
                let blocks = held.swap_remove(next(held.len() as u64) as usize);
                pool.release_all(blocks.iter().rev().copied());
                for &b in blocks.iter().rev() {
                    refs[b as usize] -= 1;
                    if refs[b as usize] == 0 {
                        list.push_back(b);
                    }
                }
            }
            1 if !list.is_empty() => {
                let b = list.remove(next(list.len() as u64) as usize).unwrap();
                let stale_before = pool.stale;
                pool.touch(b);
                sweeps += usize::from(stale_before > 0 && pool.stale == 0);
                refs[b as usize] += 1;
                held.push(vec![b]);
            }
            _ => {
                let n = 1 + next(40) as usize;
                if pool.num_free() < n {
                    continue;
                }
                let taken: Vec<BlockId> = (0..n).map(|_| pool.allocate().unwrap()).collect();
                let mut expected = Vec::new();
                for _ in 0..n {
                    expected.push(match fresh < CAP {
                        true => fresh,
                        false => list.pop_front().unwrap(),
                    });
                    fresh = (fresh + 1).min(CAP);
                }
                assert_eq!(taken, expected, "step {step}");
                if step == 0 {
                    // Leaves the stack for the free list.
                    pool.cache(taken[0], 1);
                }
                for &b in &taken {
                    refs[b as usize] += 1;
                }
                held.push(taken);
            }
        }
        pool.audit().unwrap();
        assert!(pool.free.len() <= 2 * pool.num_free() + 64, "step {step}");
    }
    // Hits on free blocks of requests that finish at once: each leaves a stale entry.
    for _ in 0..2_000 {
        let b = list.remove(next(list.len() as u64) as usize).unwrap();
        let stale_before = pool.stale;
        pool.touch(b);
        sweeps += usize::from(stale_before > 0 && pool.stale == 0);
        pool.release(b);
        list.push_back(b);
        assert!(pool.free.len() <= 2 * pool.num_free() + 64);
    }
    pool.audit().unwrap();
    assert!(sweeps > 0, "the stale entries were swept");
    let expected: Vec<BlockId> = (fresh..CAP).chain(list).collect();
    let rest: Vec<BlockId> = (0..expected.len())
        .map(|_| pool.allocate().unwrap())
        .collect();
    assert_eq!(rest, expected);
}

/// Random traffic (allocations in runs, prefix hits, indexing under repeated hashes,
/// requests' blocks released in one go) keeps the pool's invariants after every step:
/// pinned + free = total, the free list is exactly the unreferenced blocks, and the index
/// holds exactly the blocks carrying a hash (no stale entry, so never more than the
/// blocks).
#[test]
fn random_traffic_keeps_the_pool_invariants() {
    let mut next = xorshift(0x9E37_79B9_7F4A_7C15u64);
    let mut pool = BlockPool::new(32);
    let mut held: Vec<Vec<BlockId>> = Vec::new();
    let mut hits = 0;
    for _ in 0..3_000 {
        match next(4) {
            0 if !held.is_empty() => {
                let blocks = held.swap_remove(next(held.len() as u64) as usize);
                pool.release_all(blocks.iter().rev().copied());
            }
            1 => {
                if let Some(b) = pool.lookup(next(64)) {
                    pool.touch(b);
                    held.push(vec![b]);
                    hits += 1;
                }
            }
            _ => {
                let n = 1 + next(4) as usize;
                if pool.num_free() >= n {
                    let blocks: Vec<BlockId> = (0..n).map(|_| pool.allocate().unwrap()).collect();
                    for &b in &blocks {
                        pool.cache(b, next(64));
                    }
                    held.push(blocks);
                }
            }
        }
        pool.audit().unwrap();
        assert!(pool.index.len() <= pool.num_used_ever());
    }
    assert!(hits > 100, "the traffic hits the cache ({hits} hits)");
}

/// Requests sharing prefixes (chains over a few block contents, more than a block keeps
/// children after some prefixes), indexed in two steps with other traffic between, keep
/// the index equal to a plain map of hash to the first block indexed under it: every
/// lookup walk answers as the map does, and the pool audits after every operation.
#[test]
fn chained_traffic_indexes_as_a_plain_map_would() {
    let mut next = xorshift(0x0DDB_1A5E_5BAD_5EEDu64);
    let mut pool = BlockPool::new(40);
    pool.keep_history();
    let mut model: HashMap<u64, BlockId> = HashMap::new();
    // Held requests: their blocks, hashes, and how many of them are indexed.
    let mut held: Vec<(Vec<BlockId>, Vec<u64>, usize)> = Vec::new();
    let (mut hits, mut children_full) = (0, 0);
    for t in 0..4_000u64 {
        pool.set_clock(t);
        match next(3) {
            0 if !held.is_empty() => {
                let (blocks, ..) = held.swap_remove(next(held.len() as u64) as usize);
                pool.release_all(blocks.iter().rev().copied());
            }
            1 if !held.is_empty() => {
                // A request's next step indexes the rest of its blocks, one run at a time
                // or block by block; the index is checked against the map after each step.
                let k = next(held.len() as u64) as usize;
                let (blocks, hashes, done) = &mut held[k];
                let mut parent = pool.chain_parent(blocks, hashes, *done);
                if next(2) == 0 {
                    pool.cache_run(parent, &blocks[*done..], &hashes[*done..]);
                    for i in *done..blocks.len() {
                        model.entry(hashes[i]).or_insert(blocks[i]);
                    }
                }
                for i in *done..blocks.len() {
                    let holder = *model.entry(hashes[i]).or_insert(blocks[i]);
                    parent = Some(pool.cache_after(parent, blocks[i], hashes[i]));
                    assert_eq!(parent, Some(holder));
                }
                *done = blocks.len();
            }
            _ => {
                let len = 1 + next(7) as usize;
                let tokens: Vec<u32> = (0..len)
                    .map(|i| if i == 2 { next(12) } else { next(2) } as u32)
                    .collect();
                let mut hashes = Vec::new();
                block_hashes(&tokens, 1, &mut hashes);
                let mut blocks = Vec::new();
                pool.cached_prefix(&hashes, |b| blocks.push(b));
                let walked = hashes.iter().map_while(|h| model.get(h).copied());
                assert_eq!(blocks, walked.collect::<Vec<_>>());
                let fresh = len - blocks.len();
                let free_hits = blocks.iter().filter(|&&b| pool.ref_count(b) == 0);
                if fresh + free_hits.count() > pool.num_free() {
                    continue;
                }
                hits += blocks.len();
                blocks.iter().for_each(|&b| pool.touch(b));
                for _ in 0..fresh {
                    let b = pool.allocate().unwrap();
                    model.retain(|_, &mut m| m != b);
                    blocks.push(b);
                }
                // The first step indexes part of the new blocks.
                let done = blocks.len() - fresh + next(fresh as u64 + 1) as usize;
                let mut parent = None;
                for i in 0..done {
                    let holder = *model.entry(hashes[i]).or_insert(blocks[i]);
                    parent = Some(pool.cache_after(parent, blocks[i], hashes[i]));
                    assert_eq!(parent, Some(holder));
                }
                held.push((blocks, hashes, done));
            }
        }
        pool.audit().unwrap();
        for (&h, &b) in &model {
            let parent = pool.blocks[b as usize].parent();
            assert_eq!(pool.lookup_after(parent, h), Some(b));
        }
        let full =
            (pool.blocks.iter()).filter(|b| b.children(&pool.blocks).count() == MAX_CHILDREN);
        children_full += full.count();
    }
    assert!(hits > 1_000, "the traffic hits the cache ({hits} hits)");
    assert!(
        children_full > 10,
        "blocks fill their lists ({children_full})"
    );
    assert!(pool.index.len() < model.len(), "most entries are children");
}

/// The history answers exactly what a copy of the index taken at each time would.
#[test]
fn the_history_matches_copies_of_the_index_on_random_traffic() {
    let mut next = xorshift(0x2545_F491_4F6C_DD1Du64);
    let mut pool = BlockPool::new(16);
    pool.keep_history();
    let mut held: Vec<BlockId> = Vec::new();
    let mut copies: Vec<(Nanos, HashSet<u64>)> = Vec::new();
    for t in 1..400u64 {
        // What a router at `t` sees: the index before anything at `t` happens.
        let live = (pool.index.iter()).map(|&b| pool.blocks[b as usize].hash);
        copies.push((t, live.collect()));
        pool.set_clock(t);
        for _ in 0..next(4) {
            if next(3) == 0 && !held.is_empty() {
                let k = next(held.len() as u64) as usize;
                pool.release(held.swap_remove(k));
            } else if let Some(b) = pool.allocate() {
                pool.cache(b, next(40));
                held.push(b);
            }
        }
    }
    for (t, copy) in &copies {
        for h in 0..40 {
            assert_eq!(pool.held_at(h, *t), copy.contains(&h), "hash {h} at {t}");
        }
    }
    pool.forget_before(200);
    for (t, copy) in copies.iter().filter(|(t, _)| *t >= 200) {
        for h in 0..40 {
            assert_eq!(pool.held_at(h, *t), copy.contains(&h), "hash {h} at {t}");
        }
    }
    assert!(
        pool.history
            .as_ref()
            .unwrap()
            .evicted
            .iter()
            .all(|e| e.at >= 200)
    );
}

// KV block hashes of block-id prompts (`request_block_hashes`): every request's hashes equal
// those of its token ids listed, through shared prefixes, partial last blocks, cut prompts,
// and KV blocks that straddle prompt blocks.

/// A request whose prompt is `input` tokens of blocks `ids` of `prompt_block` tokens.
fn block_id_request(ids: &[u64], prompt_block: u32, input: u32) -> Request {
    Request {
        id: 0,
        line: 1,
        model: None,
        arrival_ns: 0,
        input_toks: input,
        output_toks: 1,
        token_ids: Vec::new(),
        prompt_blocks: Some(PromptBlocks::new(ids, prompt_block).unwrap()),
        known_hashes: None,
    }
}

/// Conversation-like prompts: each extends an earlier one (or the shared first block) with
/// fresh blocks, its last block partial or whole; hashed at `kv_block` tokens, some cut at
/// `max_tokens`, each compared with hashing its listed tokens.
fn check_prompts(prompt_block: u32, kv_block: u32, prompts: usize, seed: u64) {
    let mut below = xorshift(seed);
    let mut earlier: Vec<Vec<u64>> = vec![vec![0]];
    let mut next_id = 1;
    let (mut out, mut bytes, mut want) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..prompts {
        let base = &earlier[below(earlier.len() as u64) as usize];
        let mut ids = base.clone();
        for _ in 0..=below(4) {
            ids.push(next_id);
            next_id += 1;
        }
        let whole = (ids.len() as u32 - 1) * prompt_block;
        let input = whole + 1 + below(u64::from(prompt_block)) as u32;
        let req = block_id_request(&ids, prompt_block, input);
        let max_tokens = match below(3) {
            0 => below(u64::from(input)) as usize,
            _ => usize::MAX,
        };
        request_block_hashes(&req, kv_block, max_tokens, &mut out, &mut bytes);
        let len = max_tokens.min(input as usize);
        let tokens: Vec<u32> = req.prompt_blocks.as_ref().unwrap().tokens(len).collect();
        block_hashes(&tokens, kv_block, &mut want);
        assert_eq!(
            out, want,
            "prompt {ids:?} of {input} tokens, cut at {max_tokens}"
        );
        earlier.push(ids);
    }
}

/// Checks that `request`'s hashes at `block_size` (up to `max_tokens`) given any leading part
/// of them, or all of them and more (a longer list of the same chain), are the whole list.
fn check_known_prefixes(request: &Request, block_size: u32, max_tokens: usize) {
    let (mut whole, mut longer, mut out, mut bytes) = (vec![], vec![], vec![], vec![]);
    request_block_hashes(request, block_size, max_tokens, &mut whole, &mut bytes);
    request_block_hashes(request, block_size, usize::MAX, &mut longer, &mut bytes);
    for k in 0..=whole.len() {
        request_block_hashes_after(
            request,
            block_size,
            max_tokens,
            &whole[..k],
            &mut out,
            &mut bytes,
        );
        assert_eq!(
            out, whole,
            "block size {block_size}, {k} known, cut at {max_tokens}"
        );
    }
    request_block_hashes_after(
        request, block_size, max_tokens, &longer, &mut out, &mut bytes,
    );
    assert_eq!(
        out, whole,
        "block size {block_size}, all known, cut at {max_tokens}"
    );
}

#[test]
fn hashes_after_a_known_prefix_are_the_whole_list() {
    let mut draw = xorshift(0xB10C);
    let listed = Request {
        id: 0,
        line: 1,
        model: None,
        arrival_ns: 0,
        input_toks: 300,
        output_toks: 40,
        token_ids: (0..340).map(|_| draw(1 << 32) as u32).collect(),
        prompt_blocks: None,
        known_hashes: None,
    };
    // Prompt blocks of 64 tokens: KV blocks of 16 and 32 within them, of 48 across them.
    let blocks = block_id_request(&[5, 0, 9, 2, 7], 64, 300);
    for (bs, max) in [
        (16, usize::MAX),
        (16, 250),
        (32, usize::MAX),
        (48, usize::MAX),
        (7, 99),
    ] {
        check_known_prefixes(&listed, bs, max);
        check_known_prefixes(&blocks, bs, max);
    }
    // Eight blocks of 512 tokens, 32 KV blocks each, known from the middle of one.
    let mooncake = block_id_request(&[0, 14, 15, 16, 17, 18, 19, 20], 512, 8 * 512 - 100);
    check_known_prefixes(&mooncake, 16, usize::MAX);
}

#[test]
fn prompt_block_hashes_equal_hashing_the_listed_tokens() {
    // KV blocks within prompt blocks: 32, 2 and 1 a prompt block, and 1,024 of one token.
    check_prompts(512, 16, 400, 0x9E37_79B9);
    check_prompts(64, 32, 400, 7);
    check_prompts(16, 16, 400, 11);
    check_prompts(1024, 1, 100, 23);
    // A KV block across prompt blocks, or larger than one.
    check_prompts(512, 48, 100, 13);
    check_prompts(16, 64, 200, 17);
}
