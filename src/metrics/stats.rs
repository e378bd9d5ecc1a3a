//! Distribution statistics with numpy's semantics (`np.mean`, `np.std`, `np.percentile`).

use std::cmp::Ordering;

use super::count_log::CountLog;

mod ranks;

/// Nanoseconds per millisecond.
pub const NS_PER_MS: f64 = 1e6;

/// Mean, median, spread and tail percentiles of one latency metric, in milliseconds, as vLLM's
/// `benchmark_serving` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LatencyStats {
    /// Number of values the statistics were computed from. When 0, every other field is 0
    /// (vLLM's `np.mean(x or 0)` convention).
    pub count: usize,
    /// Arithmetic mean.
    pub mean_ms: f64,
    /// 50th percentile.
    pub median_ms: f64,
    /// Population standard deviation (`np.std`, `ddof = 0`).
    pub std_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
}

impl LatencyStats {
    /// Statistics of `values_ns` (in ns, read through `to_f64`, ordered by `cmp`), converted to
    /// ms. The slice is reordered: percentiles are found by selection, not by a full sort,
    /// because pooled inter-token latencies run to tens of millions of values.
    pub fn from_ns<T: Copy>(
        values_ns: &mut [T],
        cmp: impl Fn(&T, &T) -> Ordering,
        to_f64: impl Fn(T) -> f64,
    ) -> Self {
        if values_ns.is_empty() {
            return LatencyStats::default();
        }
        let mean = mean(values_ns, &to_f64);
        let variance = variance(values_ns, mean, &to_f64);
        // Each selection leaves the values below it in front, so the next, higher percentile
        // only searches what lies above.
        let (median, below_median) = percentile_above(values_ns, 0, 50.0, &cmp, &to_f64);
        let (p90, below_p90) = percentile_above(values_ns, below_median, 90.0, &cmp, &to_f64);
        let (p99, _) = percentile_above(values_ns, below_p90, 99.0, &cmp, &to_f64);
        LatencyStats::in_ms(values_ns.len(), mean, variance, [median, p90, p99])
    }

    /// [`LatencyStats::from_ns`] of integer nanoseconds, without reordering `values_ns` and
    /// with three sequential passes over it, which matters for tens of millions of pooled
    /// inter-token latencies: exact integer sums give the mean (the in-order float sum's
    /// whenever that sum is exact, below 2^53 ns) and the variance, radix selection the
    /// percentiles.
    pub fn from_integer_ns(values_ns: &[u64]) -> Self {
        if values_ns.is_empty() {
            return LatencyStats::default();
        }
        let exact = |ns: u64| ns as f64;
        let moments = Moments::of(values_ns);
        let mean = moments.sum as f64 / values_ns.len() as f64;
        let variance = moments
            .variance()
            .unwrap_or_else(|| variance(values_ns, mean, exact));
        let last = values_ns.len() - 1;
        let quantiles = [50.0, 90.0, 99.0].map(|q| percentile_position(values_ns.len(), q));
        // Each percentile needs the order statistics at its index and the next.
        let mut ranks: Vec<usize> = quantiles
            .iter()
            .flat_map(|&(below, _)| [below, (below + 1).min(last)])
            .collect();
        ranks.dedup();
        let mut ranked = vec![0; ranks.len()];
        order_statistics(values_ns, moments.min, moments.max, &ranks, &mut ranked);
        let value_at = |rank: usize| exact(ranked[ranks.binary_search(&rank).unwrap_or(0)]);
        let percentiles =
            quantiles.map(|(below, t)| lerp(value_at(below), value_at((below + 1).min(last)), t));
        LatencyStats::in_ms(values_ns.len(), mean, variance, percentiles)
    }

