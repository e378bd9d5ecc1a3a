//! Sessions: requests that depend on earlier requests of the same session (agentic
//! workflows, conversations).
//!
//! A session is planned before the run ([`SessionPlan`]): its nodes, in an order where every
//! node comes after its parents, are LLM calls (requests, whose prompt and output lengths are
//! drawn up front), tool calls (a latency) and think times (a user's pause before a follow-up).
//! Only the timing is left to the run: a node starts when all its parents are done (at the
//! latest parent completion), a tool call or think time is done its duration later, an LLM
//! call when the engine finishes its request. Nodes without parents start at the session's
//! arrival. A node that would start at or after the session's deadline (the workload's
//! horizon) is never started: the session is interrupted.
//!
//! [`SessionRegistry`] runs the plans: it hands the engine the requests known at the start
//! and, through the engine's [`crate::workload::Injector`] hook, releases every later request
//! when its parents complete. Because everything random is drawn when the plan is made, a
//! session's requests are the same whatever hardware serves them; only their arrival times
//! differ.
//!
//! Request ids: a session reserves one id per LLM node, consecutively, in node order (as
//! LLMServingSim reserves ids for the sub-requests of a session line).

mod fold;
mod live;
mod outcome;
mod registry;

pub use live::{LiveSessions, SharedSessions};
pub use outcome::SessionOutcome;
pub use registry::{NodeStatus, NodeTiming, SessionRegistry};

use super::Request;
use crate::Nanos;
use crate::workload::BlockHashes;

/// What a node of a session does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// An LLM call: the request at this index of [`SessionSet::requests`].
    Llm {
        /// Index into [`SessionSet::requests`].
        request: u32,
    },
    /// A tool call (external service) lasting `latency_ns`.
    Tool {
        /// Sampled latency, ns.
        latency_ns: Nanos,
    },
    /// A user's think time before the next turn, `ns` long.
    Think {
        /// Duration, ns.
        ns: Nanos,
    },
}

/// One node of a session plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanNode {
    /// Step label: the sub-request index for LLMServingSim sessions, the workflow step (with
    /// `#<iteration>` inside a loop and `[<branch>]` for a fan-out branch) for generated ones.
    pub label: String,
    /// Indices of the nodes it waits for, all earlier in the plan; empty for a root.
    pub parents: Vec<u32>,
    /// Indices of the nodes waiting for it (filled in by [`SessionSet::add`]).
    pub children: Vec<u32>,
    /// What it does.
    pub kind: NodeKind,
    /// Loop iteration (from 0) of a step inside a workflow loop.
    pub iteration: Option<u32>,
    /// Whether it is one branch of a fan-out step.
    pub fan_out: bool,
}

/// One planned session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionPlan {
    /// Session id, unique in the workload.
    pub id: String,
    /// Client of a generated session.
    pub client: Option<String>,
    /// When the session starts: its root nodes start then.
    pub arrival_ns: Nanos,
    /// Nodes that would start at or after this time are not started.
    pub deadline_ns: Option<Nanos>,
    /// The nodes, parents before children.
    pub nodes: Vec<PlanNode>,
    /// Id of the first LLM node's request; the k-th LLM node has id `first_id + k`.
    pub first_id: u64,
    /// Workload line it came from.
    pub line: u64,
    /// Node index of each LLM node, in id order.
    pub llm_nodes: Vec<u32>,
}

/// Builds the nodes of one session in plan order: a whole plan, or the nodes a running
/// session adds ([`PlanBuilder::after`], [`SessionPlan::append`]).
#[derive(Debug, Default)]
pub struct PlanBuilder {
    /// Nodes of the plan before these (0 for a whole plan).
    offset: u32,
    nodes: Vec<PlanNode>,
    requests: Vec<Request>,
}

impl PlanBuilder {
    /// An empty plan.
    pub fn new() -> PlanBuilder {
        PlanBuilder::default()
    }

    /// The nodes that follow `plan`'s: their indices, and those of their parents, count
    /// `plan`'s nodes.
    pub fn after(plan: &SessionPlan) -> PlanBuilder {
        PlanBuilder {
            offset: plan.nodes.len() as u32,
            ..PlanBuilder::default()
        }
    }

