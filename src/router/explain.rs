//! Why the router chose an instance, for the decision trace: every candidate's score under
//! the policy, the parts it is the sum of, and the regret of the choice.
//!
//! A candidate's score is the policy's own where it has one: the weighted sum of the
//! scorers (`--routing-scorers`, each part a scorer's weighted contribution), the
//! `weighted` policy's four terms, `LOAD`'s `−(4·waiting + running) / max_num_seqs`,
//! least-loaded's `−(waiting + running)`, prefix-affinity's cached prompt tokens (or
//! `−(waiting + running)` when no candidate holds any). Policies without a quality score
//! (`RR`, `RAND`, and `always-busiest`, which maximises load) are judged by the load signal:
//! `−effective load` (waiting + running + in flight). The regret of a decision is the best
//! candidate's score minus the chosen one's, at least 0: structurally 0 for the policies
//! that pick their own best score.

/// One candidate's score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CandidateScore {
    /// Instance id.
    pub instance: u32,
    /// Its score (higher is better).
    pub score: f64,
}

/// The scores of one routing decision's candidates, reused from one decision to the next.
#[derive(Debug, Default)]
pub struct Explanation {
    /// How many of the best candidates the trace lists (`--counterfactual-k`).
    k: usize,
    /// The names of the parts of a score.
    parts: Vec<&'static str>,
    /// Per candidate, in candidate order.
    scores: Vec<CandidateScore>,
    /// Per candidate, its parts (`parts.len()` each, candidate after candidate).
    contributions: Vec<f64>,
    /// Position of the chosen candidate.
    chosen: usize,
    /// Candidate positions, best first (score, then lowest id).
    ranked: Vec<usize>,
}

impl Clone for Explanation {
    fn clone(&self) -> Explanation {
        let mut copy = Explanation::default();
        copy.clone_from(self);
        copy
    }

    /// Copies `source` into this explanation's buffers (no allocation once they are large
    /// enough): the engine keeps a decision's explanation this way until it is reported.
    fn clone_from(&mut self, source: &Explanation) {
        self.k = source.k;
        self.parts.clone_from(&source.parts);
        self.scores.clone_from(&source.scores);
        self.contributions.clone_from(&source.contributions);
        self.chosen = source.chosen;
        self.ranked.clone_from(&source.ranked);
    }
}

impl Explanation {
    /// An explanation listing the `k` best candidates (and the chosen one).
    pub fn new(k: usize) -> Explanation {
        Explanation {
            k,
            ..Explanation::default()
        }
    }

    /// Starts a decision whose scores have the parts named `parts`.
    pub(super) fn start(&mut self, parts: impl IntoIterator<Item = &'static str>) {
        self.parts.clear();
        self.parts.extend(parts);
        self.scores.clear();
        self.contributions.clear();
    }

    /// Adds the next candidate, `instance`, with the parts of its score (summed).
    pub(super) fn push(&mut self, instance: u32, parts: impl IntoIterator<Item = f64>) {
        let from = self.contributions.len();
        self.contributions.extend(parts);
        debug_assert_eq!(self.contributions.len() - from, self.parts.len());
        let score = self.contributions[from..].iter().sum();
        self.scores.push(CandidateScore { instance, score });
    }

    /// Ends the decision: the candidate at position `chosen` was picked.
    pub(super) fn finish(&mut self, chosen: usize) {
        self.chosen = chosen;
        self.ranked.clear();
        self.ranked.extend(0..self.scores.len());
        let scores = &self.scores;
        self.ranked.sort_by(|&a, &b| {
            let (a, b) = (scores[a], scores[b]);
            b.score
                .total_cmp(&a.score)
                .then(a.instance.cmp(&b.instance))
        });
    }

    /// The names of the parts of a score.
    pub fn parts(&self) -> &[&'static str] {
        &self.parts
    }

    /// The chosen candidate.
    pub fn chosen(&self) -> CandidateScore {
        self.scores[self.chosen]
    }

    /// The highest score among the candidates pushed so far (−∞ for none): readable before
    /// [`Explanation::finish`] ranks them.
    pub(super) fn top_score(&self) -> f64 {
        (self.scores.iter()).fold(f64::NEG_INFINITY, |top, c| top.max(c.score))
    }

    /// The best candidate (highest score, lowest id on ties).
    pub fn best(&self) -> CandidateScore {
        self.scores[self.ranked[0]]
    }

    /// The best score minus the chosen one's, at least 0.
    pub fn regret(&self) -> f64 {
        (self.best().score - self.chosen().score).max(0.0)
    }

    /// Every candidate, best first, each with the parts of its score.
    pub fn all(&self) -> impl Iterator<Item = (CandidateScore, &[f64])> {
        let n = self.parts.len();
        self.ranked.iter().map(move |&pos| {
            (
                self.scores[pos],
                &self.contributions[pos * n..(pos + 1) * n],
            )
        })
    }

    /// The `k` best candidates, best first, then the chosen one if it is not among them,
    /// each with the parts of its score.
    pub fn top(&self) -> impl Iterator<Item = (CandidateScore, &[f64])> {
        let k = self.k.min(self.ranked.len());
        let chosen_listed = self.ranked[..k].contains(&self.chosen);
        let extra = (!chosen_listed).then_some(self.chosen);
        let n = self.parts.len();
        self.ranked[..k]
            .iter()
            .copied()
            .chain(extra)
            .map(move |pos| {
                (
                    self.scores[pos],
                    &self.contributions[pos * n..(pos + 1) * n],
                )
            })
    }
}