    /// [`LatencyStats::from_integer_ns`] of the values `counts` holds, with the same results:
    /// exact integer moments from one pass over its entries, which also counts them per
    /// bucket of their leading bits, and order statistics from the entries of the buckets
    /// holding them (`stats/ranks.rs`), without sorting the rest. (Only when the sum of
    /// squares overflows 2^128 does the variance, then summed per distinct value in order,
    /// differ in its last bits.)
    pub fn from_counts(counts: &IntegerCounts) -> Self {
        let n = counts.len;
        if n == 0 {
            return LatencyStats::default();
        }
        let (moments, histogram) = ranks::Survey::of(counts);
        let sum = moments.sum;
        let mean = sum as f64 / n as f64;
        let variance = moments.variance().unwrap_or_else(|| {
            let squares: f64 = counts
                .sorted()
                .iter()
                .map(|&(v, c)| (v as f64 - mean).powi(2) * c as f64)
                .sum();
            squares / n as f64
        });
        let len = usize::try_from(n).unwrap_or(usize::MAX);
        let last = len - 1;
        let quantiles = [50.0, 90.0, 99.0].map(|q| percentile_position(len, q));
        // Each percentile needs the order statistics at its index and the next.
        let mut ranks: Vec<u64> = quantiles
            .iter()
            .flat_map(|&(below, _)| [below, (below + 1).min(last)])
            .map(|rank| rank as u64)
            .collect();
        ranks.dedup();
        let ranked = histogram.order_statistics(counts, &ranks);
        let value_at = |rank: usize| {
            let at = ranks.binary_search(&(rank as u64)).unwrap_or(0);
            ranked.get(at).map_or(moments.max, |&v| v) as f64
        };
        let percentiles =
            quantiles.map(|(below, t)| lerp(value_at(below), value_at((below + 1).min(last)), t));
        LatencyStats::in_ms(len, mean, variance, percentiles)
    }

    /// The statistics of `count` values from their mean, variance and 50th, 90th and 99th
    /// percentiles in ns.
    fn in_ms(count: usize, mean: f64, variance: f64, [median, p90, p99]: [f64; 3]) -> Self {
        LatencyStats {
            count,
            mean_ms: mean / NS_PER_MS,
            median_ms: median / NS_PER_MS,
            std_ms: variance.sqrt() / NS_PER_MS,
            p90_ms: p90 / NS_PER_MS,
            p99_ms: p99 / NS_PER_MS,
        }
    }
}

/// The population variance of `values` read through `to_f64` about `mean`, summed in order.
fn variance<T: Copy>(values: &[T], mean: f64, to_f64: impl Fn(T) -> f64) -> f64 {
    let squares: f64 = values
        .iter()
        .map(|&v| {
            let d = to_f64(v) - mean;
            d * d
        })
        .sum();
    squares / values.len() as f64
}

/// A multiset of integers held as a count per distinct value: memory grows with the distinct
/// values (for inter-token latencies, bounded by the distinct step times), not with the values.
/// A value and its count that both fit 32 bits (an inter-token gap under 4.29 s seen fewer than
/// 2^32 times: nearly all) take 8 bytes in `narrow`; the others go to `wide`. A value is held
/// in one of the two, never both. The values are hashed with foldhash's fixed-seed hasher: a
/// few multiplications for an integer, where a streaming xxh3 state cost more than the table
/// itself (the maps' order never reaches an output: [`IntegerCounts::sorted`] sorts, merging
/// adds). Counts tallied elsewhere in [`CountLog`]s are kept as those logs
/// ([`IntegerCounts::add_log`]): neither probed value by value nor merged and sorted, since
/// the statistics of the run's pooled gaps ([`LatencyStats::from_counts`]) need no order.
/// A value may be held in several of them, and in a map too.
#[derive(Debug, Clone, Default)]
pub struct IntegerCounts {
    narrow: std::collections::HashMap<u32, u32, foldhash::fast::FixedState>,
    wide: std::collections::HashMap<u64, u64, foldhash::fast::FixedState>,
    /// Counts added as logs, each as it came.
    logs: Vec<CountLog>,
    len: u64,
}

/// Equal when they hold the same values with the same counts, however held.
impl PartialEq for IntegerCounts {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.sorted() == other.sorted()
    }
}

impl Eq for IntegerCounts {}

impl IntegerCounts {
    /// Adds every value of `values`.
    pub fn extend<V: std::borrow::Borrow<u64>>(&mut self, values: impl IntoIterator<Item = V>) {
        for v in values {
            let v = *v.borrow();
            // The common case in one probe: a narrow value, held narrow or new.
            if self.wide.is_empty()
                && let Ok(narrow) = u32::try_from(v)
            {
                let count = self.narrow.entry(narrow).or_insert(0);
                if *count < u32::MAX {
                    *count += 1;
                    self.len += 1;
                    continue;
                }
            }
            self.add(v, 1);
        }
    }

