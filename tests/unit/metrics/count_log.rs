//! Unit tests of `blis_cosim::metrics::count_log`.

use blis_cosim::metrics::IntegerCounts;
use blis_cosim::metrics::count_log::*;
use proptest::prelude::*;

/// A batch floor small enough that a few hundred adds sort several batches.
const MIN_BATCH: usize = 8;

proptest! {
    /// Whatever is added, in whatever order and batches, the log holds the same values
    /// and counts as a hash-map tally, and no more entries than twice its distinct
    /// values (or a batch).
    #[test]
    fn a_log_counts_what_a_map_counts(
        adds in prop::collection::vec(
            (prop_oneof![0..20u64, 0..1u64 << 40, MAX_VALUE - 2..=MAX_VALUE + 2, Just(u64::MAX)],
             prop_oneof![1..4u64, Just(0u64), MAX_COUNT - 1..=MAX_COUNT + 1, Just(u64::MAX / 4)]),
            0..300),
    ) {
        let (mut log, mut map) = (CountLog::with_min_batch(MIN_BATCH), IntegerCounts::default());
        let mut packed = std::collections::BTreeMap::<u64, u64>::new();
        for &(value, count) in &adds {
            log.add(value, count);
            map.add(value, count);
            if value <= MAX_VALUE && (1..=MAX_COUNT).contains(&count) {
                *packed.entry(value).or_insert(0) += count;
            }
            // A packed value takes one entry, or, past MAX_COUNT, fewer than two per
            // MAX_COUNT of its count (any two entries in a row hold more than that);
            // the appended entries never outnumber the sorted ones (or a batch).
            let needed: u64 = packed.values().map(|c| 2 * c.div_ceil(MAX_COUNT) - 1).sum();
            let (sorted, appended) = log.packed_entries();
            prop_assert!(sorted as u64 <= needed);
            prop_assert!(appended < sorted.max(MIN_BATCH));
        }
        // Merged into a log holding values, and into an empty one.
        let mut merged = CountLog::with_min_batch(MIN_BATCH);
        merged.add(3, 2);
        map.add(3, 2);
        merged.merge(&log);
        prop_assert_eq!(merged.len(), map.len());
        prop_assert_eq!(merged.sorted(), map.sorted());
        let mut copied = CountLog::with_min_batch(MIN_BATCH);
        copied.merge(&log);
        prop_assert_eq!(copied.len(), log.len());
        prop_assert_eq!(copied.sorted(), log.sorted());
    }
}

/// `n` values as a run's gaps come: mostly distinct, some repeated, a few too wide to pack
/// (a simple generator, the same every time).
fn gaps(n: usize, seed: u64) -> Vec<(u64, u64)> {
    let mut x = seed;
    (0..n)
        .map(|i| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let value = match i % 97 {
                0 => MAX_VALUE + (x >> 60),
                1..=20 => 7_000_000 + (x >> 61),
                _ => 5_000_000 + (x >> 44),
            };
            (value, 1 + (x >> 62))
        })
        .collect()
}

/// Logs made while a `FoldBehind` is held fold on the folding thread (several chunks'
/// worth here): they hold, merge and copy what logs folded on their own thread do, and stay
/// bounded; logs made after it is dropped fold on their own thread again.
#[test]
fn logs_folded_behind_hold_what_logs_folded_in_place_hold() {
    let (adds, more) = (gaps(150_000, 1), gaps(40_000, 2));
    let fill = |log: &mut CountLog, adds: &[(u64, u64)]| {
        adds.iter().for_each(|&(v, c)| log.add(v, c));
    };
    let (mut plain, mut plain_more) = (CountLog::default(), CountLog::default());
    fill(&mut plain, &adds);
    fill(&mut plain_more, &more);
    let folding = blis_cosim::metrics::FoldBehind::start().unwrap();
    let (mut behind, mut behind_more) = (CountLog::default(), CountLog::default());
    fill(&mut behind, &adds);
    fill(&mut behind_more, &more);
    drop(folding);
    assert_eq!(behind.len(), plain.len());
    assert_eq!(behind.sorted(), plain.sorted());
    // Bounded: no more entries than the values added, nor than twice the distinct ones
    // and a chunk.
    let (sorted, appended) = behind.packed_entries();
    let distinct = plain.sorted().len();
    assert!(
        sorted <= distinct && appended <= distinct + (1 << 15),
        "{sorted} {appended}"
    );
    // A copy is a log folded in place, with the same values.
    let copy = behind.clone();
    assert_eq!(copy.sorted(), plain.sorted());
    // Merges either way, and into a log made after the guard is gone.
    plain.merge(&plain_more);
    behind.merge(&behind_more);
    assert_eq!(behind.sorted(), plain.sorted());
    let mut after = CountLog::default();
    after.merge(&behind);
    assert_eq!(after.len(), plain.len());
    assert_eq!(after.sorted(), plain.sorted());
    let mut into_behind = behind_more;
    into_behind.merge(&copy);
    plain_more.merge(&copy);
    assert_eq!(into_behind.sorted(), plain_more.sorted());
}

/// Values and counts too wide to pack go to the side list and come back with the packed ones,
/// sorted, equal values added; a count of 0 adds nothing.
#[test]
fn wide_values_and_counts_come_back_with_the_packed_ones() {
    let mut log = CountLog::with_min_batch(2);
    log.add(MAX_VALUE, MAX_COUNT);
    log.add(MAX_VALUE + 1, 1);
    log.add(5, MAX_COUNT + 1);
    log.add(0, 1);
    log.add(MAX_VALUE, 1);
    log.add(0, 0);
    log.add(0, 2);
    let expected = vec![
        (0, 3),
        (5, MAX_COUNT + 1),
        (MAX_VALUE, MAX_COUNT + 1),
        (MAX_VALUE + 1, 1),
    ];
    assert_eq!(log.sorted(), expected);
    assert_eq!(log.len(), 3 + (MAX_COUNT + 1) + (MAX_COUNT + 1) + 1);
}
