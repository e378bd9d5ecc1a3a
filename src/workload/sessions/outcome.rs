//! What each session did over a run: the facts behind the session metrics.

use super::registry::{NodeStatus, NodeTiming, SessionRegistry};
use super::{NodeKind, SessionPlan};
use crate::Nanos;

/// One session's result after a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionOutcome<'a> {
    /// Session id.
    pub id: &'a str,
    /// Client of a generated session.
    pub client: Option<&'a str>,
    /// Start (arrival of its root steps), ns.
    pub arrival_ns: Nanos,
    /// Latest end of a finished step or of a call left unserved (the start when none), ns.
    pub end_ns: Nanos,
    /// Every step finished; otherwise the deadline (horizon) interrupted it, or it was
    /// cancelled.
    pub complete: bool,
    /// An LLM call of it ended without being served (timed out, rejected, shed): what waited
    /// on the call never started.
    pub cancelled: bool,
    /// LLM calls finished.
    pub llm_calls: u32,
    /// LLM calls planned.
    pub llm_planned: u32,
    /// Tool calls run.
    pub tool_calls: u32,
    /// Time spent in tool calls, summed over the tool calls run (parallel ones each count).
    pub tool_wait_ns: Nanos,
    /// Think time before follow-ups, summed.
    pub think_ns: Nanos,
    /// Fan-out branches finished.
    pub fan_out_done: u32,
    /// Fan-out branches planned.
    pub fan_out_planned: u32,
    /// Loop iterations started (0 without a loop).
    pub loop_iterations: u32,
    /// Length of the critical path: the steps' own durations along the chain of last-finishing
    /// parents that ends the session. Equal to the E2E latency unless a step was admitted
    /// later than it was ready (`--max-in-flight`).
    pub critical_path_ns: Nanos,
    /// Of the critical path, the time in LLM calls (the client's network, queueing and
    /// serving).
    pub critical_path_llm_ns: Nanos,
}

impl SessionOutcome<'_> {
    /// End-to-end latency: first arrival to last completion, ns.
    pub fn e2e_ns(&self) -> Nanos {
        self.end_ns - self.arrival_ns
    }

    /// Steps run: LLM calls finished plus tool calls run.
    pub fn steps(&self) -> u32 {
        self.llm_calls + self.tool_calls
    }
}

impl SessionRegistry<'_> {
    /// Every session's outcome, in session order.
    pub fn outcomes(&self) -> Vec<SessionOutcome<'_>> {
        self.set()
            .sessions()
            .iter()
            .enumerate()
            .map(|(s, plan)| outcome_of(plan, self.timings(s)))
            .collect()
    }
}

/// The outcome of session `plan` whose nodes ended with `timings`.
pub(super) fn outcome_of<'p>(plan: &'p SessionPlan, timings: &[NodeTiming]) -> SessionOutcome<'p> {
    let mut out = SessionOutcome {
        id: &plan.id,
        client: plan.client.as_deref(),
        arrival_ns: plan.arrival_ns,
        end_ns: plan.arrival_ns,
        complete: true,
        cancelled: false,
        llm_calls: 0,
        llm_planned: plan.llm_nodes.len() as u32,
        tool_calls: 0,
        tool_wait_ns: 0,
        think_ns: 0,
        fan_out_done: 0,
        fan_out_planned: 0,
        loop_iterations: 0,
        critical_path_ns: 0,
        critical_path_llm_ns: 0,
    };
    // The node that ends the session: the latest end, the first such node on ties.
    let mut last: Option<(Nanos, u32)> = None;
    // The latest end of a call left unserved (a cancelled session ends there, if later).
    let mut unserved_end = plan.arrival_ns;
    for (n, node) in plan.nodes.iter().enumerate() {
        let t = timings[n];
        out.fan_out_planned += u32::from(node.fan_out);
        let started = matches!(t.status, NodeStatus::Running | NodeStatus::Done);
        if started && let Some(i) = node.iteration {
            out.loop_iterations = out.loop_iterations.max(i + 1);
        }
        if t.status == NodeStatus::Unserved {
            out.cancelled = true;
            unserved_end = unserved_end.max(t.end_ns);
        }
        if t.status != NodeStatus::Done {
            out.complete = false;
            continue;
        }
        out.fan_out_done += u32::from(node.fan_out);
        match node.kind {
            NodeKind::Llm { .. } => out.llm_calls += 1,
            NodeKind::Tool { latency_ns } => {
                out.tool_calls += 1;
                out.tool_wait_ns += latency_ns;
            }
            NodeKind::Think { ns } => out.think_ns += ns,
        }
        if last.is_none_or(|(end, _)| t.end_ns > end) {
            last = Some((t.end_ns, n as u32));
        }
    }
    out.end_ns = unserved_end;
    let Some((end, n)) = last else {
        return out;
    };
    out.end_ns = end.max(unserved_end);
    (out.critical_path_ns, out.critical_path_llm_ns) = critical_path(plan, timings, n);
    out
}

/// The length of the critical path ending at node `n` of `plan` (the chain of its
/// last-finishing parents) and, of it, the time in LLM calls.
fn critical_path(plan: &SessionPlan, timings: &[NodeTiming], mut n: u32) -> (Nanos, Nanos) {
    let (mut total, mut llm) = (0, 0);
    loop {
        let t = timings[n as usize];
        let node = &plan.nodes[n as usize];
        total += t.end_ns - t.start_ns;
        if matches!(node.kind, NodeKind::Llm { .. }) {
            llm += t.end_ns - t.start_ns;
        }
        let parent = node.parents.iter().copied().reduce(|best, p| {
            if timings[p as usize].end_ns > timings[best as usize].end_ns {
                p
            } else {
                best
            }
        });
        match parent {
            Some(p) => n = p,
            None => return (total, llm),
        }
    }
}