    /// Adds `count` copies of `value`.
    pub fn add(&mut self, value: u64, count: u64) {
        use std::collections::hash_map::Entry;
        if count == 0 {
            return;
        }
        self.len += count;
        if let Ok(narrow) = u32::try_from(value)
            && (self.wide.is_empty() || !self.wide.contains_key(&value))
        {
            match self.narrow.entry(narrow) {
                Entry::Occupied(mut held) => {
                    let sum = u64::from(*held.get()) + count;
                    match u32::try_from(sum) {
                        Ok(sum) => *held.get_mut() = sum,
                        Err(_) => {
                            held.remove();
                            self.wide.insert(value, sum);
                        }
                    }
                }
                Entry::Vacant(slot) => match u32::try_from(count) {
                    Ok(count) => {
                        slot.insert(count);
                    }
                    Err(_) => {
                        self.wide.insert(value, count);
                    }
                },
            }
            return;
        }
        *self.wide.entry(value).or_insert(0) += count;
    }

    /// Adds every value `other` holds. Into an empty one that is a copy of `other`'s tables,
    /// not a probe per distinct value: the run's pooled gaps (a distinct value per step, a
    /// million or more) are merged that way into the summary's.
    pub fn merge(&mut self, other: &IntegerCounts) {
        if self.is_empty() {
            self.clone_from(other);
            return;
        }
        for (&v, &c) in &other.narrow {
            self.add(u64::from(v), u64::from(c));
        }
        for (&v, &c) in &other.wide {
            self.add(v, c);
        }
        for log in &other.logs {
            self.add_log(log.clone());
        }
    }

    /// Adds every value `other` holds, taking its logs as they are (into an empty one, it
    /// becomes `other`): no copy of the run's pooled gaps on their way to the summary.
    pub fn merge_owned(&mut self, other: IntegerCounts) {
        if self.is_empty() {
            *self = other;
            return;
        }
        for (&v, &c) in &other.narrow {
            self.add(u64::from(v), u64::from(c));
        }
        for (&v, &c) in &other.wide {
            self.add(v, c);
        }
        for log in other.logs {
            self.add_log(log);
        }
    }

    /// Adds every value `log` holds, keeping the log as it is: no probe per value, and no
    /// sort until [`IntegerCounts::sorted`] is asked for.
    pub fn add_log(&mut self, log: CountLog) {
        if !log.is_empty() {
            self.len += log.len();
            self.logs.push(log);
        }
    }

    /// Each `(value, count)` entry it holds, in no order, to `sink`; a value may come in
    /// several entries.
    fn each_entry(&self, sink: &mut impl ranks::EntrySink) {
        for (&v, &c) in &self.narrow {
            sink.take(u64::from(v), u64::from(c));
        }
        for (&v, &c) in &self.wide {
            sink.take(v, c);
        }
        for log in &self.logs {
            log.each_packed(|entries| sink.take_packed(entries));
            log.wide_entries().for_each(|(v, c)| sink.take(v, c));
        }
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
        let narrow = self
            .narrow
            .iter()
            .map(|(&v, &c)| (u64::from(v), u64::from(c)));
        let wide = self.wide.iter().map(|(&v, &c)| (v, c));
        let mut distinct: Vec<(u64, u64)> = narrow.chain(wide).collect();
        distinct.sort_unstable();
        let log = match &self.logs[..] {
            [] => return distinct,
            [log] => log.sorted(),
            logs => {
                let mut all = CountLog::plain();
                logs.iter().for_each(|log| all.merge(log));
                all.sorted()
            }
        };
        if distinct.is_empty() {
            return log;
        }
        // The maps' values and the logs', both sorted: merged, equal values added.
        distinct.extend(log);
        sort_adding_equal(&mut distinct);
        distinct
    }
}

/// Sorts `(value, count)` pairs by value (a stable sort: runs already sorted cost about a
/// pass each) and adds up the counts of equal values.
pub fn sort_adding_equal(pairs: &mut Vec<(u64, u64)>) {
    pairs.sort_by_key(|&(v, _)| v);
    pairs.dedup_by(|next, kept| {
        let same = next.0 == kept.0;
        if same {
            kept.1 += next.1;
        }
        same
    });
}

