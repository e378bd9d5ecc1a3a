//! Running session plans: which node starts when.

use super::{NodeKind, PlanNode, SessionPlan, SessionSet};
use crate::Nanos;
use crate::metrics::RequestRecord;
use crate::workload::BlockHashes;
use crate::workload::Injector;
use crate::workload::{Request, RequestClasses};
use std::collections::VecDeque;

/// Where a node is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeStatus {
    /// Waiting for a parent (or never started because an ancestor was cut).
    Pending,
    /// An LLM call released to the engine and not finished.
    Running,
    /// Finished (a tool call or think time is finished when it starts: its end is known).
    Done,
    /// Would have started at or after the session's deadline: never started.
    Cut,
    /// An LLM call that ended without being served (timed out, rejected, shed): what waits
    /// on it never starts, and the session is cancelled.
    Unserved,
}

/// The timing of one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeTiming {
    /// Where it is.
    pub status: NodeStatus,
    /// Parents not yet done.
    pub waiting: u32,
    /// Latest completion among the parents done so far (the session's arrival for a root).
    pub ready_ns: Nanos,
    /// Start: when the client sends an LLM call (its request's arrival as the engine admitted
    /// it, less the client's uplink time), the start of a tool call or think time.
    pub start_ns: Nanos,
    /// End: when the client has the LLM call's last token (the server's last token plus the
    /// client's downlink time), the tool call's or think time's end.
    pub end_ns: Nanos,
}

/// The run-time state of every session of a [`SessionSet`]: it starts each node when its
/// parents are done, releasing LLM calls to the engine. The engine reports finished requests
/// through [`Injector::request_finished`].
///
/// With the clients' profiles ([`Self::with_clients`]), a client's network sits between the
/// session and the gateway: an LLM call sent at `t` arrives at the gateway its uplink time
/// later ([`crate::workload::RequestProfile::uplink_ns`]), and the nodes after it start when
/// its last token reaches the client, its downlink time after the server's last token
/// ([`crate::workload::RequestProfile::downlink_ns`]), as a flat request's arrival moves.
#[derive(Debug)]
pub struct SessionRegistry<'a> {
    set: &'a SessionSet,
    /// Each request's client profile (its network), when the workload names clients.
    clients: Option<&'a RequestClasses>,
    /// Index of each session's first node in `nodes`.
    base: Vec<u32>,
    nodes: Vec<NodeTiming>,
    /// Nodes of the session being run whose parents are all done.
    ready: Ready,
    released: u64,
    completed: u64,
}

