//! Inter-token latencies pooled by step instead of by token: a request that produced a token
//! in each of steps `a..=b` of its instance has the gaps between those steps' finish times,
//! so the pool of every finished request's gaps is, per step gap, the number of requests
//! whose runs cover it. Each finished request adds its runs to a difference array (two
//! entries a run, whatever its length) and the gaps are counted once at the end, per step:
//! the cost grows with steps and requests, not with generated tokens. Gaps that are not
//! between consecutive steps (a request's first gap after a preemption or a hand-off, a
//! pipelined request's stride) are counted one by one.
//!
//! Neither grows with the run: once no request still to finish can name the steps before
//! some step (its token runs all start later), the gaps ending there are counted and those
//! steps' finish times let go ([`ItlTally::retire`]), so an instance holds the steps of its
//! oldest live request onwards, not every step of the run.

use super::request::RunningRequest;
use crate::Nanos;
use crate::metrics::{CountLog, IntegerCounts};

/// Fewest steps held before [`StepTimes::due`] asks for a retirement (a handful in unit
/// tests, so that their runs retire steps often).
const RETIRE_AFTER_STEPS: usize = if cfg!(test) { 4 } else { 4096 };

/// The finish times of an instance's completed steps, by step number (0 for the first
/// completed), from the oldest one a live request's token runs may still name.
#[derive(Debug, Default)]
pub(super) struct StepTimes {
    /// The step number of `times[0]`.
    first: u64,
    times: Vec<Nanos>,
    /// How many steps held make the next retirement due.
    next_retire: usize,
}

impl StepTimes {
    /// Steps completed so far: the number the next one gets.
    pub fn count(&self) -> u64 {
        self.first + self.times.len() as u64
    }

    /// Records the next step's finish time.
    pub fn push(&mut self, finish: Nanos) {
        self.times.push(finish);
    }

    /// The finish time of step `step`, which is held.
    pub fn at(&self, step: u64) -> Nanos {
        self.times[(step - self.first) as usize]
    }

    /// Whether enough steps are held that looking for ones to let go pays: at least
    /// [`RETIRE_AFTER_STEPS`], twice those held after the last retirement, and `requests`
    /// (the scheduler's request slots, which a retirement visits), so that retiring costs a
    /// bounded amount per step.
    pub fn due(&self, requests: usize) -> bool {
        self.times.len() >= self.next_retire.max(RETIRE_AFTER_STEPS).max(requests)
    }

    /// Lets go of the steps before `step` (at most [`StepTimes::count`]).
    fn forget_before(&mut self, step: u64) {
        let k = (step.saturating_sub(self.first) as usize).min(self.times.len());
        self.times.drain(..k);
        self.first += k as u64;
        self.next_retire = 2 * self.times.len();
    }
}

/// The inter-token gaps of the requests an instance finished, pooled.
#[derive(Debug, Default)]
pub(super) struct ItlTally {
    /// The step number of `cover[0]`.
    first: u64,
    /// Pooled so far: the sum of the entries counted and let go.
    covered: i64,
    /// `covered` plus `cover[k]` summed over `k ≤ j - first`: how many finished requests
    /// have the gap between steps `j - 1` and `j` (`j ≥ 1`).
    cover: Vec<i64>,
    /// Gaps counted: those of retired steps, and those counted one by one. A log, not a
    /// map: nearly every step's gap is a value of its own, so a probe per step would miss.
    counted: CountLog,
}

impl ItlTally {
    /// Adds the gaps of `req`, which finished; `steps` are the finish times of its
    /// instance's steps, which its token runs index.
    pub fn add(&mut self, req: &RunningRequest, steps: &StepTimes) {
        let mut previous = req.itl_from_ns;
        let current = (req.token_run.len > 0).then_some(req.token_run);
        for run in req.earlier_runs.iter().copied().chain(current) {
            let first = run.start;
            if let Some(p) = previous {
                self.counted.add(steps.at(first) - p, 1);
            }
            let len = u64::from(run.len);
            let stride = u64::from(run.stride);
            if len >= 2 && stride == 1 {
                self.cover_steps(first + 1, first + len);
            } else {
                for j in 1..len {
                    let k = first + j * stride;
                    self.counted.add(steps.at(k) - steps.at(k - stride), 1);
                }
            }
            previous = Some(steps.at(first + (len - 1) * stride));
        }
    }

