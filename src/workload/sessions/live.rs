//! Sessions that join the run as it reaches them: a generated workload's sessions are
//! planned when their first arrival comes (see `workload::spec`'s session stream), run as
//! [`super::SessionRegistry`] runs them, and dropped once nothing of them can change, keeping
//! only their outcome. Memory follows the sessions in flight, not the workload.
//!
//! The stream, the engine's injector and the run's observer all reach the sessions: they
//! share them ([`SharedSessions`]). A session whose plan has a tail ([`super::PlanTail`]: a
//! conversation's later turns) is drawn further as its LLM calls finish, so it holds the turns
//! it has reached, not those still to come; a finished LLM call's request lets its token ids
//! go (the engine has its own copy). A session ends when none of its LLM calls is running and
//! the observer has seen every one that finished (the observer names a request's session
//! and step in the request CSV, after the injector has heard of it).

use super::fold::Folded;
use super::outcome::outcome_of;
use super::registry::{Ready, SessionRun, fresh_timing, fresh_timings};
use super::{
    HandedOn, NodeKind, NodeTiming, PlanBuilder, SessionHeader, SessionOutcome, SessionPlan, Tail,
};
use crate::Nanos;
use crate::metrics::RequestRecord;
use crate::workload::BlockHashes;
use crate::workload::{Injector, Request, RequestClasses};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// [`LiveSessions`] as the stream, the injector and the observer of one run share them.
pub type SharedSessions<'c> = Rc<RefCell<LiveSessions<'c>>>;

/// The sessions of a run started so far: those in flight, by the id of their first request
/// not folded away (a chain's moves on as its turns fold), and the outcome of every one once
/// it has ended. Sessions may start in any order (a dataset's start in arrival order, not
/// always that of their ids); their outcomes are listed by id.
#[derive(Debug, Default)]
pub struct LiveSessions<'c> {
    /// Each request's client profile (its network), when the workload names clients.
    clients: Option<&'c RequestClasses>,
    /// Whether sessions are kept after they start (a dry pass keeps none).
    keep: bool,
    /// The sessions in flight by their first request's id, boxed: a request's end takes
    /// its session out and puts it back, which moves a pointer, not the session.
    live: BTreeMap<u64, Box<Live<'c>>>,
    /// One entry per session started: the id of its first request when it started, and its
    /// outcome once it has ended.
    ended: Vec<(u64, Option<Ended>)>,
    ready: Ready,
}

/// A session in flight.
#[derive(Debug)]
struct Live<'c> {
    /// Its place among the sessions started.
    index: usize,
    plan: SessionPlan,
    /// The rest of its plan, not drawn yet.
    tail: Option<Tail<'c>>,
    /// LLM calls of its whole plan.
    planned: u32,
    /// Its nodes before the latest LLM call, folded, when its plan is a chain (drawn by a
    /// tail); `None` otherwise.
    folded: Option<Folded>,
    requests: Vec<Request>,
    nodes: Vec<NodeTiming>,
    /// LLM calls released and not finished.
    running: u64,
    /// LLM calls finished, and those of them the observer has seen.
    finished: u64,
    observed: u64,
}

/// An ended session's outcome, holding its names.
#[derive(Debug)]
struct Ended {
    id: Box<str>,
    client: Option<Box<str>>,
    /// The outcome, its names left empty.
    outcome: SessionOutcome<'static>,
}

