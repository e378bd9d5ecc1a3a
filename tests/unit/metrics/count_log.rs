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