impl<'a> SessionRegistry<'a> {
    /// A registry over `set`, no session started yet.
    pub fn new(set: &'a SessionSet) -> SessionRegistry<'a> {
        let mut base = Vec::with_capacity(set.len());
        let mut nodes = Vec::new();
        for s in set.sessions() {
            base.push(nodes.len() as u32);
            nodes.extend(fresh_timings(s));
        }
        SessionRegistry {
            set,
            clients: None,
            base,
            nodes,
            ready: VecDeque::new(),
            released: 0,
            completed: 0,
        }
    }

    /// The same registry, reading each request's client network from `clients`.
    pub fn with_clients(self, clients: Option<&'a RequestClasses>) -> SessionRegistry<'a> {
        SessionRegistry { clients, ..self }
    }

    /// Starts every session at its arrival: appends to `out` the requests known before the
    /// run (the root LLM calls, and those whose parents are only tool calls or think times).
    pub fn start(&mut self, out: &mut Vec<Request>) {
        for s in 0..self.set.len() {
            let (mut run, ready) = self.run(s);
            let released = run.start(ready, out);
            self.released += released;
        }
    }

    /// The requests known before the run, sorted by arrival (then id), as the engine takes
    /// them: the flat requests `flat` and those the sessions start with ([`Self::start`]).
    pub fn initial_requests(&mut self, flat: &[Request]) -> Vec<Request> {
        let mut requests = flat.to_vec();
        self.start(&mut requests);
        requests.sort_by_key(|r| (r.arrival_ns, r.id));
        requests
    }

    /// The sessions being run.
    pub fn set(&self) -> &'a SessionSet {
        self.set
    }

    /// Timing of node `node` of session `session`.
    pub fn timing(&self, session: usize, node: u32) -> NodeTiming {
        self.nodes[(self.base[session] + node) as usize]
    }

    /// The timings of session `s`'s nodes.
    pub(super) fn timings(&self, s: usize) -> &[NodeTiming] {
        let base = self.base[s] as usize;
        &self.nodes[base..base + self.set.sessions()[s].nodes.len()]
    }

    /// Requests released to the engine so far (at the start and at run time).
    pub fn released(&self) -> u64 {
        self.released
    }

    /// Requests reported finished so far.
    pub fn completed(&self) -> u64 {
        self.completed
    }

    /// Nodes that will never start: cut at a deadline, or waiting on one that was.
    pub fn not_started(&self) -> u64 {
        self.nodes
            .iter()
            .filter(|n| matches!(n.status, NodeStatus::Pending | NodeStatus::Cut))
            .count() as u64
    }

    /// Session `s` being run (its plan, requests and node timings) and the ready queue.
    fn run(&mut self, s: usize) -> (SessionRun<'_>, &mut Ready) {
        let plan = &self.set.sessions()[s];
        let base = self.base[s] as usize;
        let run = SessionRun {
            plan,
            requests: self.set.requests(),
            nodes: &mut self.nodes[base..base + plan.nodes.len()],
            clients: self.clients,
        };
        (run, &mut self.ready)
    }
}

impl Injector for SessionRegistry<'_> {
    fn deferred(&self) -> &[Request] {
        self.set.requests()
    }

    /// Whole plans were drawn before the run: no request is drawn after its parent, so no
    /// hashes are handed on.
    fn request_finished(
        &mut self,
        record: &RequestRecord<'_>,
        _: BlockHashes<'_>,
        out: &mut Vec<Request>,
    ) {
        let Some((s, node)) = self.set.locate(record.request_id) else {
            return;
        };
        self.completed += 1;
        let (mut run, ready) = self.run(s);
        let released = run.request_finished(node, record, ready, out);
        self.released += released;
    }

    fn request_dropped(&mut self, id: u64, at: Nanos) {
        if let Some((s, node)) = self.set.locate(id) {
            self.run(s).0.request_dropped(node, at);
        }
    }
}

/// One session being run: its plan, the requests of its LLM nodes (a node's `request`
/// indexes `requests`), the timings of its nodes and its clients' networks.
pub(super) struct SessionRun<'r> {
    pub plan: &'r SessionPlan,
    pub requests: &'r [Request],
    pub nodes: &'r mut [NodeTiming],
    pub clients: Option<&'r RequestClasses>,
}

