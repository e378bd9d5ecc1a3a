//! Whether arrivals outran what the deployment serves: the waits of the requests arriving
//! late in the run against those arriving early.
//!
//! A deployment that serves `μ` requests per second offered `λ > μ` builds a backlog that
//! grows by `λ − μ` a second, so a request arriving at `t` waits about `(λ/μ − 1)·t`: its
//! time to first token grows in step with its arrival time. The check splits the span of
//! the arrivals into four equal quarters and takes the median TTFT of the requests arriving
//! in each. The run is overloaded when the medians rise from each quarter to the next, the
//! rise is spread over the run (the third quarter has at least a third of it, where steady
//! growth has two thirds: a burst in the last quarter alone is not enough), and the last
//! quarter's median exceeds the first's by at least [`MIN_GROWTH_S`] and by at least
//! [`MIN_GROWTH_PER_S`] of the time between them (arrivals about 5% beyond what is served).
//! A burst that the deployment drains before the run ends leaves the later quarters' waits
//! low, so it does not count.

use super::render::line_2dp;
use crate::Nanos;
use serde_json::{Value, json};
use std::fmt;

/// Fewest requests arriving in each quarter for a verdict.
pub const MIN_PER_QUARTER: usize = 5;
/// Smallest rise of the median TTFT, last quarter over first, that counts, seconds: below
/// it the rise is within what batching alone makes of a wait.
pub const MIN_GROWTH_S: f64 = 1.0;
/// Smallest rise of the median TTFT per second of arrival time between the first and last
/// quarters' mean arrivals: `λ/μ − 1` in steady overload, so 0.05 is arrivals 5% beyond
/// what the deployment serves.
pub const MIN_GROWTH_PER_S: f64 = 0.05;

/// The load check of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadCheck {
    /// Completed requests per second over their arrival span.
    pub offered_rps: f64,
    /// Completed requests per second from the first arrival to the last completion.
    pub served_rps: f64,
    /// Median TTFT of the requests arriving in each quarter of the arrival span, s; `None`
    /// when a quarter has fewer than [`MIN_PER_QUARTER`] requests.
    pub quarter_ttft_s: Option<[f64; 4]>,
    /// Rise of the median TTFT per second of arrival time, first quarter to last.
    pub growth_per_s: Option<f64>,
    /// Whether arrivals outran the deployment.
    pub overloaded: bool,
    /// Instances of the run (for the capacity suggestion).
    instances: usize,
    /// Tensor-parallel degree of the first instance.
    tp: u32,
}

impl LoadCheck {
    /// Checks the completed requests' `(arrival, TTFT)` pairs of a run of `instances`
    /// instances (the first of TP `tp`) that ended at `end_ns`.
    pub fn measure(
        requests: &mut [(Nanos, Nanos)],
        end_ns: Nanos,
        instances: usize,
        tp: u32,
    ) -> LoadCheck {
        // By arrival alone: pairs of one arrival may come in any order, since a quarter's
        // median reads its TTFTs as a set and its centre sums equal arrivals alike.
        sort_by_arrival(requests);
        let (first, last) = match (requests.first(), requests.last()) {
            (Some(f), Some(l)) => (f.0, l.0),
            _ => (0, 0),
        };
        let span_s = (last - first) as f64 / 1e9;
        let n = requests.len() as f64;
        let offered_rps = if span_s > 0.0 {
            (n - 1.0) / span_s
        } else {
            0.0
        };
        let busy_s = end_ns.saturating_sub(first) as f64 / 1e9;
        let served_rps = if busy_s > 0.0 { n / busy_s } else { 0.0 };
        let quarters = (span_s > 0.0)
            .then(|| quarter_medians(requests, first, last))
            .flatten();
        let growth_per_s = quarters.map(|(medians, centres)| {
            (medians[3] - medians[0]) / (centres[3] - centres[0]).max(f64::MIN_POSITIVE)
        });
        let quarter_ttft_s = quarters.map(|(medians, _)| medians);
        let overloaded = match (quarter_ttft_s, growth_per_s) {
            (Some(m), Some(g)) => growing_throughout(&m) && g >= MIN_GROWTH_PER_S,
            _ => false,
        };
        LoadCheck {
            offered_rps,
            served_rps,
            quarter_ttft_s,
            growth_per_s,
            overloaded,
            instances,
            tp,
        }
    }

    /// The `overload` object of the summary JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "detected": self.overloaded,
            "offered_request_rate": self.offered_rps,
            "served_request_rate": self.served_rps,
            "median_ttft_s_by_arrival_quarter": self.quarter_ttft_s,
            "ttft_growth_per_s": self.growth_per_s,
        })
    }
}

/// Below this many pairs, [`sort_by_arrival`] compares instead of counting.
const COUNT_SORT_ABOVE: usize = 1024;

