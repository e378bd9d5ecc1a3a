use blis_cosim::scheduler::lower_tier::{LowerPool, LowerTier, TierMemory};

/// A memory holding `blocks` coarse blocks of `block_bytes` bytes, at 10 GB/s and 100 ns.
fn memory(blocks: u64, block_bytes: u64) -> TierMemory {
    TierMemory {
        capacity_bytes: blocks * block_bytes,
        bandwidth_gbps: 10.0,
        latency_ns: 100.0,
    }
}

#[test]
fn a_stored_block_is_found_under_its_space_only() {
    let mut pool = LowerPool::new(memory(4, 10));
    assert!(pool.store(0, 7, 10));
    assert!(pool.contains(0, 7));
    assert!(!pool.contains(1, 7), "another KV space never hits");
    assert_eq!((pool.len(), pool.used_bytes()), (1, 10));
    pool.audit().unwrap();
}

#[test]
fn a_full_pool_evicts_the_least_recently_written_block_first() {
    let mut pool = LowerPool::new(memory(3, 10));
    for h in [1, 2, 3] {
        pool.store(0, h, 10);
    }
    // Writing 1 again makes it the most recent: 2 is now the oldest.
    pool.store(0, 1, 10);
    pool.store(0, 4, 10);
    assert!(!pool.contains(0, 2));
    assert!(pool.contains(0, 1) && pool.contains(0, 3) && pool.contains(0, 4));
    pool.store(0, 5, 10);
    assert!(!pool.contains(0, 3));
    assert_eq!((pool.len(), pool.used_bytes()), (3, 30));
    pool.audit().unwrap();
}

#[test]
fn blocks_of_different_sizes_share_the_capacity_and_an_oversized_one_is_refused() {
    let mut pool = LowerPool::new(memory(1, 100));
    pool.store(0, 1, 40);
    pool.store(1, 1, 40);
    // 60 more bytes: the two oldest blocks go.
    pool.store(0, 2, 60);
    assert!(!pool.contains(0, 1) && pool.contains(1, 1) && pool.contains(0, 2));
    assert!(!pool.store(0, 3, 101));
    assert!(!pool.contains(0, 3));
    pool.audit().unwrap();
}

#[test]
fn loading_costs_latency_plus_bytes_over_bandwidth() {
    let m = memory(1, 1);
    assert_eq!(m.load_ns(0), 0);
    assert_eq!(m.load_ns(1_000), 100 + 100);
    assert_eq!(m.load_ns(1_005), 100 + 100, "whole ns, rounded down");
    let m = TierMemory::from_config(512.0, 256.0, 0.0);
    assert_eq!(m.capacity_bytes, 512 << 30);
    assert_eq!(m.load_ns(256 * 131_072), 131_072);
}

/// A tier of 16-token blocks (coarse blocks of 256 tokens, 16 blocks), 2 bytes per token.
fn tier(coarse_capacity: u64) -> LowerTier {
    let pool = LowerPool::shared(memory(coarse_capacity, 512));
    LowerTier::new(pool, 0, 2, 16)
}

/// Block hashes 1, 2, 3, ... of `blocks` blocks.
fn hashes(blocks: u64) -> Vec<u64> {
    (1..=blocks).collect()
}

#[test]
fn coarse_blocks_are_256_tokens_rounded_to_the_block_size() {
    let pool = LowerPool::shared(memory(1, 1));
    let coarse = |b| LowerTier::new(pool.clone(), 0, 1, b).coarse_tokens();
    assert_eq!(
        [coarse(16), coarse(48), coarse(100), coarse(512)],
        [256, 240, 200, 512]
    );
}

#[test]
fn write_down_stores_each_coarse_block_completed_by_the_indexed_blocks() {
    let mut t = tier(8);
    let h = hashes(40);
    t.write_down(&h, 0, 15, 0.0);
    assert!(
        t.pool().borrow().is_empty(),
        "the first coarse block is not full yet"
    );
    t.write_down(&h, 15, 33, 0.0);
    t.write_down(&h, 16, 31, 0.0);
    let pool = t.pool().borrow();
    // Blocks 16 and 32 (hashes at indices 15 and 31) end coarse blocks 0 and 1.
    assert!(pool.contains(0, 16) && pool.contains(0, 32));
    assert_eq!((pool.len(), pool.used_bytes()), (2, 2 * 512));
}

#[test]
fn lookup_extends_the_device_hit_by_consecutive_coarse_blocks() {
    let mut t = tier(8);
    let h = hashes(64);
    t.write_down(&h, 0, 32, 0.0); // coarse blocks 0 and 1
    t.write_down(&h, 32, 48, 0.0); // coarse block 2
    // Nothing on the device: coarse blocks 0..3 are consecutive in the tier.
    assert_eq!(t.extend_hit(&h, 0, 1024), 768);
    // A device hit of 5 blocks: the tier takes it to the end of coarse block 2.
    assert_eq!(t.extend_hit(&h, 80, 1024), 768 - 80);
    // Only the reached tokens count: 600 reached holds two whole coarse blocks.
    assert_eq!(t.extend_hit(&h, 0, 600), 512);
    // The device already holds the first two coarse blocks and part of the third: the
    // tier would add less than a coarse block, which is not worth a recall.
    assert_eq!(t.extend_hit(&h, 560, 1024), 0);
    // A miss in the first coarse block stops the run.
    let other = hashes(64).iter().map(|x| x + 1000).collect::<Vec<_>>();
    assert_eq!(t.extend_hit(&other, 0, 1024), 0);
}

#[test]
fn lookup_leaves_at_least_one_prompt_token_to_compute() {
    let mut t = tier(8);
    let h = hashes(32);
    t.write_down(&h, 0, 32, 0.0);
    // A 512-token prompt fully in the tier: the last block is computed, not recalled.
    assert_eq!(t.extend_hit(&h, 0, 512), 496);
    // A 256-token prompt: 240 tokens recalled, the last block computed.
    assert_eq!(t.extend_hit(&h, 0, 256), 240);
    assert_eq!(t.extend_hit(&h, 0, 257), 256);
}

#[test]
fn lookup_stops_where_the_hashes_end() {
    let mut t = tier(8);
    let h = hashes(32);
    t.write_down(&h, 0, 32, 0.0);
    // Token ids for 20 blocks only, while 1000 tokens are reached.
    assert_eq!(t.extend_hit(&h[..20], 0, 1000), 256);
}

#[test]
fn an_evicted_coarse_block_ends_the_run() {
    let mut t = tier(2);
    let h = hashes(48);
    t.write_down(&h, 0, 48, 0.0); // three coarse blocks into room for two: block 0 goes
    assert_eq!(t.extend_hit(&h, 0, 1024), 0);
    // With the first coarse block on the device, blocks 1 and 2 extend the hit.
    assert_eq!(t.extend_hit(&h, 256, 1024), 512);
    t.pool().borrow().audit().unwrap();
}
