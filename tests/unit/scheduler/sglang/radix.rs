use blis_cosim::scheduler::sglang::radix::{NodeId, ROOT, RadixCache};

/// Page keys: distinct small numbers stand for chained hashes.
fn keys(range: std::ops::Range<u64>) -> Vec<u64> {
    range.collect()
}

/// A request's life: its pages are allocated privately, inserted, locked, then unlocked.
fn cache(tree: &mut RadixCache, pages: &[u64]) -> NodeId {
    assert!(tree.allocate(pages.len() as u64));
    let (_, node) = tree.insert(pages);
    tree.adopt(pages.len() as u32, 0);
    node
}

#[test]
fn a_match_ending_inside_a_node_splits_it_and_counts_whole_pages() {
    let mut tree = RadixCache::new(100, false);
    cache(&mut tree, &keys(1..9)); // one node of 8 pages
    let query = [1, 2, 3, 99];
    assert_eq!(tree.cached_pages(&query), 3);
    let (matched, node) = tree.match_prefix(&query);
    assert_eq!(matched, 3);
    assert_eq!(tree.depth(node), 3);
    // Split: a 3-page node above a 5-page one; nothing moved in the pool.
    assert_eq!(tree.evictable_pages(), 8);
    assert_eq!(tree.free_pages(), 92);
    tree.audit().unwrap();
}

#[test]
fn inserting_a_cached_prefix_frees_the_duplicate_pages() {
    let mut tree = RadixCache::new(100, false);
    cache(&mut tree, &keys(1..5));
    // A second request computed the same 4 pages privately plus 2 of its own.
    assert!(tree.allocate(6));
    let (present, _) = tree.insert(&[1, 2, 3, 4, 50, 51]);
    assert_eq!(present, 4);
    tree.adopt(6, 0);
    assert_eq!(tree.private_pages(), 0);
    assert_eq!(tree.evictable_pages(), 6);
    assert_eq!(tree.free_pages(), 94);
    tree.audit().unwrap();
}

#[test]
fn eviction_frees_unlocked_leaves_least_recently_used_first() {
    let mut tree = RadixCache::new(100, false);
    let a = cache(&mut tree, &[10, 11]); // used at t1
    cache(&mut tree, &[20, 21, 22]); // t2
    cache(&mut tree, &[30]); // t3
    // Touch A again: it becomes the most recently used.
    tree.match_prefix(&[10, 11]);
    assert_eq!(tree.eviction_order(), vec![20, 30, 10]);
    // A locked leaf is never evicted.
    tree.lock(a);
    assert_eq!(tree.eviction_order(), vec![20, 30]);
    // Asking for 1 page frees the whole 3-page leaf B (leaves go whole).
    assert_eq!(tree.evict(1), 3);
    assert_eq!(tree.evict(10), 1);
    assert_eq!(tree.evictable_pages(), 0);
    assert_eq!(tree.protected_pages(), 2);
    tree.unlock(a);
    assert_eq!(tree.evict(10), 2);
    assert_eq!(tree.free_pages(), 100);
    tree.audit().unwrap();
}

#[test]
fn a_parent_left_childless_becomes_evictable_in_its_turn() {
    let mut tree = RadixCache::new(100, false);
    cache(&mut tree, &[1, 2]);
    cache(&mut tree, &[1, 2, 3]); // splits nothing: extends the leaf with a child
    cache(&mut tree, &[7]);
    // Leaves: [3] (under [1,2]) and [7]; [1,2] is inner.
    assert_eq!(tree.eviction_order(), vec![3, 7]);
    assert_eq!(tree.evict(1), 1); // [3]
    // [1,2] is a leaf now, with its own (older) access time: before [7].
    assert_eq!(tree.eviction_order(), vec![1, 7]);
    tree.audit().unwrap();
}

#[test]
fn allocation_evicts_only_what_it_must() {
    let mut tree = RadixCache::new(10, false);
    cache(&mut tree, &[1, 2, 3, 4]);
    cache(&mut tree, &[5, 6, 7, 8]);
    assert_eq!(tree.free_pages(), 2);
    assert!(tree.allocate(4)); // evicts the LRU leaf [1..4]
    assert_eq!(tree.cached_pages(&[1]), 0);
    assert_eq!(tree.cached_pages(&[5, 6]), 2);
    assert!(!tree.allocate(7));
    assert_eq!(tree.private_pages(), 4);
    tree.audit().unwrap();
}