    /// Adds a node and returns its index; `parents` must be earlier nodes. For an LLM node
    /// give its `request` (its id, arrival and line are set when the session is added).
    pub fn push(
        &mut self,
        label: String,
        parents: Vec<u32>,
        step: Step,
        iteration: Option<u32>,
        fan_out: bool,
    ) -> u32 {
        let index = self.len() as u32;
        assert!(
            parents.iter().all(|&p| p < index),
            "a node's parents come before it"
        );
        let kind = match step {
            Step::Llm(request) => {
                self.requests.push(request);
                NodeKind::Llm {
                    request: self.requests.len() as u32 - 1,
                }
            }
            Step::Tool(latency_ns) => NodeKind::Tool { latency_ns },
            Step::Think(ns) => NodeKind::Think { ns },
        };
        self.nodes.push(PlanNode {
            label,
            parents,
            children: Vec::new(),
            kind,
            iteration,
            fan_out,
        });
        index
    }

    /// Nodes so far (those of the plan it follows included).
    pub fn len(&self) -> usize {
        self.offset as usize + self.nodes.len()
    }

    /// Whether no node was added.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Number of LLM nodes added: the ids they take.
    pub fn num_requests(&self) -> u64 {
        self.requests.len() as u64
    }

    /// About what holding the plan takes: its nodes and requests.
    pub fn held_bytes(&self) -> usize {
        let requests = self.requests.iter();
        let request_bytes = requests.map(|r| size_of::<Request>() + r.heap_bytes());
        self.nodes.len() * size_of::<PlanNode>() + request_bytes.sum::<usize>()
    }

    /// The node at `index` (one added here).
    pub fn node(&self, index: u32) -> &PlanNode {
        &self.nodes[(index - self.offset) as usize]
    }

    /// The session of `header` with these nodes, and the requests of its LLM nodes (ids from
    /// `header.first_id`, the session's line); an LLM node's `request` is the index of its
    /// request plus `base` (where the requests go in a set's list).
    pub fn build(self, header: SessionHeader, base: u32) -> (SessionPlan, Vec<Request>) {
        assert_eq!(self.offset, 0, "a whole plan starts at its first node");
        let mut plan = SessionPlan {
            id: header.id,
            client: header.client,
            arrival_ns: header.arrival_ns,
            deadline_ns: header.deadline_ns,
            nodes: Vec::with_capacity(self.nodes.len()),
            first_id: header.first_id,
            line: header.line,
            llm_nodes: Vec::with_capacity(self.requests.len()),
        };
        let mut requests = Vec::with_capacity(self.requests.len());
        plan.append(self, base, &mut requests);
        (plan, requests)
    }

    /// The request of the LLM node at `index` (one added here).
    pub fn request(&self, index: u32) -> Option<&Request> {
        match self.node(index).kind {
            NodeKind::Llm { request } => Some(&self.requests[request as usize]),
            _ => None,
        }
    }
}

impl SessionPlan {
    /// Adds the nodes of `more` (built [`PlanBuilder::after`] this plan) and appends their
    /// requests to `requests`: ids follow the plan's last request's, the line and arrival
    /// are the session's; an LLM node's `request` indexes `requests` less `base`.
    pub fn append(&mut self, more: PlanBuilder, base: u32, requests: &mut Vec<Request>) {
        assert_eq!(
            more.offset as usize,
            self.nodes.len(),
            "nodes follow the plan's"
        );
        let first = requests.len() as u32 + base;
        let next_id = self.first_id + self.llm_nodes.len() as u64;
        for mut node in more.nodes {
            let index = self.nodes.len() as u32;
            for &p in &node.parents {
                self.nodes[p as usize].children.push(index);
            }
            if let NodeKind::Llm { request } = &mut node.kind {
                *request += first;
                self.llm_nodes.push(index);
            }
            self.nodes.push(node);
        }
        requests.extend(more.requests.into_iter().enumerate().map(|(k, r)| Request {
            id: next_id + k as u64,
            line: self.line,
            arrival_ns: self.arrival_ns,
            ..r
        }));
    }
}

/// What a finished LLM call hands on to the call its session draws next.
#[derive(Debug, Default)]
pub struct HandedOn<'a> {
    /// Its request's token ids, prompt then output (empty where it carried none).
    pub ids: Vec<u32>,
    /// Its block hashes, where its instance handed them on (empty otherwise).
    pub hashes: BlockHashes<'a>,
}

