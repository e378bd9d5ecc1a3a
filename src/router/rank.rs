//! Instances ranked by the load a policy compares, kept as they change, so that a decision
//! over every instance reads O(log n) entries instead of a snapshot of each.
//!
//! A policy that picks the instance with the least of one key ([`Ranking`]: `LOAD`,
//! `least-loaded`, `always-busiest`) asks the view for a [`RankTree`] of that key
//! ([`super::ClusterView::ranked`]); the engine keeps one for the run's router, updating an
//! instance's entry when the instance changed since the last decision (or every entry when
//! a stale signal is re-read), the keys taken from exactly the snapshots the router would
//! read. The tree gives the same pick as the scan, ties included: the least key, then the
//! lowest id (or, for `LOAD`, the first in its rotating scan order).

use super::InstanceSnapshot;

/// The key a policy ranks instances by, least first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ranking {
    /// `LOAD`'s score, `(4·waiting + running) / max_num_seqs` (raw when unlimited).
    Load,
    /// `least-loaded`: waiting + running, then used KV blocks.
    LeastLoaded,
    /// `always-busiest`: the highest effective load first.
    Busiest,
}

impl Ranking {
    /// The key of an instance seen as `s`: ordered as the policy compares, equal exactly
    /// when the policy sees a tie.
    pub fn key(self, s: &InstanceSnapshot) -> u128 {
        match self {
            // A score is a finite non-negative `f64` (never -0): its bits order as it does.
            Ranking::Load => u128::from(super::load_score(s).to_bits()),
            Ranking::LeastLoaded => {
                let load = (s.waiting + s.running) as u64;
                (u128::from(load) << 64) | s.kv_blocks_used as u128
            }
            Ranking::Busiest => u128::from(u64::MAX - s.effective_load() as u64) << 64,
        }
    }
}

/// A key per instance id with the least of them found in O(log n): a complete binary tree
/// over the ids (padded to a power of two with keys above any real one), each inner node
/// holding the least key below it. Fixed size; updates never allocate.
#[derive(Debug, Clone)]
pub struct RankTree {
    /// Instances ranked.
    len: usize,
    /// Leaves: a power of two, at least `len`.
    leaves: usize,
    /// Node `k`'s children are `2k` and `2k + 1`; the root is 1, leaf `i` is `leaves + i`.
    nodes: Vec<u128>,
}

/// The key of a padding leaf: above every key [`Ranking::key`] gives.
const PAD: u128 = u128::MAX;

impl RankTree {
    /// A tree over `len` instances (at least one), every key [`PAD`] until set.
    pub fn new(len: usize) -> RankTree {
        assert!(len > 0, "a ranking needs an instance");
        let leaves = len.next_power_of_two();
        RankTree {
            len,
            leaves,
            nodes: vec![PAD; 2 * leaves],
        }
    }

    /// How many instances it ranks.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it ranks no instance (never: see [`RankTree::new`]).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sets instance `id`'s key.
    pub fn set(&mut self, id: usize, key: u128) {
        let mut k = self.leaves + id;
        if self.nodes[k] == key {
            return;
        }
        self.nodes[k] = key;
        while k > 1 {
            k /= 2;
            let least = self.nodes[2 * k].min(self.nodes[2 * k + 1]);
            if self.nodes[k] == least {
                break;
            }
            self.nodes[k] = least;
        }
    }

    /// Instance `id`'s key.
    pub fn key(&self, id: usize) -> u128 {
        self.nodes[self.leaves + id]
    }

    /// The instance with the least key, the lowest id among equals.
    pub fn least(&self) -> usize {
        self.least_from(0)
    }

    /// The instance with the least key, the first among equals in the order `start`,
    /// `start + 1`, ..., `len - 1`, `0`, ..., `start - 1`.
    pub fn least_from(&self, start: usize) -> usize {
        let least = self.nodes[1];
        self.first_at_most(start, least)
            .or_else(|| self.first_at_most(0, least))
            .expect("the least key is some instance's")
    }

    /// The lowest id at or after `start` whose key is at most `bound`.
    fn first_at_most(&self, start: usize, bound: u128) -> Option<usize> {
        let (mut k, mut lo, mut width) = (1, 0, self.leaves);
        // Descend to the leftmost leaf at or after `start` under a node within `bound`,
        // climbing back to the next right sibling where a subtree has none.
        loop {
            if lo + width <= start || self.nodes[k] > bound {
                // Nothing here: go to the next subtree to the right.
                while k % 2 == 1 {
                    if k == 1 {
                        return None;
                    }
                    k /= 2;
                    width *= 2;
                    lo -= width / 2;
                }
                k += 1;
                lo += width;
                continue;
            }
            if width == 1 {
                return (lo < self.len).then_some(lo);
            }
            k *= 2;
            width /= 2;
        }
    }
}