impl<'c> LiveSessions<'c> {
    /// No session yet; a request's network is read from `clients`.
    pub fn new(clients: Option<&'c RequestClasses>) -> LiveSessions<'c> {
        LiveSessions {
            clients,
            keep: true,
            ..LiveSessions::default()
        }
    }

    /// Sessions that are started and forgotten: what each starts with, nothing more (to
    /// learn a workload's first requests without running it).
    pub fn dry(clients: Option<&'c RequestClasses>) -> LiveSessions<'c> {
        LiveSessions {
            clients,
            ..LiveSessions::default()
        }
    }

    /// Starts the session of `header` with the nodes of `plan` at its arrival: appends to
    /// `out` the requests it starts with (its roots, and those after tool calls or think
    /// times only). `tail` draws the rest of the plan as its LLM calls finish. Sessions start
    /// in id order.
    pub fn start(
        &mut self,
        header: SessionHeader,
        plan: PlanBuilder,
        tail: Option<Tail<'c>>,
        out: &mut Vec<Request>,
    ) {
        let (plan, requests) = plan.build(header, 0);
        let planned = tail
            .as_ref()
            .map_or(plan.llm_nodes.len() as u32, |t| t.planned());
        let mut nodes: Vec<NodeTiming> = fresh_timings(&plan).collect();
        let running = self
            .run(&plan, &requests, &mut nodes)
            .start(&mut self.ready, out);
        if !self.keep {
            return;
        }
        let live = Box::new(Live {
            index: self.ended.len(),
            plan,
            folded: tail.is_some().then(Folded::default),
            tail,
            planned,
            requests,
            nodes,
            running,
            finished: 0,
            observed: 0,
        });
        self.ended.push((live.plan.first_id, None));
        self.end_if_done(live);
    }

    /// The run of `plan` with these requests and node timings.
    fn run<'r>(
        &self,
        plan: &'r SessionPlan,
        requests: &'r [Request],
        nodes: &'r mut [NodeTiming],
    ) -> SessionRun<'r>
    where
        'c: 'r,
    {
        SessionRun {
            plan,
            requests,
            nodes,
            clients: self.clients,
        }
    }

    /// Keeps `live` in flight, or records its outcome when nothing of it can change (no LLM
    /// call running) and the observer has seen all it finished.
    fn end_if_done(&mut self, live: Box<Live<'c>>) {
        if live.running > 0 || live.observed < live.finished {
            self.live.insert(live.plan.first_id, live);
            return;
        }
        let outcome = live.outcome();
        self.ended[live.index].1 = Some(Ended {
            id: outcome.id.into(),
            client: outcome.client.map(Into::into),
            outcome: SessionOutcome {
                id: "",
                client: None,
                ..outcome
            },
        });
    }

    /// The session in flight holding request `id`, taken out, and its LLM node.
    fn take(&mut self, id: u64) -> Option<(Box<Live<'c>>, u32)> {
        let (&first, live) = self.live.range(..=id).next_back()?;
        let node = *live.plan.llm_nodes.get((id - first) as usize)?;
        Some((self.live.remove(&first)?, node))
    }

    /// The observer has seen request `id` finish (after the injector heard of it): its
    /// session ends if that was the last thing it waited for.
    pub fn observed(&mut self, id: u64) {
        if let Some((mut live, _)) = self.take(id) {
            live.observed += 1;
            self.end_if_done(live);
        }
    }

    /// Session id and step label of request `id`, if a session in flight holds it.
    pub fn label(&self, id: u64) -> Option<(&str, &str)> {
        let (&first, live) = self.live.range(..=id).next_back()?;
        let node = *live.plan.llm_nodes.get((id - first) as usize)?;
        Some((&live.plan.id, &live.plan.nodes[node as usize].label))
    }

    /// Sessions held: in flight (started and not ended).
    pub fn held(&self) -> usize {
        self.live.len()
    }

    /// Plan nodes held by the sessions in flight (a conversation holds those from its latest
    /// LLM call on, not its turns to come or those done).
    pub fn held_nodes(&self) -> usize {
        self.live.values().map(|l| l.plan.nodes.len()).sum()
    }

    /// Whether a session was started.
    pub fn is_empty(&self) -> bool {
        self.ended.is_empty()
    }

    /// Every session's outcome, by the id of its first request: those ended and those still
    /// in flight (none once every request of the run has ended, finished or unserved).
    pub fn outcomes(&self) -> Vec<SessionOutcome<'_>> {
        // In flight by their place among those started: a chain's key in `live` moves on as
        // it folds, its place does not.
        let mut in_flight: Vec<Option<&Live<'c>>> = vec![None; self.ended.len()];
        for live in self.live.values() {
            in_flight[live.index] = Some(&**live);
        }
        let mut by_id: Vec<usize> = (0..self.ended.len()).collect();
        // Stable, and already in order where sessions started in id order.
        by_id.sort_by_key(|&k| self.ended[k].0);
        by_id
            .into_iter()
            .map(|k| match &self.ended[k].1 {
                Some(e) => SessionOutcome {
                    id: &e.id,
                    client: e.client.as_deref(),
                    ..e.outcome.clone()
                },
                None => in_flight[k]
                    .expect("a session not ended is in flight")
                    .outcome(),
            })
            .collect()
    }
}