/// A session's [`PlanTail`], as a stream hands it to [`LiveSessions::start`].
pub type Tail<'a> = Box<dyn PlanTail + 'a>;

/// The rest of a session's plan, drawn as the session reaches it rather than when it starts
/// (a conversation's later turns), from the session's own random streams: the same nodes,
/// whenever they are drawn.
pub trait PlanTail: std::fmt::Debug {
    /// An LLM call of the session has finished, handing on `handed` (nothing before the
    /// first call): pushes onto `plan` the nodes that call leads to. `false` once nothing is
    /// left to draw.
    fn extend(&mut self, plan: &mut PlanBuilder, handed: HandedOn<'_>) -> bool;
    /// LLM calls of the whole plan (the ids the session reserves).
    fn planned(&self) -> u32;
}

/// What a node does, as given to [`PlanBuilder::push`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// An LLM call with this request.
    Llm(Request),
    /// A tool call of this latency, ns.
    Tool(Nanos),
    /// A think time of this duration, ns.
    Think(Nanos),
}

/// Where a session comes from, when it is added to a set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionHeader {
    /// Session id.
    pub id: String,
    /// Client of a generated session.
    pub client: Option<String>,
    /// Start time, ns.
    pub arrival_ns: Nanos,
    /// Nodes that would start at or after this time are not started.
    pub deadline_ns: Option<Nanos>,
    /// Id of its first request.
    pub first_id: u64,
    /// Workload line it came from (for error messages).
    pub line: u64,
}

/// Every session of a workload, with the requests of their LLM nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionSet {
    sessions: Vec<SessionPlan>,
    /// Requests of every LLM node, session by session in id order; their arrival is set when
    /// they are released.
    requests: Vec<Request>,
}

impl SessionSet {
    /// No session.
    pub fn new() -> SessionSet {
        SessionSet::default()
    }

    /// Adds a session. Sessions must be added in increasing id order; the requests get ids
    /// from `header.first_id` and the session's line.
    pub fn add(&mut self, header: SessionHeader, plan: PlanBuilder) {
        assert!(
            self.sessions
                .last()
                .is_none_or(|s| s.first_id + s.llm_nodes.len() as u64 <= header.first_id),
            "sessions are added in id order"
        );
        let (plan, requests) = plan.build(header, self.requests.len() as u32);
        self.requests.extend(requests);
        self.sessions.push(plan);
    }

    /// The sessions, in id order.
    pub fn sessions(&self) -> &[SessionPlan] {
        &self.sessions
    }

    /// Requests of every LLM node of every session.
    pub fn requests(&self) -> &[Request] {
        &self.requests
    }

    /// Whether there is no session.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Number of sessions.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// The session holding request `id` and the index of its node, if a session holds it.
    pub fn locate(&self, id: u64) -> Option<(usize, u32)> {
        // Sessions end in id order; skip those ending at or before `id` (sessions without an
        // LLM call end where they start).
        let s = self
            .sessions
            .partition_point(|s| s.first_id + s.llm_nodes.len() as u64 <= id);
        let session = self.sessions.get(s)?;
        let k = id.checked_sub(session.first_id)? as usize;
        Some((s, *session.llm_nodes.get(k)?))
    }

    /// Session id and step label of request `id`, if a session holds it.
    pub fn label(&self, id: u64) -> Option<(&str, &str)> {
        let (s, node) = self.locate(id)?;
        let session = &self.sessions[s];
        Some((&session.id, &session.nodes[node as usize].label))
    }

    /// Moves every session's arrival through `f`, e.g. to compress a trace; the requests
    /// move with their sessions. Deadlines stay: they are the end of the experiment.
    pub fn retime(&mut self, mut f: impl FnMut(Nanos) -> Nanos) {
        for s in &mut self.sessions {
            s.arrival_ns = f(s.arrival_ns);
            for &n in &s.llm_nodes {
                if let NodeKind::Llm { request } = s.nodes[n as usize].kind {
                    self.requests[request as usize].arrival_ns = s.arrival_ns;
                }
            }
        }
    }
}