impl SessionRun<'_> {
    /// Starts the session at its arrival: appends to `out` the LLM calls it releases then
    /// (the roots, and those whose parents are only tool calls or think times); returns
    /// their number.
    pub fn start(&mut self, ready: &mut Ready, out: &mut Vec<Request>) -> u64 {
        for (n, node) in self.plan.nodes.iter().enumerate() {
            if node.parents.is_empty() {
                ready.push_back((n as u32, self.plan.arrival_ns));
            }
        }
        self.run_ready(ready, out)
    }

    /// The request of LLM node `node` (of `record`) finished: appends to `out` the LLM calls
    /// this releases and returns their number.
    pub fn request_finished(
        &mut self,
        node: u32,
        record: &RequestRecord<'_>,
        ready: &mut Ready,
        out: &mut Vec<Request>,
    ) -> u64 {
        let sent = record.arrival_ns.saturating_sub(uplink_ns(
            self.clients,
            record.request_id,
            record.input_toks,
        ));
        let received = record.end_ns.saturating_add(downlink_ns(
            self.clients,
            record.request_id,
            record.output_toks,
        ));
        let state = &mut self.nodes[node as usize];
        debug_assert_eq!(
            state.status,
            NodeStatus::Running,
            "a released request finishes"
        );
        state.start_ns = sent;
        self.finish(node, received, ready);
        self.run_ready(ready, out)
    }

    /// The request of LLM node `node` ended at `at` without being served: the node is
    /// unserved, and nothing waiting on it starts.
    pub fn request_dropped(&mut self, node: u32, at: Nanos) {
        let state = &mut self.nodes[node as usize];
        debug_assert_eq!(state.status, NodeStatus::Running, "a released request ends");
        state.status = NodeStatus::Unserved;
        state.end_ns = at;
    }

    /// Marks node `node` done at `end` and readies the children it was the last parent of.
    fn finish(&mut self, node: u32, end: Nanos, ready: &mut Ready) {
        let state = &mut self.nodes[node as usize];
        state.status = NodeStatus::Done;
        state.end_ns = end;
        for &c in &self.plan.nodes[node as usize].children {
            let child = &mut self.nodes[c as usize];
            child.waiting -= 1;
            child.ready_ns = child.ready_ns.max(end);
            if child.waiting == 0 {
                ready.push_back((c, child.ready_ns));
            }
        }
    }

    /// Starts every ready node, in the order they became ready; LLM calls go to `out`, and
    /// their number is returned.
    fn run_ready(&mut self, ready: &mut Ready, out: &mut Vec<Request>) -> u64 {
        let mut released = 0;
        while let Some((n, at)) = ready.pop_front() {
            let state = &mut self.nodes[n as usize];
            if self.plan.deadline_ns.is_some_and(|d| at >= d) {
                state.status = NodeStatus::Cut;
                continue;
            }
            state.start_ns = at;
            match self.plan.nodes[n as usize].kind {
                NodeKind::Llm { request } => {
                    state.status = NodeStatus::Running;
                    released += 1;
                    let r = &self.requests[request as usize];
                    // Saturates: the engine refuses a clock this late.
                    let uplink = uplink_ns(self.clients, r.id, r.input_toks);
                    out.push(Request {
                        arrival_ns: at.saturating_add(uplink),
                        ..r.clone()
                    });
                }
                NodeKind::Tool { latency_ns: d } | NodeKind::Think { ns: d } => {
                    // Saturates: the engine refuses a clock this late.
                    self.finish(n, at.saturating_add(d), ready);
                }
            }
        }
        released
    }
}

/// The timings of `plan`'s nodes before it starts.
pub(super) fn fresh_timings(plan: &SessionPlan) -> impl Iterator<Item = NodeTiming> + '_ {
    plan.nodes.iter().map(|n| fresh_timing(n, plan.arrival_ns))
}

/// The timing of `node` of a session arriving at `arrival_ns` before it starts.
pub(super) fn fresh_timing(node: &PlanNode, arrival_ns: Nanos) -> NodeTiming {
    NodeTiming {
        status: NodeStatus::Pending,
        waiting: node.parents.len() as u32,
        ready_ns: arrival_ns,
        start_ns: 0,
        end_ns: 0,
    }
}

/// Nodes of one session whose parents are all done, in the order they became ready: (node,
/// start time). Empty between calls.
pub(super) type Ready = VecDeque<(u32, Nanos)>;

/// Time from the client's send of request `id` (`input_toks` long) to its arrival at the
/// gateway, ns (0 without client profiles).
fn uplink_ns(clients: Option<&RequestClasses>, id: u64, input_toks: u32) -> Nanos {
    clients.map_or(0, |c| c.profile(id).uplink_ns(input_toks))
}

/// Time from the server's last token of request `id` (`output_toks` long) to the client's,
/// ns (0 without client profiles).
fn downlink_ns(clients: Option<&RequestClasses>, id: u64, output_toks: u32) -> Nanos {
    clients.map_or(0, |c| c.profile(id).downlink_ns(output_toks))
}