    /// Counts the gaps ending at steps `from..to` once more.
    fn cover_steps(&mut self, from: u64, to: u64) {
        let (from, to) = ((from - self.first) as usize, (to - self.first) as usize);
        if self.cover.len() <= to {
            self.cover.resize(to + 1, 0);
        }
        self.cover[from] += 1;
        self.cover[to] -= 1;
    }

    /// Counts the gaps ending at steps up to `floor` and lets go of them and of the finish
    /// times of the steps before `floor`. No request still to be added may have a token run
    /// starting before `floor`, which is at most `steps.count()`.
    pub fn retire(&mut self, floor: u64, steps: &mut StepTimes) {
        let upto = (floor + 1).saturating_sub(self.first) as usize;
        let upto = upto.min(self.cover.len());
        for (k, d) in self.cover.drain(..upto).enumerate() {
            self.covered += d;
            if self.covered > 0 {
                let j = self.first + k as u64;
                self.counted
                    .add(steps.at(j) - steps.at(j - 1), self.covered as u64);
            }
        }
        self.first = self.first.max(floor + 1);
        steps.forget_before(floor);
    }

    /// Adds every pooled gap to `out`.
    pub fn count_into(&self, steps: &StepTimes, out: &mut IntegerCounts) {
        let mut rest = CountLog::default();
        let mut covered = self.covered;
        for (k, d) in self.cover.iter().enumerate() {
            covered += d;
            if covered > 0 {
                let j = self.first + k as u64;
                rest.add(steps.at(j) - steps.at(j - 1), covered as u64);
            }
        }
        out.merge_log(&self.counted);
        out.merge_log(&rest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::SchedulerConfig;
    use crate::workload::Request;

    fn request(id: u64) -> RunningRequest {
        let config = SchedulerConfig {
            max_num_seqs: None,
            max_num_batched_tokens: 512,
            long_prefill_token_threshold: 0,
            enable_chunked_prefill: true,
            reserve_full_isl: false,
            enable_prefix_caching: false,
            block_size: 16,
            async_scheduling: false,
        };
        let request = Request {
            id,
            line: 1,
            model: None,
            arrival_ns: 0,
            input_toks: 1,
            output_toks: 1,
            token_ids: Vec::new(),
            prompt_blocks: None,
        };
        RunningRequest::new(&request, &config)
    }

    /// Pools the gaps of requests that produce tokens in `tokens` (each its steps, rising)
    /// over 300 steps finishing at k² + k ns; with `retire`, retires after every step.
    fn pool(tokens: &[Vec<u64>], retire: bool) -> (IntegerCounts, usize) {
        let mut reqs: Vec<RunningRequest> = (0..tokens.len() as u64).map(request).collect();
        let (mut steps, mut tally) = (StepTimes::default(), ItlTally::default());
        let mut most_held = 0;
        for k in 0..300u64 {
            steps.push(k * k + k);
            for (req, steps_of) in reqs.iter_mut().zip(tokens) {
                if steps_of.contains(&k) {
                    req.note_token(k);
                }
                if steps_of.last() == Some(&k) {
                    tally.add(req, &steps);
                }
            }
            if retire {
                let live = reqs.iter().zip(tokens).filter(|(_, t)| t.last() > Some(&k));
                let starts = live.filter_map(|(r, _)| r.first_token_step());
                tally.retire(starts.fold(steps.count(), u64::min), &mut steps);
            }
            most_held = most_held.max(steps.times.len());
        }
        let mut out = IntegerCounts::default();
        tally.count_into(&steps, &mut out);
        (out, most_held)
    }

    #[test]
    fn retiring_steps_pools_the_same_gaps_and_holds_only_live_steps() {
        let tokens = vec![
            (2..50).collect(),
            (10..120).collect(),
            // Stride 2, then a break (a preemption), then consecutive steps.
            (130..160).step_by(2).chain(170..200).collect(),
            vec![205],
            (210..299).collect(),
            (40..45).chain(100..101).collect(),
        ];
        let (kept, all_held) = pool(&tokens, false);
        let (retired, most_held) = pool(&tokens, true);
        assert_eq!(retired, kept);
        assert!(kept.len() > 250);
        assert_eq!(all_held, 300);
        // The longest live span: steps 10..120 (the request from 10 is live until 119).
        assert!(most_held <= 111, "{most_held} steps held");
    }
}
