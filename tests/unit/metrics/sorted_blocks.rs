//! Unit tests of `blis_cosim::metrics::sorted_blocks`.

use blis_cosim::metrics::count_log::{MAX_COUNT, MAX_VALUE};
use blis_cosim::metrics::sorted_blocks::{BLOCK, SortedBlocks};
use proptest::prelude::*;

/// `value` and `count` packed as a log's entry.
fn packed(value: u64, count: u64) -> u64 {
    value << 24 | count
}

/// The entries `blocks` holds, in its order, as `(value, count)`.
fn entries(blocks: &SortedBlocks) -> Vec<(u64, u64)> {
    let mut all = Vec::new();
    blocks.each_block(|block| all.extend(block.iter().map(|&e| (e >> 24, e & MAX_COUNT))));
    all
}

/// The edge values and counts come back as written, equal values added only while the sum
/// fits, in one block of the widest differences and counts: a header, 40 words of
/// differences, 24 of counts less one and the word past the blocks.
#[test]
fn edge_values_and_counts_come_back_exact() {
    let mut blocks = SortedBlocks::default();
    let first = [
        packed(0, 1),
        packed(0, MAX_COUNT),
        packed(1, MAX_COUNT),
        packed(MAX_VALUE - 1, 5),
        packed(MAX_VALUE, MAX_COUNT),
    ];
    blocks.merge(&first);
    let expected = [
        (0, 1),
        (0, MAX_COUNT),
        (1, MAX_COUNT),
        (MAX_VALUE - 1, 5),
        (MAX_VALUE, MAX_COUNT),
    ];
    assert_eq!(entries(&blocks), expected);
    assert_eq!((blocks.len(), blocks.words()), (5, 1 + 40 + 24 + 1));
    // (0, 2) adds to (0, 1) but not to (0, MAX_COUNT); (MAX_VALUE, 1) sorts before
    // (MAX_VALUE, MAX_COUNT) and cannot take it.
    blocks.merge(&[packed(0, 2), packed(MAX_VALUE, 1)]);
    let expected = [
        (0, 3),
        (0, MAX_COUNT),
        (1, MAX_COUNT),
        (MAX_VALUE - 1, 5),
        (MAX_VALUE, 1),
        (MAX_VALUE, MAX_COUNT),
    ];
    assert_eq!(entries(&blocks), expected);
    assert_eq!(blocks.clone().len(), 6);
}

/// Close values with counts of one take no words for their counts: 200 values a step of 3
/// apart take four blocks of a header and two words (differences of 2 bits), and the word
/// past them.
#[test]
fn close_values_take_few_words() {
    let mut blocks = SortedBlocks::default();
    let batch: Vec<u64> = (0..200).map(|i| packed(1_000_000 + 3 * i, 1)).collect();
    blocks.merge(&batch);
    assert_eq!(blocks.len(), 200);
    assert_eq!(200usize.div_ceil(BLOCK), 4);
    assert_eq!(blocks.words(), 4 * (1 + 2) + 1);
    let expected: Vec<(u64, u64)> = (0..200).map(|i| (1_000_000 + 3 * i, 1)).collect();
    assert_eq!(entries(&blocks), expected);
}

proptest! {
    /// Sorted batches merged one after another hold the multiset a plain sorted list of
    /// them holds: ascending, each value's counts adding up to the list's, no entry more than
    /// the list needs (a value past `MAX_COUNT` takes fewer than two entries per
    /// `MAX_COUNT`).
    #[test]
    fn merged_batches_hold_what_a_sorted_list_holds(
        batches in prop::collection::vec(prop::collection::vec(
            (prop_oneof![0..20u64, 0..1u64 << 40, MAX_VALUE - 2..=MAX_VALUE,
                         5_000_000..5_100_000u64],
             prop_oneof![1..4u64, MAX_COUNT - 1..=MAX_COUNT]),
            0..300), 0..6),
    ) {
        let mut blocks = SortedBlocks::default();
        let mut list: Vec<(u64, u64)> = Vec::new();
        for batch in &batches {
            let mut sorted: Vec<u64> = batch.iter().map(|&(v, c)| packed(v, c)).collect();
            sorted.sort_unstable();
            blocks.merge(&sorted);
            list.extend(batch);
            list.sort_unstable();
            let mut want = std::collections::BTreeMap::<u64, u64>::new();
            list.iter().for_each(|&(v, c)| *want.entry(v).or_insert(0) += c);
            let held = entries(&blocks);
            prop_assert_eq!(held.len(), blocks.len());
            prop_assert!(held.windows(2).all(|w| w[0].0 <= w[1].0));
            prop_assert!(held.iter().all(|&(_, c)| (1..=MAX_COUNT).contains(&c)));
            let mut got = std::collections::BTreeMap::<u64, u64>::new();
            held.iter().for_each(|&(v, c)| *got.entry(v).or_insert(0) += c);
            let needed: u64 = want.values().map(|c| 2 * c.div_ceil(MAX_COUNT) - 1).sum();
            prop_assert!(held.len() as u64 <= needed);
            prop_assert_eq!(got, want);
        }
    }
}
