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
//!
//! A finished request's record lists its gaps the same way, as its token runs over these
//! step times ([`crate::metrics::Itl::Steps`]), built per run and read where an output asks
//! for them (the CSV writer formats each step's gap once, see `metrics/csv_out/step_texts.rs`);
//! the steps that records not read yet name are kept until they are.

use std::rc::Rc;

use super::request::RunningRequest;
use crate::Nanos;
use crate::metrics::{CountLog, IntegerCounts, StepWindow};
use crate::workload::RequestClasses;

/// Fewest steps held before [`StepTimes::due`] asks for a retirement, unless set otherwise
/// ([`StepTimes::retire_after`]; tests set a handful, so that their runs retire steps often).
/// Small enough that an instance of a wide cluster, which completes a few thousand steps in
/// a run, lets steps go during it: at 100K requests over 256 instances, 1,024 peaks at
/// 50.6 MiB against 52.9 MiB at 4,096 (63.3 against 76.3 MiB writing the CSV) at the same
/// CPU time; 512 peaked at 49.0 MiB but took 3-5 % more CPU time. The doubling in `due`
/// keeps retiring O(1) amortised per step whatever it is.
const RETIRE_AFTER_STEPS: u32 = 1024;

/// Fewest steps completed between two looks for the oldest step a record may still name
/// ([`StepTimes::note_floor`]), unless the instance holds more request slots (a look visits
/// them all). The steps before it stay held until the next retirement, but records are read
/// from it on ([`StepTimes::window`]), so that the CSV writer, which holds what records read,
/// lets go of them at once. At 100K requests on 256 instances writing the CSV the run's peak
/// fell from 57.2 to 53.3 MiB (the writer held up to about 2,000 steps an instance); the
/// looks, about 2,850 of some 60 slots each, are 0.17 M simulated cache misses. Off when
/// records list no gaps (no CSV): nobody reads the steps then.
const FLOOR_EVERY_STEPS: usize = 256;

/// The finish times of an instance's completed steps, by step number (0 for the first
/// completed), from the oldest one a live request's token runs may still name.
#[derive(Debug)]
pub struct StepTimes {
    /// The step number of `times[0]`.
    first: u64,
    times: Vec<Nanos>,
    /// Where in `times` the oldest step a record read from now on may name is. The counts
    /// here are `u32` (saturating), so that the struct keeps to the 48 bytes it took among
    /// the scheduler's fields every step reads (see `Scheduler`).
    named: u32,
    /// How many steps held make the next look for it due.
    next_floor: u32,
    /// How many steps held make the next retirement due.
    next_retire: u32,
    /// Fewest steps held before a retirement is due.
    retire_after: u32,
}

// Among the scheduler's step fields: a field more there costs every instance a cache line.
const _: () = assert!(size_of::<StepTimes>() == 48);

/// `n`, or `u32::MAX` when it does not fit.
fn saturated(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl Default for StepTimes {
    fn default() -> StepTimes {
        StepTimes {
            first: 0,
            times: Vec::new(),
            named: 0,
            next_floor: 0,
            next_retire: 0,
            retire_after: RETIRE_AFTER_STEPS,
        }
    }
}

impl StepTimes {
    /// Makes a retirement due from `steps` steps held on (at least 1; [`RETIRE_AFTER_STEPS`]
    /// unless set): the pool is the same whatever it is, only the memory held changes.
    pub fn retire_after(&mut self, steps: usize) {
        self.retire_after = saturated(steps.max(1));
    }

    /// Steps completed so far: the number the next one gets.
    pub fn count(&self) -> u64 {
        self.first + self.times.len() as u64
    }

    /// How many steps' finish times are held.
    pub fn held(&self) -> usize {
        self.times.len()
    }

    /// Records the next step's finish time.
    pub fn push(&mut self, finish: Nanos) {
        self.times.push(finish);
    }

    /// The steps records may name, for them to read: those from the last floor noted on
    /// ([`StepTimes::note_floor`]).
    pub fn window(&self) -> StepWindow<'_> {
        let k = (self.named as usize).min(self.times.len());
        StepWindow {
            first: self.first + k as u64,
            times: &self.times[k..],
        }
    }

    /// The finish time of step `step`, which is held.
    pub fn at(&self, step: u64) -> Nanos {
        self.times[(step - self.first) as usize]
    }

    /// Whether a look for the oldest step named is due: [`FLOOR_EVERY_STEPS`] and `requests`
    /// (the scheduler's request slots, which a look visits) completed since the last one, or
    /// a retirement due ([`StepTimes::note_floor`]); either costs a bounded amount per step.
    pub fn due(&self, requests: usize) -> bool {
        self.times.len() >= self.next_floor as usize || self.retiring(requests)
    }

    /// Whether enough steps are held that letting go of those before the floor pays: at
    /// least [`StepTimes::retire_after`], twice those held after the last retirement, and
    /// `requests`.
    fn retiring(&self, requests: usize) -> bool {
        let after = self.next_retire.max(self.retire_after) as usize;
        self.times.len() >= after.max(requests)
    }

    /// Notes `floor` (at most [`StepTimes::count`]): no record read from now on names a step
    /// before it. Returns whether the steps before it are to be let go now
    /// ([`ItlTally::retire`]); until then they are held but no longer read. Unless records
    /// `list` their gaps (else nobody reads the steps), the next look waits for a retirement.
    pub fn note_floor(&mut self, floor: u64, requests: usize, list: bool) -> bool {
        self.named = saturated(floor.saturating_sub(self.first) as usize);
        self.next_floor = match list {
            true => saturated(self.times.len() + FLOOR_EVERY_STEPS.max(requests)),
            false => u32::MAX,
        };
        self.retiring(requests)
    }

    /// Warms the finish time of step `step` (a hint, see `warm.rs`).
    #[inline(always)]
    fn warm(&self, step: u64) {
        let at = step.saturating_sub(self.first) as usize;
        super::warm::line(self.times.as_ptr().wrapping_add(at));
    }

    /// Lets go of the steps before `step` (at most [`StepTimes::count`]).
    fn forget_before(&mut self, step: u64) {
        let k = (step.saturating_sub(self.first) as usize).min(self.times.len());
        self.times.drain(..k);
        self.first += k as u64;
        self.named = self.named.saturating_sub(saturated(k));
        self.next_floor = self.next_floor.saturating_sub(saturated(k));
        self.next_retire = saturated(2 * self.times.len());
    }
}