/// Sorts `(arrival, TTFT)` pairs by arrival (pairs of one arrival in any order) in two
/// passes: the pairs are counted into buckets of arrival offsets from the earliest, the
/// buckets a power of two of nanoseconds wide and at most as many as the pairs, then placed
/// by bucket, and each bucket of more than one pair sorted by comparison. The completions of
/// a run come in nearly the order of their arrivals, spread over the run, so that most
/// buckets hold a pair or none: a comparison sort of all 100,000 pairs at the end of a run
/// cost about 1% of the run, and a radix sort of them (four passes) more than half of that.
/// Arrivals crowded into few buckets cost a comparison sort of each bucket.
pub fn sort_by_arrival(pairs: &mut [(Nanos, Nanos)]) {
    if pairs.len() <= COUNT_SORT_ABOVE {
        pairs.sort_unstable_by_key(|r| r.0);
        return;
    }
    let (lo, hi) = pairs
        .iter()
        .fold((Nanos::MAX, 0), |(lo, hi), r| (lo.min(r.0), hi.max(r.0)));
    // The fewest bits dropped that leave at most `pairs.len()` buckets.
    let span_bits = Nanos::BITS - (hi - lo).leading_zeros();
    let shift = span_bits.saturating_sub(pairs.len().ilog2());
    let bucket = |r: &(Nanos, Nanos)| ((r.0 - lo) >> shift) as usize;
    let mut starts = vec![0usize; bucket(&(hi, 0)) + 2];
    for r in pairs.iter() {
        starts[bucket(r) + 1] += 1;
    }
    for b in 1..starts.len() {
        starts[b] += starts[b - 1];
    }
    let mut placed = vec![(0, 0); pairs.len()];
    let mut next = starts.clone();
    for r in pairs.iter() {
        let b = bucket(r);
        placed[next[b]] = *r;
        next[b] += 1;
    }
    for ends in starts.windows(2) {
        if ends[1] - ends[0] > 1 {
            placed[ends[0]..ends[1]].sort_unstable_by_key(|r| r.0);
        }
    }
    pairs.copy_from_slice(&placed);
}

/// Whether the medians rise quarter after quarter, by enough and spread over the run.
fn growing_throughout(m: &[f64; 4]) -> bool {
    let rise = m[3] - m[0];
    m.windows(2).all(|w| w[1] > w[0]) && rise >= MIN_GROWTH_S && m[2] - m[0] >= rise / 3.0
}

/// The median TTFT (s) and mean arrival time (s) of the requests, sorted by arrival, in each
/// quarter of `[first, last]`; `None` when a quarter has too few.
fn quarter_medians(
    sorted: &[(Nanos, Nanos)],
    first: Nanos,
    last: Nanos,
) -> Option<([f64; 4], [f64; 4])> {
    // Quarter `q` starts at the least offset `t` with `4 t / span >= q`: `ceil(q span / 4)`,
    // so a pair's quarter is the number of those starts it has reached (no division a pair).
    let span = u128::from(last - first);
    let starts = [1u128, 2, 3].map(|q| (q * span).div_ceil(4) as Nanos);
    let quarter_of = |t: Nanos| starts.iter().filter(|&&s| t - first >= s).count();
    let mut medians = [0.0; 4];
    let mut centres = [0.0; 4];
    let mut start = 0;
    for q in 0..4 {
        let len = sorted[start..]
            .iter()
            .take_while(|r| quarter_of(r.0) == q)
            .count();
        if len < MIN_PER_QUARTER {
            return None;
        }
        let part = &sorted[start..start + len];
        let mut ttfts: Vec<Nanos> = part.iter().map(|r| r.1).collect();
        // The middle of the sorted TTFTs, found without sorting them.
        medians[q] = *ttfts.select_nth_unstable(len / 2).1 as f64 / 1e9;
        centres[q] = part.iter().map(|r| (r.0 - first) as f64 / 1e9).sum::<f64>() / len as f64;
        start += len;
    }
    Some((medians, centres))
}

impl LoadCheck {
    /// The warning at the end of the console summary, when overloaded; `autoscaled` when the
    /// run already had autoscaling on.
    pub fn fmt_warning(&self, f: &mut fmt::Formatter<'_>, autoscaled: bool) -> fmt::Result {
        let (Some(m), true) = (self.quarter_ttft_s, self.overloaded) else {
            return Ok(());
        };
        writeln!(f, "{:=^50}", " Warning: overloaded ")?;
        writeln!(
            f,
            "Arrivals outran what this deployment serves: the wait for a first"
        )?;
        writeln!(
            f,
            "token grew all through the run, so its latencies measure the backlog."
        )?;
        line_2dp(f, "Offered (req/s):", self.offered_rps)?;
        line_2dp(f, "Served (req/s):", self.served_rps)?;
        line_2dp(f, "Median TTFT, first quarter (s):", m[0])?;
        line_2dp(f, "Median TTFT, last quarter (s):", m[3])?;
        let factor = self.offered_rps / self.served_rps.max(f64::MIN_POSITIVE);
        let replicas = (factor * self.instances as f64)
            .ceil()
            .max(self.instances as f64 + 1.0);
        writeln!(
            f,
            "To serve it, add capacity (offered / served: {factor:.1}x):"
        )?;
        if autoscaled {
            writeln!(
                f,
                "  more replicas: a higher --autoscale-max (at least {replicas:.0} in all)"
            )?;
        } else {
            writeln!(
                f,
                "  replicas: --autoscale queue-depth --autoscale-max {replicas:.0}, or a --cluster-config with {replicas:.0} instances"
            )?;
        }
        writeln!(
            f,
            "  more GPUs per instance: --tp {} or more",
            self.tp.saturating_mul(2)
        )?;
        writeln!(f, "  a faster GPU: --hardware (bundled names in --help)")?;
        writeln!(
            f,
            "  or offer less: --arrival-speedup below {:.2}",
            1.0 / factor
        )?;
        writeln!(
            f,
            "`blis-cosim sweep` finds the cheapest that meets a latency target."
        )?;
        writeln!(f, "{}", "=".repeat(50))
    }
}
