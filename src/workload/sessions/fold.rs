//! A conversation's finished turns folded into sums: a session whose plan is a chain (each
//! node the only child of the one before, as a conversation's turns and think times are)
//! keeps the nodes from its latest LLM call on, and of those before it only what its outcome
//! needs. Along a chain every node starts no earlier than its parent ends, so the critical
//! path ending at any finished node is every node up to it, and the folded nodes' sums give
//! the same outcome as the nodes themselves ([`Folded::outcome`]).

use super::outcome::outcome_of;
use super::{NodeKind, NodeStatus, NodeTiming, SessionOutcome, SessionPlan};
use crate::Nanos;
use crate::workload::Request;

/// What the folded nodes of a chain add to its outcome.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Folded {
    /// Nodes folded.
    nodes: u32,
    llm_calls: u32,
    tool_calls: u32,
    tool_wait_ns: Nanos,
    think_ns: Nanos,
    /// Latest end of a folded node.
    end_ns: Nanos,
    /// Their durations summed, and those of the LLM calls.
    path_ns: Nanos,
    path_llm_ns: Nanos,
}

impl Folded {
    /// Folds the first `m` nodes of chain `plan` (all done), its requests and timings
    /// following, so that node `m` becomes node 0.
    pub fn fold(
        &mut self,
        m: usize,
        plan: &mut SessionPlan,
        requests: &mut Vec<Request>,
        timings: &mut Vec<NodeTiming>,
    ) {
        let mut calls = 0;
        for (node, t) in plan.nodes[..m].iter().zip(&timings[..m]) {
            debug_assert_eq!(t.status, NodeStatus::Done, "only finished nodes fold");
            let took = t.end_ns - t.start_ns;
            self.end_ns = self.end_ns.max(t.end_ns);
            self.path_ns += took;
            match node.kind {
                NodeKind::Llm { .. } => {
                    calls += 1;
                    self.path_llm_ns += took;
                }
                NodeKind::Tool { latency_ns } => {
                    self.tool_calls += 1;
                    self.tool_wait_ns += latency_ns;
                }
                NodeKind::Think { ns } => self.think_ns += ns,
            }
        }
        self.nodes += m as u32;
        self.llm_calls += calls;
        plan.nodes.drain(..m);
        timings.drain(..m);
        requests.drain(..calls as usize);
        plan.llm_nodes.drain(..calls as usize);
        plan.first_id += u64::from(calls);
        let m = m as u32;
        for node in &mut plan.nodes {
            node.parents.retain(|&p| p >= m);
            node.parents.iter_mut().for_each(|p| *p -= m);
            node.children.iter_mut().for_each(|c| *c -= m);
            if let NodeKind::Llm { request } = &mut node.kind {
                *request -= calls;
            }
        }
        plan.llm_nodes.iter_mut().for_each(|n| *n -= m);
    }

    /// The outcome of the chain whose nodes left are `plan`'s, with these folded before them.
    pub fn outcome<'p>(&self, plan: &'p SessionPlan, timings: &[NodeTiming]) -> SessionOutcome<'p> {
        let mut out = outcome_of(plan, timings);
        if self.nodes == 0 {
            return out;
        }
        out.llm_calls += self.llm_calls;
        out.tool_calls += self.tool_calls;
        out.tool_wait_ns += self.tool_wait_ns;
        out.think_ns += self.think_ns;
        if out.end_ns > self.end_ns {
            // A node left ends the session: its path runs through every folded node.
            out.critical_path_ns += self.path_ns;
            out.critical_path_llm_ns += self.path_llm_ns;
        } else {
            // A folded node does (the first of those ending last; those after it on the
            // chain took no time).
            out.end_ns = self.end_ns;
            out.critical_path_ns = self.path_ns;
            out.critical_path_llm_ns = self.path_llm_ns;
        }
        out
    }
}