/// Where numpy's linear `q`-th percentile (0–100) of `len` values lies: the index of its
/// lower order statistic, and the fraction of the way to the next.
fn percentile_position(len: usize, q: f64) -> (usize, f64) {
    let last = len.saturating_sub(1);
    let index = (q / 100.0) * last as f64;
    let below = (index.floor() as usize).min(last);
    (below, index - below as f64)
}

/// Count, exact sum and sum of squares, and range of integers, from one pass.
pub struct Moments {
    count: u128,
    sum: u128,
    /// `None` once the sum of squares overflows.
    sum_of_squares: Option<u128>,
    /// The smallest value (`u64::MAX` of none).
    pub min: u64,
    /// The largest value (0 of none).
    pub max: u64,
}

impl Moments {
    /// The moments of `values`.
    pub fn of(values: &[u64]) -> Moments {
        let (mut sum, mut squares, mut overflowed) = (0u128, 0u128, false);
        let (mut min, mut max) = (u64::MAX, 0);
        for &v in values {
            let v128 = u128::from(v);
            sum += v128;
            let (next, carry) = squares.overflowing_add(v128 * v128);
            squares = next;
            overflowed |= carry;
            min = min.min(v);
            max = max.max(v);
        }
        Moments {
            count: values.len() as u128,
            sum,
            sum_of_squares: (!overflowed).then_some(squares),
            min,
            max,
        }
    }

    /// The population variance, `(n·Σx² − (Σx)²) / n²`, computed exactly and rounded once;
    /// `None` when the integers involved overflow.
    pub fn variance(&self) -> Option<f64> {
        let scaled = self.count.checked_mul(self.sum_of_squares?)?;
        let deviation = scaled.checked_sub(self.sum.checked_mul(self.sum)?)?;
        let n = self.count as f64;
        Some(deviation as f64 / (n * n))
    }
}

/// Digits of a radix-selection pass: each pass counts values in 2^16 buckets of their offset
/// from the minimum, so two passes resolve any range below 2^32.
const RADIX_BITS: u32 = 16;

/// Below this many values, selection sorts a copy instead of counting.
const SORT_BELOW: usize = 4096;

/// Marks a bucket no rank falls in.
const UNWANTED: u8 = u8::MAX;

/// Writes into `out[i]` the `ranks[i]`-th smallest (0-based) of `values`, all of which lie
/// in `min..=max`. `ranks` is ascending, without repeats, each below `values.len()`, and
/// there are fewer than [`UNWANTED`] of them.
///
/// One pass counts the values per bucket of their offset from `min`. When a bucket is wider
/// than one value, a second pass counts the values of the buckets holding the ranks by their
/// offset within the bucket, which resolves them when the range is below 2^32; beyond, those
/// buckets' values are gathered and resolved the same way, recursively.
pub fn order_statistics(values: &[u64], min: u64, max: u64, ranks: &[usize], out: &mut [u64]) {
    let range = max - min;
    if range == 0 {
        out.fill(min);
        return;
    }
    if values.len() < SORT_BELOW {
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        for (slot, &rank) in out.iter_mut().zip(ranks) {
            *slot = sorted[rank];
        }
        return;
    }
    let shift = (u64::BITS - range.leading_zeros()).saturating_sub(RADIX_BITS);
    let bucket_of = |v: u64| ((v - min) >> shift) as usize;
    let mut counts = vec![0usize; bucket_of(max) + 1];
    for &v in values {
        counts[bucket_of(v)] += 1;
    }
    // Each rank's bucket and its rank among that bucket's values.
    let targets = locate(&counts, ranks);
    if shift == 0 {
        // A bucket is a single value.
        for (slot, &(bucket, _)) in out.iter_mut().zip(&targets) {
            *slot = min + bucket as u64;
        }
        return;
    }
    let mut wanted: Vec<usize> = targets.iter().map(|&(bucket, _)| bucket).collect();
    wanted.dedup();
    let mut slot_of = vec![UNWANTED; counts.len()];
    for (slot, &bucket) in wanted.iter().enumerate() {
        slot_of[bucket] = slot as u8;
    }
    let bucket_low = |bucket: usize| min + ((bucket as u64) << shift);
    if shift <= RADIX_BITS {
        let width = 1usize << shift;
        let mut within = vec![0usize; wanted.len() * width];
        for &v in values {
            let slot = slot_of[bucket_of(v)];
            if slot != UNWANTED {
                within[usize::from(slot) * width + ((v - min) as usize & (width - 1))] += 1;
            }
        }
        for (out, &(bucket, rank)) in out.iter_mut().zip(&targets) {
            let slot = usize::from(slot_of[bucket]);
            let (offset, _) = locate(&within[slot * width..(slot + 1) * width], &[rank])[0];
            *out = bucket_low(bucket) + offset as u64;
        }
        return;
    }
    let mut gathered: Vec<Vec<u64>> = wanted
        .iter()
        .map(|&bucket| Vec::with_capacity(counts[bucket]))
        .collect();
    for &v in values {
        let slot = slot_of[bucket_of(v)];
        if slot != UNWANTED {
            gathered[usize::from(slot)].push(v);
        }
    }
    let mut done = 0;
    for (&bucket, members) in wanted.iter().zip(&gathered) {
        let count = targets[done..]
            .iter()
            .take_while(|&&(b, _)| b == bucket)
            .count();
        let inner: Vec<usize> = targets[done..done + count]
            .iter()
            .map(|&(_, rank)| rank)
            .collect();
        let low = bucket_low(bucket);
        let high = (low + ((1 << shift) - 1)).min(max);
        order_statistics(members, low, high, &inner, &mut out[done..done + count]);
        done += count;
    }
}

