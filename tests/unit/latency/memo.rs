use blis_cosim::latency::memo::*;

/// A plain integer key (the harness cannot implement the library's trait for `u64` itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key(u64);

impl MemoKey for Key {
    fn memo_hash(&self) -> u64 {
        self.0
    }
}

#[test]
fn a_key_hits_after_its_miss_until_a_key_of_its_slot_evicts_it() {
    let mut memo = PriceMemo::<Key>::new(3, 2);
    assert_eq!(memo.keys.len(), 4);
    let (hit, prices) = memo.entry(Key(7));
    assert!(!hit);
    prices.copy_from_slice(&[70, 71]);
    let (hit, prices) = memo.entry(Key(7));
    assert!(hit);
    assert_eq!(prices, &[70, 71]);
    // Find another key of the same slot: it evicts 7.
    let other = (8..1000u64)
        .map(Key)
        .find(|k| memo.slot(k) == memo.slot(&Key(7)))
        .unwrap();
    assert!(!memo.entry(other).0);
    assert!(!memo.entry(Key(7)).0);
    assert_eq!(memo.stats(), MemoStats { hits: 1, misses: 3 });
    assert_eq!(memo.stats().hit_rate(), 0.25);
}
