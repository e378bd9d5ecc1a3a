//! Moments and order statistics of an [`IntegerCounts`] without sorting what it holds: its
//! `(value, count)` entries come in no order, a value possibly in several of them (its maps,
//! and the logs of many instances' inter-token gap tallies). One pass ([`Survey`]) sums them
//! and counts them per bucket of their values' leading bits ([`Histogram`]), which says in
//! which bucket each rank asked for lies and its rank there; a second pass gathers the
//! entries of those few buckets, which alone are sorted. The run's pooled gaps (hundreds of
//! thousands of entries, from every instance) then cost two passes, not a merge of them all
//! into one sorted log.

use super::super::count_log::unpack;
use super::{IntegerCounts, Moments};

/// Takes the entries of an [`IntegerCounts`], one at a time
/// ([`IntegerCounts::each_entry`]).
pub(super) trait EntrySink {
    /// Takes `count` copies of `value`.
    fn take(&mut self, value: u64, count: u64);

    /// Takes a log's packed entries ([`unpack`] reads one).
    #[inline(always)]
    fn take_packed(&mut self, entries: &[u64]) {
        for &entry in entries {
            let (value, count) = unpack(entry);
            self.take(value, count);
        }
    }
}

/// The first pass: exact integer moments and the histogram.
pub(super) struct Survey {
    histogram: Histogram,
    count: u128,
    sum: u128,
    squares: u128,
    /// Whether the sum of squares passed 2^128.
    overflowed: bool,
    min: u64,
    max: u64,
}

impl Survey {
    /// The moments of the values `counts` holds, and how many fall in each bucket.
    pub(super) fn of(counts: &IntegerCounts) -> (Moments, Histogram) {
        let mut survey = Survey {
            histogram: Histogram::new(),
            count: 0,
            sum: 0,
            squares: 0,
            overflowed: false,
            min: u64::MAX,
            max: 0,
        };
        counts.each_entry(&mut survey);
        let moments = Moments {
            count: survey.count,
            sum: survey.sum,
            sum_of_squares: (!survey.overflowed).then_some(survey.squares),
            min: survey.min,
            max: survey.max,
        };
        (moments, survey.histogram)
    }
}

impl EntrySink for Survey {
    /// [`Survey::take`] of each entry, summed in registers: a packed value (below 2^40) and
    /// count (below 2^24) make a square times count below 2^104, which needs no check.
    fn take_packed(&mut self, entries: &[u64]) {
        let (mut count, mut sum, mut squares) = (0u128, 0u128, self.squares);
        let (mut overflowed, mut min, mut max) = (false, self.min, self.max);
        let buckets = &mut self.histogram.counts[..];
        for &entry in entries {
            let (value, c) = unpack(entry);
            buckets[bucket_of(value)] += c;
            let (v, c) = (u128::from(value), u128::from(c));
            count += c;
            sum += v * c;
            let (next, carry) = squares.overflowing_add(v * v * c);
            squares = next;
            overflowed |= carry;
            min = min.min(value);
            max = max.max(value);
        }
        self.count += count;
        self.sum += sum;
        self.squares = squares;
        self.overflowed |= overflowed;
        (self.min, self.max) = (min, max);
    }

    #[inline(always)]
    fn take(&mut self, value: u64, count: u64) {
        self.histogram.add(value, count);
        let (v, c) = (u128::from(value), u128::from(count));
        self.count += c;
        self.sum += v * c;
        // A value below 2^32 (a gap under 4.3 s: all but outliers) squares within 64 bits,
        // and times a count within 128.
        let term = if value >> 32 == 0 {
            Some(u128::from(value * value) * c)
        } else {
            (v * v).checked_mul(c)
        };
        let (squares, carry) = self.squares.overflowing_add(term.unwrap_or(0));
        self.squares = squares;
        self.overflowed |= carry | term.is_none();
        self.min = self.min.min(value);
        self.max = self.max.max(value);
    }
}

/// Bits after a value's leading one that pick its bucket within its power of two: a bucket
/// is at most 1/256 of its values wide (16.4 µs around an 8 ms gap).
const SUB_BITS: u32 = 8;

/// The bucket of `value`: below 2^(SUB_BITS + 1) a bucket per value; above, each power of
/// two split into 2^SUB_BITS buckets of equal width. Larger values never take lower buckets.
#[inline]
fn bucket_of(value: u64) -> usize {
    let top = u64::BITS - 1 - (value | 1 << SUB_BITS).leading_zeros();
    let shift = top - SUB_BITS;
    ((shift as usize) << SUB_BITS) + (value >> shift) as usize
}

/// How many values fall in each bucket ([`bucket_of`]).
pub(super) struct Histogram {
    counts: Vec<u64>,
}

impl Histogram {
    /// No values yet (a bucket for every `u64`: 14,592 of them, 114 KiB).
    pub(super) fn new() -> Histogram {
        Histogram {
            counts: vec![0; bucket_of(u64::MAX) + 1],
        }
    }

    /// Adds `count` copies of `value`.
    #[inline]
    pub(super) fn add(&mut self, value: u64, count: u64) {
        self.counts[bucket_of(value)] += count;
    }

    /// The value at each of the ascending `ranks` (0-based) among those `counts` holds,
    /// which are exactly the values added here; a rank past them is left out.
    pub(super) fn order_statistics(&self, counts: &IntegerCounts, ranks: &[u64]) -> Vec<u64> {
        let targets = super::locate(&self.counts, ranks);
        let mut wanted: Vec<usize> = targets.iter().map(|&(bucket, _)| bucket).collect();
        wanted.dedup();
        let mut gathered = gather(counts, &wanted);
        for entries in &mut gathered {
            entries.sort_unstable_by_key(|&(value, _)| value);
        }
        let mut slot = 0;
        targets
            .iter()
            .map(|&(bucket, rank)| {
                while wanted[slot] != bucket {
                    slot += 1;
                }
                nth(&gathered[slot], rank)
            })
            .collect()
    }
}

/// The entries of `counts` in each of the ascending buckets `wanted`, in no order.
fn gather(counts: &IntegerCounts, wanted: &[usize]) -> Vec<Vec<(u64, u64)>> {
    let (Some(&low), Some(&high)) = (wanted.first(), wanted.last()) else {
        return Vec::new();
    };
    let mut gather = Gather {
        wanted,
        low,
        high,
        gathered: vec![Vec::new(); wanted.len()],
    };
    counts.each_entry(&mut gather);
    gather.gathered
}

/// The second pass: the entries of the buckets that hold the ranks asked for.
struct Gather<'w> {
    /// Those buckets, ascending.
    wanted: &'w [usize],
    /// The first and last of them.
    low: usize,
    high: usize,
    /// Their entries, by bucket.
    gathered: Vec<Vec<(u64, u64)>>,
}

impl EntrySink for Gather<'_> {
    #[inline(always)]
    fn take(&mut self, value: u64, count: u64) {
        let bucket = bucket_of(value);
        if (self.low..=self.high).contains(&bucket)
            && let Ok(slot) = self.wanted.binary_search(&bucket)
        {
            self.gathered[slot].push((value, count));
        }
    }
}

/// The value at rank `rank` of `entries`, sorted by value (its largest if `rank` is past
/// them, which a bucket's own rank never is).
fn nth(entries: &[(u64, u64)], rank: u64) -> u64 {
    let mut seen = 0u64;
    for &(value, count) in entries {
        seen += count;
        if rank < seen {
            return value;
        }
    }
    entries.last().map_or(0, |&(value, _)| value)
}