/// For each of the ascending `ranks`, the bucket of `counts` holding that order statistic
/// and its rank among the bucket's values.
fn locate<N>(counts: &[N], ranks: &[N]) -> Vec<(usize, N)>
where
    N: Copy + Default + PartialOrd + std::ops::Add<Output = N> + std::ops::Sub<Output = N>,
{
    let mut found = Vec::with_capacity(ranks.len());
    let mut pending = ranks.iter().peekable();
    let mut before = N::default();
    for (bucket, &count) in counts.iter().enumerate() {
        while let Some(&rank) = pending.next_if(|&&rank| rank < before + count) {
            found.push((bucket, rank - before));
        }
        if pending.peek().is_none() {
            break;
        }
        before = before + count;
    }
    found
}

/// numpy's two-sided linear interpolation between order statistics `a` and `b` at fraction
/// `t`, exact to the last bit.
fn lerp(a: f64, b: f64, t: f64) -> f64 {
    let diff = b - a;
    if t >= 0.5 {
        b - diff * (1.0 - t)
    } else {
        a + diff * t
    }
}

/// The arithmetic mean of `values` read through `to_f64`, summed in order (Python's
/// `sum(xs) / len(xs)`); NaN for an empty slice.
pub fn mean<T: Copy>(values: &[T], to_f64: impl Fn(T) -> f64) -> f64 {
    values.iter().map(|&v| to_f64(v)).sum::<f64>() / values.len() as f64
}

/// The `q`-th percentile (0–100) of `values`, numpy's default `linear` method: linear
/// interpolation between the order statistics around index `q/100 · (n − 1)`, with numpy's
/// two-sided lerp so results match `np.percentile` to the last bit. 0 for an empty slice.
/// Reorders `values` (selection in O(n)).
pub fn percentile<T: Copy>(
    values: &mut [T],
    q: f64,
    cmp: impl Fn(&T, &T) -> Ordering,
    to_f64: impl Fn(T) -> f64,
) -> f64 {
    percentile_above(values, 0, q, &cmp, &to_f64).0
}

/// [`percentile`] when `values[..start]` are already the `start` smallest values (in any
/// order): only `values[start..]` is searched, so `q` must not fall below index `start`.
/// Returns the percentile and the index of its lower order statistic, below which the values
/// are then the smallest ones.
fn percentile_above<T: Copy>(
    values: &mut [T],
    start: usize,
    q: f64,
    cmp: &impl Fn(&T, &T) -> Ordering,
    to_f64: &impl Fn(T) -> f64,
) -> (f64, usize) {
    if values.is_empty() {
        return (0.0, 0);
    }
    let (below, t) = percentile_position(values.len(), q);
    debug_assert!(below >= start, "percentile below the searched range");
    let (_, &mut lo, higher) = values[start..].select_nth_unstable_by(below - start, cmp);
    let hi = higher.iter().copied().min_by(cmp).unwrap_or(lo);
    (lerp(to_f64(lo), to_f64(hi), t), below)
}
