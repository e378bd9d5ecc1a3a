//! A multiset of integers written as `(value, count)` entries appended in any order and
//! sorted in batches: an append per entry instead of a hash-map probe, for tallies such as an
//! instance's inter-token gaps, where nearly every entry is a value the tally has seen at most
//! a few times (each step's duration is its own). Memory stays bounded by the distinct values:
//! once the entries appended since the last batch outnumber the sorted ones (and a floor),
//! they are sorted and merged in. The sorted ones are held compact, a block's differences and
//! counts at the widths they need rather than 64 bits an entry ([`SortedBlocks`]). While a [`super::FoldBehind`] is held, the logs made by
//! [`CountLog::default`] are sorted and folded on a folding thread instead (see
//! `fold_behind.rs`); what they hold is the same.

use super::fold_behind::{self, Behind, CHUNK};
use super::sorted_blocks::SortedBlocks;
use super::stats::sort_adding_equal;

/// Bits of a packed entry that hold its count; the value is held above them.
pub(super) const COUNT_BITS: u32 = 24;

/// The largest count one packed entry holds.
pub const MAX_COUNT: u64 = (1 << COUNT_BITS) - 1;

/// The largest value a packed entry holds (gaps under about 18 minutes).
pub const MAX_VALUE: u64 = u64::MAX >> COUNT_BITS;

/// Fewest appended entries that make a batch, unless a log is made with another floor.
const MIN_BATCH: usize = 1 << 13;

/// Integers with their counts, appended and sorted in batches; see the module.
#[derive(Debug)]
pub struct CountLog {
    /// Distinct values in ascending order, each packed as `value << COUNT_BITS | count`, in
    /// compact blocks; a value whose count passes [`MAX_COUNT`] takes several adjacent
    /// entries.
    sorted: SortedBlocks,
    /// Entries appended since the last batch, packed the same way, in the order they came.
    appended: Vec<u64>,
    /// Values whose value or count is too large to pack, with their counts.
    wide: std::collections::BTreeMap<u64, u64>,
    /// How many values it holds.
    len: u64,
    /// Fewest appended entries that make a batch.
    min_batch: usize,
    /// The folding thread that sorts and folds the appended entries, a chunk at a time, when
    /// the log was made while a [`super::FoldBehind`] was held; `sorted` then stays empty.
    behind: Option<Behind>,
}

impl Default for CountLog {
    /// An empty log ([`CountLog::with_min_batch`] 8,192), folded behind while this thread
    /// holds a [`super::FoldBehind`].
    fn default() -> Self {
        CountLog {
            behind: fold_behind::current().map(Behind::new),
            ..CountLog::with_min_batch(MIN_BATCH)
        }
    }
}

impl CountLog {
    /// An empty log folded on its own thread whatever the thread holds (the folded part of
    /// a log folded behind).
    pub(super) fn plain() -> CountLog {
        CountLog::with_min_batch(MIN_BATCH)
    }
}

impl Clone for CountLog {
    /// A copy; of a log folded behind, a log folded on its own thread.
    fn clone(&self) -> Self {
        if self.behind.is_none() {
            return CountLog {
                sorted: self.sorted.clone(),
                appended: self.appended.clone(),
                wide: self.wide.clone(),
                len: self.len,
                min_batch: self.min_batch,
                behind: None,
            };
        }
        let mut copy = CountLog::with_min_batch(self.min_batch);
        self.each_packed(|entries| copy.appended.extend_from_slice(entries));
        copy.fold_appended();
        copy.wide = self.wide.clone();
        copy.len = self.len;
        copy
    }
}

impl CountLog {
    /// An empty log that sorts a batch once `min_batch` entries (and more than it holds
    /// sorted) have been appended; [`CountLog::default`] takes 8,192.
    pub fn with_min_batch(min_batch: usize) -> Self {
        CountLog {
            sorted: SortedBlocks::default(),
            appended: Vec::new(),
            wide: std::collections::BTreeMap::new(),
            len: 0,
            min_batch,
            behind: None,
        }
    }

    /// How many packed entries it holds: sorted, and appended since the last batch (of a log
    /// folded behind, those its folded part holds sorted and appended, and those it appended
    /// since its last chunk).
    pub fn packed_entries(&self) -> (usize, usize) {
        let (sorted, appended) = (self.sorted.len(), self.appended.len());
        match &self.behind {
            None => (sorted, appended),
            Some(behind) => behind.read(|log| {
                let (s, a) = log.packed_entries();
                (sorted + s, appended + a)
            }),
        }
    }

    /// Each run of packed entries it holds (of a log folded behind, once its chunks are
    /// folded), to `each`, in no order ([`unpack`] reads an entry); not the side list of wide
    /// values ([`CountLog::wide_entries`]).
    pub(super) fn each_packed(&self, mut each: impl FnMut(&[u64])) {
        if let Some(behind) = &self.behind {
            // The folded part is a plain log.
            behind.read(|log| {
                log.sorted.each_block(&mut each);
                each(&log.appended);
            });
        }
        self.sorted.each_block(&mut each);
        each(&self.appended);
    }

    /// Its values too large to pack, with their counts (not among [`CountLog::each_packed`]'s).
    pub(super) fn wide_entries(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.wide.iter().map(|(&value, &count)| (value, count))
    }

    /// Adds packed entries (from a log folded behind): the folding thread's side.
    pub(super) fn append_packed(&mut self, entries: &[u64]) {
        self.len += entries.iter().map(|&e| e & MAX_COUNT).sum::<u64>();
        self.appended.extend_from_slice(entries);
        self.fold_when_due();
    }

