//! A finished request's inter-token latencies as its record carries them: a list, or, from a
//! scheduler, the steps of its instance it produced its tokens in, over those steps' finish
//! times. The second is built per token run, not per token: the gaps are worked out only
//! where they are read, and the CSV writer formats a run of consecutive steps from its own
//! copy of the steps' gaps, each formatted once (see `csv_out/step_texts.rs`).

use crate::Nanos;
use crate::scheduler::request::TokenRun;

/// The finish times of an instance's completed steps from the `first`-th on (step numbers
/// count from 0, the instance's first completed step).
#[derive(Debug, Clone, Copy, Default)]
pub struct StepWindow<'a> {
    /// The step number of `times[0]`.
    pub first: u64,
    pub times: &'a [Nanos],
}

impl StepWindow<'_> {
    /// The number of the step after the last one held.
    pub fn end(&self) -> u64 {
        self.first + self.times.len() as u64
    }

    /// The finish time of step `step`, or `None` when it is not held.
    pub fn get(&self, step: u64) -> Option<Nanos> {
        let k = usize::try_from(step.checked_sub(self.first)?).ok()?;
        self.times.get(k).copied()
    }
}

/// The gaps of a request's tokens produced in runs of its instance's steps: from `from` (a
/// token produced before it came to the instance, under P/D) to its first token, then
/// between each token and the next, the runs being `earlier` then `last`.
#[derive(Debug, Clone, Copy, Default)]
pub struct StepGaps<'a> {
    /// The time of a token before the first of the runs, which the first gap counts from.
    pub from: Option<Nanos>,
    /// Runs before the last one, in order (rarely any: see [`TokenRun`]).
    pub earlier: &'a [TokenRun],
    /// The last run; none when its length is 0.
    pub last: TokenRun,
    /// The instance's step finish times, holding every step the runs name.
    pub steps: StepWindow<'a>,
}

impl<'a> StepGaps<'a> {
    /// The runs, in order.
    pub fn runs(&self) -> impl Iterator<Item = TokenRun> + 'a {
        let last = (self.last.len > 0).then_some(self.last);
        self.earlier.iter().copied().chain(last)
    }

    /// How many gaps: one a token but the first, and one more counted from `from`.
    pub fn len(&self) -> usize {
        let tokens: u64 = self.runs().map(|run| u64::from(run.len)).sum();
        match tokens {
            0 => 0,
            _ => (tokens - 1) as usize + usize::from(self.from.is_some()),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `k`-th run, earlier ones first.
    fn run(&self, k: usize) -> Option<TokenRun> {
        match self.earlier.get(k) {
            Some(&run) => Some(run),
            None => (k == self.earlier.len() && self.last.len > 0).then_some(self.last),
        }
    }
}

/// A finished request's inter-token latencies, ns, in order (see the module).
#[derive(Clone, Copy)]
pub enum Itl<'a> {
    /// Listed one by one.
    Listed(&'a [Nanos]),
    /// Runs of an instance's steps.
    Steps(StepGaps<'a>),
}

impl Default for Itl<'_> {
    /// None.
    fn default() -> Self {
        Itl::Listed(&[])
    }
}

impl<'a> Itl<'a> {
    /// How many gaps.
    pub fn len(&self) -> usize {
        match self {
            Itl::Listed(gaps) => gaps.len(),
            Itl::Steps(gaps) => gaps.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The gaps, in order.
    ///
    /// # Panics
    /// When a run names a step its window does not hold (a scheduler's bug).
    pub fn iter(&self) -> Gaps<'a> {
        match *self {
            Itl::Listed(gaps) => Gaps {
                listed: gaps.iter(),
                steps: StepGaps::default(),
                run: 0,
                token: 0,
                previous: None,
            },
            Itl::Steps(steps) => Gaps {
                listed: [].iter(),
                steps,
                run: 0,
                token: 0,
                previous: steps.from,
            },
        }
    }

    /// The gaps, collected.
    pub fn to_vec(&self) -> Vec<Nanos> {
        self.iter().collect()
    }
}

impl std::fmt::Debug for Itl<'_> {
    /// As the list of its gaps, however it holds them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a> IntoIterator for Itl<'a> {
    type Item = Nanos;
    type IntoIter = Gaps<'a>;

    fn into_iter(self) -> Gaps<'a> {
        self.iter()
    }
}

/// The gaps of an [`Itl`], in order.
#[derive(Debug, Clone)]
pub struct Gaps<'a> {
    listed: std::slice::Iter<'a, Nanos>,
    steps: StepGaps<'a>,
    /// The run being walked and the index of its next token.
    run: usize,
    token: u32,
    /// The time of the token before the next one.
    previous: Option<Nanos>,
}

impl Iterator for Gaps<'_> {
    type Item = Nanos;

    fn next(&mut self) -> Option<Nanos> {
        if let Some(&gap) = self.listed.next() {
            return Some(gap);
        }
        loop {
            let run = self.steps.run(self.run)?;
            if self.token == run.len {
                self.run += 1;
                self.token = 0;
                continue;
            }
            let step = run.start + u64::from(self.token) * u64::from(run.stride);
            let t = self
                .steps
                .steps
                .get(step)
                .expect("a token run's step is held");
            self.token += 1;
            if let Some(p) = self.previous.replace(t) {
                return Some(t - p);
            }
        }
    }
}
