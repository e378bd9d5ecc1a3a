//! Inter-token latencies pooled by step instead of by token: a request that produced a token
//! in each of steps `a..=b` of its instance has the gaps between those steps' finish times,
//! so the pool of every finished request's gaps is, per step gap, the number of requests
//! whose runs cover it. Each finished request adds its runs to a difference array (two
//! entries a run, whatever its length) and the gaps are counted once at the end, per step:
//! the cost grows with steps and requests, not with generated tokens. Gaps that are not
//! between consecutive steps (a request's first gap after a preemption or a hand-off, a
//! pipelined request's stride) are counted one by one.

use super::request::RunningRequest;
use crate::Nanos;
use crate::metrics::IntegerCounts;

/// The inter-token gaps of the requests an instance finished, pooled.
#[derive(Debug, Default)]
pub(super) struct ItlTally {
    /// `cover[k]` summed over `k ≤ j`: how many finished requests have the gap between steps
    /// `j - 1` and `j` (`j ≥ 1`).
    cover: Vec<i64>,
    /// Gaps counted one by one.
    other: IntegerCounts,
}

impl ItlTally {
    /// Adds the gaps of `req`, which finished; `steps` are the finish times of its
    /// instance's steps, which its token runs index.
    pub fn add(&mut self, req: &RunningRequest, steps: &[Nanos]) {
        let mut previous = req.itl_from_ns;
        let current = (req.token_run.len > 0).then_some(req.token_run);
        for run in req.earlier_runs.iter().copied().chain(current) {
            let first = run.start as usize;
            if let Some(p) = previous {
                self.other.add(steps[first] - p, 1);
            }
            let len = run.len as usize;
            let stride = run.stride as usize;
            if len >= 2 && stride == 1 {
                self.cover_steps(first + 1, first + len);
            } else {
                for j in 1..len {
                    let k = first + j * stride;
                    self.other.add(steps[k] - steps[k - stride], 1);
                }
            }
            previous = Some(steps[first + (len - 1) * stride]);
        }
    }

    /// Counts the gaps ending at steps `from..to` once more.
    fn cover_steps(&mut self, from: usize, to: usize) {
        if self.cover.len() <= to {
            self.cover.resize(to + 1, 0);
        }
        self.cover[from] += 1;
        self.cover[to] -= 1;
    }

    /// Adds every pooled gap to `out`.
    pub fn count_into(&self, steps: &[Nanos], out: &mut IntegerCounts) {
        out.merge(&self.other);
        let mut covered = 0i64;
        for (j, d) in self.cover.iter().enumerate() {
            covered += d;
            if covered > 0 {
                out.add(steps[j] - steps[j - 1], covered as u64);
            }
        }
    }
}
