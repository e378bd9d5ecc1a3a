//! The order of SGLang's waiting queue (`schedule_policy.py`, `SchedulePolicy.calc_priority`),
//! recomputed before every prefill attempt.

use super::radix::{NodeId, ROOT, RadixCache};
use super::{SgRequest, SglangScheduler};
use rand::seq::SliceRandom;
use serde::Serialize;

/// `--schedule-policy` (SGLang's names; `fcfs` is its default).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    strum::EnumIter,
    strum::EnumMessage,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum SchedulePolicy {
    /// Longest prefix match first: the requests whose prompt the radix cache holds most of go
    /// first (FCFS above 128 waiting)
    Lpm,
    /// Depth-first over the radix tree, subtrees with more waiting requests first
    DfsWeight,
    /// First come, first served
    #[default]
    Fcfs,
    /// Longest output (max_new_tokens) first
    Lof,
    /// A seeded shuffle
    Random,
}

impl crate::choice::Choice for SchedulePolicy {
    const WHAT: &'static str = "schedule policy";
    fn name(&self) -> &'static str {
        self.into()
    }
}

/// Above this many waiting requests `lpm` falls back to FCFS (SGLang's
/// `WAITING_QUEUE_PREFIX_MATCH_MAX`, 128 in 0.5.23, and the mocker's `LPM_FALLBACK_THRESHOLD`).
pub const LPM_FALLBACK_QUEUE: usize = 128;

/// A request whose cached prefix is at most this many tokens is checked against the other
/// waiting requests (SGLang's `IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD`, 32).
const IN_BATCH_CHECK_TOKENS: u32 = 32;

/// ... and waits behind the rest if it shares at least this many tokens with one queued
/// before it (`IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD`, 32).
const IN_BATCH_DEPRIORITIZE_TOKENS: u32 = 32;

impl SchedulePolicy {
    /// Whether the policy reads the radix cache.
    pub fn cache_aware(self) -> bool {
        matches!(self, SchedulePolicy::Lpm | SchedulePolicy::DfsWeight)
    }
}

impl SglangScheduler {
    /// Orders the waiting queue by the policy (SGLang's `calc_priority`). A cache-aware
    /// policy without a radix cache is FCFS, as SGLang adjusts it.
    pub(super) fn order_waiting(&mut self) {
        let mut policy = self.config.schedule_policy;
        if policy.cache_aware() && self.tree.disabled() {
            policy = SchedulePolicy::Fcfs;
        }
        if policy == SchedulePolicy::Lpm && self.waiting.len() > LPM_FALLBACK_QUEUE {
            policy = SchedulePolicy::Fcfs;
        }
        match policy {
            SchedulePolicy::Fcfs if self.by_priority => {
                let slots = &self.slots;
                self.waiting.sort_by_key(|&s| {
                    let r = &slots[s as usize].as_ref().expect("waiting slot").r;
                    std::cmp::Reverse(r.priority)
                });
            }
            SchedulePolicy::Fcfs => {}
            SchedulePolicy::Lof => {
                let slots = &self.slots;
                self.waiting.sort_by_key(|&s| {
                    let r = &slots[s as usize].as_ref().expect("waiting slot").r;
                    std::cmp::Reverse(r.target - r.input_toks)
                });
            }
            SchedulePolicy::Random => self.waiting.shuffle(&mut self.rng),
            SchedulePolicy::Lpm => {
                let deprioritized = self.match_waiting();
                let slots = &self.slots;
                self.waiting.sort_by_key(|&s| {
                    let r = slots[s as usize].as_ref().expect("waiting slot");
                    (
                        deprioritized.contains(&s),
                        std::cmp::Reverse(r.matched_pages),
                    )
                });
            }
            SchedulePolicy::DfsWeight => {
                self.match_waiting();
                self.sort_by_dfs_weight();
            }
        }
    }

    /// Matches every waiting request against the radix cache (touching the matched paths,
    /// as SGLang's `match_prefix` does), noting its matched pages and node; returns the
    /// waiting requests deprioritized by the in-batch prefix check.
    fn match_waiting(&mut self) -> Vec<u32> {
        let page = self.config.page_size;
        let mut in_queue = RadixCache::new(u64::MAX / 2, false);
        let mut deprioritized = Vec::new();
        for k in 0..self.waiting.len() {
            let slot = self.waiting[k];
            let req = self.slots[slot as usize].as_mut().expect("waiting slot");
            let pages = match_limit(req, page);
            let key = req.keys.upto(pages, page, &mut self.hash_bytes);
            let (matched, node) = self.tree.match_prefix(key);
            req.matched_pages = matched;
            req.match_node = node;
            if matched * page <= IN_BATCH_CHECK_TOKENS {
                if in_queue.cached_pages(key) as u32 * page >= IN_BATCH_DEPRIORITIZE_TOKENS {
                    deprioritized.push(slot);
                } else if !key.is_empty() {
                    in_queue.insert(key);
                }
            }
        }
        deprioritized
    }

    /// SGLang's `dfs_weight_order`: each tree node weighs the waiting requests whose match
    /// ends in its subtree; a depth-first walk, heavier children first, lists each node's
    /// requests after its subtree's.
    fn sort_by_dfs_weight(&mut self) {
        let at: Vec<(NodeId, u32)> = self
            .waiting
            .iter()
            .map(|&s| {
                (
                    self.slots[s as usize].as_ref().expect("waiting").match_node,
                    s,
                )
            })
            .collect();
        self.waiting = self.tree.dfs_weight_order(&at);
    }
}

/// The pages of `req`'s sequence a prefix match may cover: the full pages of all but its
/// last token (at least one token is always computed; only those with token ids have keys).
pub(super) fn match_limit(req: &SgRequest, page: u32) -> usize {
    (req.r.reached.saturating_sub(1) / page) as usize
}

impl RadixCache {
    /// The DFS-weight order of waiting requests, given as (matched node, slot) in queue
    /// order: slots in the order to admit them.
    pub fn dfs_weight_order(&self, at: &[(NodeId, u32)]) -> Vec<u32> {
        let mut weight = std::collections::BTreeMap::<NodeId, u32>::new();
        for &(node, _) in at {
            let mut n = node;
            loop {
                *weight.entry(n).or_default() += 1;
                if n == ROOT {
                    break;
                }
                n = self.parent(n);
            }
        }
        let mut order = Vec::with_capacity(at.len());
        let mut stack = vec![(ROOT, false)];
        while let Some((node, visited)) = stack.pop() {
            if visited {
                order.extend(at.iter().filter(|&&(n, _)| n == node).map(|&(_, s)| s));
                continue;
            }
            stack.push((node, true));
            let mut children: Vec<NodeId> = self
                .children(node)
                .filter(|c| weight.contains_key(c))
                .collect();
            // Heaviest first; among equals, in the order they joined the tree (SGLang sorts
            // its children dict, kept in insertion order, with a stable sort).
            children.sort_by_key(|&c| (std::cmp::Reverse(weight[&c]), self.child_order(c)));
            stack.extend(children.into_iter().rev().map(|c| (c, false)));
        }
        order
    }
}

impl std::fmt::Display for SchedulePolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(crate::choice::Choice::name(self))
    }
}