/// Inserting a locked request's later pages below its node leaves the tree, its access
/// times and so its eviction order as inserting the whole sequence from the root.
#[test]
fn inserting_below_a_locked_node_equals_inserting_from_the_root() {
    let build = |below: bool| {
        let mut tree = RadixCache::new(100, false);
        cache(&mut tree, &[1, 2, 3, 4]);
        cache(&mut tree, &[1, 2, 8]);
        cache(&mut tree, &[30]);
        // A request matched [1, 2, 3] (splitting [3, 4]), locked it, computed 3 more pages.
        let (held, node) = tree.match_prefix(&[1, 2, 3, 9]);
        tree.lock(node);
        assert!(tree.allocate(3));
        let sequence = [1, 2, 3, 9, 10, 11];
        let (_, end) = if below {
            tree.insert_below(node, &sequence[held as usize..])
        } else {
            tree.insert(&sequence)
        };
        tree.adopt(6, held);
        tree.lock(end);
        tree.unlock(node);
        tree.audit().unwrap();
        let cached = tree.cached_pages(&sequence);
        tree.unlock(end);
        (
            cached,
            tree.eviction_order(),
            tree.evictable_pages(),
            tree.free_pages(),
        )
    };
    assert_eq!(build(true), build(false));
    assert_eq!(build(true).0, 6);
}

/// A router's chained hashes find in a tree keyed by token ids the same cached prefix as
/// in a tree keyed by those hashes (splits, branches, a diverging last token).
#[test]
fn a_routers_hashes_match_a_token_keyed_tree_as_a_hash_keyed_one() {
    let chained = |tokens: &[u32]| {
        let mut out = Vec::new();
        blis_cosim::scheduler::block_hashes(tokens, 1, &mut out);
        out
    };
    let as_keys = |tokens: &[u32]| tokens.iter().map(|&t| u64::from(t)).collect::<Vec<_>>();
    let cached: [&[u32]; 4] = [&[1, 2, 3, 4, 5], &[1, 2, 7], &[9], &[1, 2, 3, 8, 8, 8]];
    let mut by_token = RadixCache::new(100, false).with_token_keys(true);
    let mut by_hash = RadixCache::new(100, false);
    for seq in cached {
        cache(&mut by_token, &as_keys(seq));
        cache(&mut by_hash, &chained(seq));
    }
    let queries: [&[u32]; 7] = [
        &[1, 2, 3, 4, 5, 6],
        &[1, 2, 3, 4],
        &[1, 2, 3, 8, 8, 9],
        &[1, 2, 7, 7],
        &[9, 9],
        &[2, 1],
        &[],
    ];
    for query in queries {
        let hashes = chained(query);
        let expected = by_hash.cached_pages(&hashes);
        assert_eq!(by_token.cached_chain(&hashes), expected, "{query:?}");
        assert_eq!(
            by_token.cached_pages(&as_keys(query)),
            expected,
            "{query:?}"
        );
    }
    assert_eq!(by_token.cached_chain(&chained(&[1, 2, 3, 8, 8, 9])), 5);
}

/// `dfs-weight` lists equally weighted children in the order they joined the tree
/// (SGLang's children dict), not by key; the upper half of a split node keeps its place.
#[test]
fn dfs_weight_breaks_ties_in_insertion_order() {
    let mut tree = RadixCache::new(100, false).with_token_keys(true);
    cache(&mut tree, &[9, 10, 11]);
    cache(&mut tree, &[3, 4]);
    // Splits [9, 10, 11] after [9, 10]: the upper half stays before [3, 4].
    let (_, mid) = tree.match_prefix(&[9, 10, 50]);
    let (_, three) = tree.match_prefix(&[3, 4]);
    assert_eq!(tree.dfs_weight_order(&[(three, 7), (mid, 8)]), vec![8, 7]);
    // A heavier subtree still goes first.
    assert_eq!(
        tree.dfs_weight_order(&[(mid, 8), (three, 7), (three, 6)]),
        vec![7, 6, 8]
    );
}

#[test]
fn a_disabled_tree_matches_and_keeps_nothing() {
    let mut tree = RadixCache::new(10, true);
    assert!(tree.allocate(3));
    assert_eq!(tree.insert(&[1, 2, 3]), (0, ROOT));
    assert_eq!(tree.match_prefix(&[1, 2, 3]), (0, ROOT));
    assert_eq!(tree.private_pages(), 3);
}