/// The inter-token gaps of the requests an instance finished, pooled.
#[derive(Debug, Default)]
pub struct ItlTally {
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

    /// Warms what adding `req` reads that is long cold by the time it finishes (a hint, see
    /// `warm.rs`): the finish times of its first token run's start, and the tally's entry at
    /// the start of its last run (its longest, but for a preemption or a hand-off).
    #[inline(always)]
    pub fn warm(&self, req: &RunningRequest, steps: &StepTimes) {
        let first = req.earlier_runs.first().unwrap_or(&req.token_run);
        steps.warm(first.start);
        let at = (req.token_run.start + 1).saturating_sub(self.first) as usize;
        super::warm::line(self.cover.as_ptr().wrapping_add(at));
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
        self.count_upto(floor, steps);
        steps.forget_before(floor);
    }

    /// Counts the gaps ending at steps up to `floor` and lets go of them (see
    /// [`ItlTally::retire`]), leaving the steps' finish times held.
    fn count_upto(&mut self, floor: u64, steps: &StepTimes) {
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
    }

    /// Moves every pooled gap to `out`: the tally's log as it is, and the gaps of the steps
    /// still held, counted into a log of their own (neither sorted: the run's statistics
    /// need no order, see `metrics/stats/ranks.rs`). The tally is left empty.
    pub fn drain_into(&mut self, steps: &StepTimes, out: &mut IntegerCounts) {
        // Appended, never folded: it takes at most an entry per step held.
        let mut rest = CountLog::with_min_batch(self.cover.len() + 1);
        let held = self.cover.len() as u64;
        for (k, d) in self.cover.drain(..).enumerate() {
            self.covered += d;
            if self.covered > 0 {
                let j = self.first + k as u64;
                rest.add(steps.at(j) - steps.at(j - 1), self.covered as u64);
            }
        }
        self.first += held;
        out.add_log(std::mem::take(&mut self.counted));
        out.add_log(rest);
    }
}

/// The inter-token gaps of the requests an instance finished, pooled per SLO group as well:
/// a tally per cell, a pair of class and tenant ([`RequestClasses::cell_of`]), each request's
/// found by its id. The SLO report's groups by class and by tenant are sums of cells, so that
/// no request's gaps are counted one by one.
#[derive(Debug)]
pub struct ItlCells {
    classes: Rc<RequestClasses>,
    tallies: Vec<ItlTally>,
}

impl ItlCells {
    /// A tally per cell of the requests of `classes`.
    pub fn new(classes: Rc<RequestClasses>) -> ItlCells {
        ItlCells {
            tallies: (0..classes.cells()).map(|_| ItlTally::default()).collect(),
            classes,
        }
    }

    /// Adds the gaps of `req`, which finished, to its cell's tally.
    pub fn add(&mut self, req: &RunningRequest, steps: &StepTimes) {
        if let Some(tally) = self.tallies.get_mut(self.classes.cell_of(req.id)) {
            tally.add(req, steps);
        }
    }

    /// Counts each cell's gaps ending at steps up to `floor`, before the instance's tally
    /// retires them ([`ItlTally::retire`]).
    pub fn count_upto(&mut self, floor: u64, steps: &StepTimes) {
        for tally in &mut self.tallies {
            tally.count_upto(floor, steps);
        }
    }

    /// Moves each cell's pooled gaps to its entry of `out` (one a cell).
    pub fn drain_into(&mut self, steps: &StepTimes, out: &mut [IntegerCounts]) {
        for (tally, counts) in self.tallies.iter_mut().zip(out) {
            tally.drain_into(steps, counts);
        }
    }
}