impl Injector for SharedSessions<'_> {
    /// Nothing is known ahead: each request is checked when it joins the run.
    fn deferred(&self) -> &[Request] {
        &[]
    }

    /// Sessions are planned as their first arrival comes: any may release more.
    fn may_release(&self) -> bool {
        true
    }

    fn request_finished(
        &mut self,
        record: &RequestRecord<'_>,
        hashes: BlockHashes<'_>,
        out: &mut Vec<Request>,
    ) {
        let mut sessions = self.borrow_mut();
        let Some((mut live, node)) = sessions.take(record.request_id) else {
            return;
        };
        let node = live.finished(node, hashes);
        let released = {
            let mut run = sessions.run(&live.plan, &live.requests, &mut live.nodes);
            run.request_finished(node, record, &mut sessions.ready, out)
        };
        live.running = live.running - 1 + released;
        live.finished += 1;
        sessions.end_if_done(live);
    }

    fn request_dropped(&mut self, id: u64, at: Nanos) {
        let mut sessions = self.borrow_mut();
        let Some((mut live, node)) = sessions.take(id) else {
            return;
        };
        let mut run = sessions.run(&live.plan, &live.requests, &mut live.nodes);
        run.request_dropped(node, at);
        // What waits on it never starts: nothing more is drawn either.
        live.tail = None;
        live.running -= 1;
        sessions.end_if_done(live);
    }
}

impl Live<'_> {
    /// Its LLM node `node` has finished, its request's block hashes `hashes`: the request
    /// lets its token ids and known hashes go, a chain folds the nodes before it once the
    /// observer has seen every call among them, and the tail draws what that call leads to,
    /// handed the ids and `hashes`. Returns the node's index after the fold.
    fn finished(&mut self, mut node: u32, hashes: BlockHashes<'_>) -> u32 {
        let mut handed = HandedOn {
            ids: Vec::new(),
            hashes,
        };
        if let NodeKind::Llm { request } = self.plan.nodes[node as usize].kind {
            let request = &mut self.requests[request as usize];
            handed.ids = std::mem::take(&mut request.token_ids);
            request.known_hashes = None;
        }
        if let Some(folded) = &mut self.folded
            && node > 0
            && self.observed == self.finished
        {
            let (plan, requests, nodes) = (&mut self.plan, &mut self.requests, &mut self.nodes);
            folded.fold(node as usize, plan, requests, nodes);
            node = 0;
        }
        let Some(tail) = &mut self.tail else {
            return node;
        };
        let mut more = PlanBuilder::after(&self.plan);
        let left = tail.extend(&mut more, handed);
        let from = self.plan.nodes.len();
        self.plan.append(more, 0, &mut self.requests);
        let arrival_ns = self.plan.arrival_ns;
        self.nodes.extend(
            self.plan.nodes[from..]
                .iter()
                .map(|n| fresh_timing(n, arrival_ns)),
        );
        if !left {
            self.tail = None;
        }
        node
    }

    /// Its outcome so far (LLM calls planned: those of the whole plan).
    fn outcome(&self) -> SessionOutcome<'_> {
        let outcome = match &self.folded {
            Some(f) => f.outcome(&self.plan, &self.nodes),
            None => outcome_of(&self.plan, &self.nodes),
        };
        SessionOutcome {
            llm_planned: self.planned,
            ..outcome
        }
    }
}