    /// Adds `count` copies of `value`. In line where it is called (an instance's gap tally adds
    /// at each step): an append while there is room, anything else out of line.
    #[inline]
    pub fn add(&mut self, value: u64, count: u64) {
        let packs = (1..=MAX_COUNT).contains(&count) && value <= MAX_VALUE;
        if packs && self.appended.len() + 1 < self.batch_at() {
            self.len += count;
            self.appended.push(value << COUNT_BITS | count);
        } else {
            self.add_slow(value, count);
        }
    }

    /// [`CountLog::add`] past the room: none to add, a value to keep on the side list, or an
    /// append that fills a batch or a chunk.
    #[cold]
    #[inline(never)]
    fn add_slow(&mut self, value: u64, count: u64) {
        if count == 0 {
            return;
        }
        self.len += count;
        if value > MAX_VALUE || count > MAX_COUNT {
            *self.wide.entry(value).or_insert(0) += count;
            return;
        }
        self.appended.push(value << COUNT_BITS | count);
        self.fold_when_due();
    }

    /// How many appended entries make the log fold them ([`CountLog::fold_when_due`]).
    #[inline]
    fn batch_at(&self) -> usize {
        if self.behind.is_some() {
            CHUNK
        } else {
            self.sorted.len().max(self.min_batch)
        }
    }

    /// Adds every value `other` holds: its entries appended, sorted in batches as added
    /// ones are (so that merging many logs costs about a sort of them all, not a pass over
    /// the merged ones per log).
    pub fn merge(&mut self, other: &CountLog) {
        self.len += other.len;
        other.each_packed(|entries| self.appended.extend_from_slice(entries));
        for (&value, &count) in &other.wide {
            *self.wide.entry(value).or_insert(0) += count;
        }
        self.fold_when_due();
    }

    /// How many values it holds.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Each distinct value with its count, smallest first.
    pub fn sorted(&self) -> Vec<(u64, u64)> {
        let mut pairs = Vec::new();
        let mut take = |block: &[u64]| pairs.extend(block.iter().map(|&e| unpack(e)));
        if self.appended.is_empty() && self.behind.is_none() {
            self.sorted.each_block(&mut take);
        } else {
            let mut log = self.clone();
            log.fold_appended();
            log.sorted.each_block(&mut take);
        }
        // Sorted but for the side list; a value past MAX_COUNT takes several entries.
        pairs.extend(self.wide.iter().map(|(&v, &c)| (v, c)));
        sort_adding_equal(&mut pairs);
        pairs
    }

    /// Folds the appended entries in once they outnumber the sorted ones and a batch, so
    /// that it holds at most about twice its distinct values.
    fn fold_when_due(&mut self) {
        if let Some(behind) = &mut self.behind {
            if self.appended.len() >= CHUNK {
                behind.hand_over(&mut self.appended);
            }
            return;
        }
        if self.appended.len() >= self.batch_at() {
            self.fold_appended();
        }
    }

    /// Sorts the appended entries and folds them into the sorted ones.
    fn fold_appended(&mut self) {
        if self.appended.is_empty() {
            return;
        }
        let mut appended = std::mem::take(&mut self.appended);
        sort_by_value(&mut appended);
        self.sorted.merge(&appended);
        appended.clear();
        // Room for the whole next batch in one allocation: growing the list as entries
        // come would copy it at each doubling.
        let next_batch = self.batch_at();
        if appended.capacity() < next_batch {
            appended = Vec::with_capacity(next_batch);
        }
        self.appended = appended;
    }
}

/// The value and count of a packed entry.
#[inline(always)]
pub(super) fn unpack(entry: u64) -> (u64, u64) {
    (entry >> COUNT_BITS, entry & MAX_COUNT)
}

/// Bits of a value's offset sorted per pass of [`sort_by_value`].
const DIGIT_BITS: u32 = 11;

/// Below this many entries, [`sort_by_value`] compares instead of counting.
const COUNT_SORT_ABOVE: usize = 1024;

/// Sorts packed entries by value (entries of one value in any order): least significant
/// digit first over the values' offsets from the smallest, [`DIGIT_BITS`] a pass, as many
/// passes as the values' range needs (two or three for a run's step times).
fn sort_by_value(entries: &mut Vec<u64>) {
    if entries.len() <= COUNT_SORT_ABOVE {
        entries.sort_unstable();
        return;
    }
    let (lo, hi) = entries
        .iter()
        .fold((u64::MAX, 0), |(lo, hi), &e| (lo.min(e), hi.max(e)));
    let (lo, range) = (lo >> COUNT_BITS, (hi >> COUNT_BITS) - (lo >> COUNT_BITS));
    let passes = (u64::BITS - range.leading_zeros()).div_ceil(DIGIT_BITS);
    let mut scratch = vec![0u64; entries.len()];
    for pass in 0..passes {
        let digit =
            |e: u64| (((e >> COUNT_BITS) - lo) >> (pass * DIGIT_BITS)) as usize & DIGIT_MASK;
        let mut starts = [0usize; 1 << DIGIT_BITS];
        for &e in entries.iter() {
            starts[digit(e)] += 1;
        }
        let mut sum = 0;
        for start in starts.iter_mut() {
            (*start, sum) = (sum, sum + *start);
        }
        for &e in entries.iter() {
            let d = digit(e);
            scratch[starts[d]] = e;
            starts[d] += 1;
        }
        std::mem::swap(entries, &mut scratch);
    }
}

/// The low [`DIGIT_BITS`] bits.
const DIGIT_MASK: usize = (1 << DIGIT_BITS) - 1;
