//! Issue 36: a spec's sessions drawn as the run reaches them (`SessionStream`, sessions
//! planned when they start and let go when they end) run exactly as the same workload
//! generated whole and listed before the run: the same requests finish at the same times on
//! the same instances, and every session has the same outcome. Agentic workflows (fan-out,
//! loops, tool calls), conversations, closed-loop users over a client network, flat requests
//! whose uploads let short prompts overtake long ones, with and without a horizon cutting
//! sessions short, in trace and concurrency mode.

use crate::cluster_fixture as fixture;

use blis_cosim::engine::{self, Observer, RunOutcome};
use blis_cosim::latency::LatencyBackend;
use blis_cosim::metrics::RequestRecord;
use blis_cosim::observe::StepEvent;
use blis_cosim::router::{Router, RoutingPolicy};
use blis_cosim::scheduler::block_hashes;
use blis_cosim::workload::sessions::{LiveSessions, SessionRegistry, SharedSessions};
use blis_cosim::workload::spec::{
    Overrides, SessionStream, WorkloadSpec, generate_workload, scenario, stream_workload,
};
use blis_cosim::workload::{BlockHashes, Injector, Request};
use fixture::{Finished, LinearBackend, Recorder, setup};
use std::cell::RefCell;
use std::rc::Rc;

/// What a run left, its sessions' outcomes as text (they borrow from what ran them).
#[derive(Debug, PartialEq)]
struct Ran {
    finished: Vec<Finished>,
    /// Session id and step of each finished request (in finishing order), as the request CSV
    /// names them.
    labels: Vec<Option<(String, String)>>,
    outcome: RunOutcome,
    sessions: Vec<String>,
}

fn run_with(
    run: engine::Run<'_>,
    injector: &mut dyn blis_cosim::workload::Injector,
    observer: &mut dyn Observer,
) -> RunOutcome {
    let mut backends = [
        LinearBackend { per_token: 20 },
        LinearBackend { per_token: 20 },
    ];
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut router = Router::new(RoutingPolicy::Load, 0);
    let services = engine::Services::new(&mut dyns, &mut router, observer).with_injector(injector);
    engine::simulate(run, services).unwrap()
}

/// The workload generated whole, its sessions' first requests listed before the run.
fn listed(spec: &WorkloadSpec, overrides: Overrides, max_in_flight: Option<usize>) -> Ran {
    let setups = [setup("m", 8_000), setup("m", 8_000)];
    let w = generate_workload(spec, overrides).unwrap();
    let mut registry = SessionRegistry::new(&w.sessions).with_clients(w.classes.as_ref());
    let initial = registry.initial_requests(&w.requests);
    let mut rec = Recorder::default();
    let run = engine::Run::new(&initial, &setups).max_in_flight(max_in_flight);
    let outcome = run_with(run, &mut registry, &mut rec);
    let sessions = registry
        .outcomes()
        .iter()
        .map(|o| format!("{o:?}"))
        .collect();
    let labels = rec
        .finished
        .iter()
        .map(|f| owned(w.sessions.label(f.id)))
        .collect();
    Ran {
        finished: rec.finished,
        labels,
        outcome,
        sessions,
    }
}

/// An observer that tells the live sessions what it has seen, as the runner's does.
struct Seeing<'w> {
    rec: Recorder,
    labels: Vec<Option<(String, String)>>,
    live: SharedSessions<'w>,
    /// Most plan nodes the sessions in flight held after a request finished.
    most_nodes: usize,
}

fn owned(label: Option<(&str, &str)>) -> Option<(String, String)> {
    label.map(|(s, l)| (s.to_owned(), l.to_owned()))
}

impl Observer for Seeing<'_> {
    fn request_finished(&mut self, r: &RequestRecord<'_>) -> anyhow::Result<()> {
        self.rec.request_finished(r)?;
        self.labels
            .push(owned(self.live.borrow().label(r.request_id)));
        self.live.borrow_mut().observed(r.request_id);
        self.most_nodes = self.most_nodes.max(self.live.borrow().held_nodes());
        Ok(())
    }

    fn step_finished(
        &mut self,
        s: &StepEvent<'_>,
        b: &mut dyn LatencyBackend,
    ) -> anyhow::Result<()> {
        self.rec.step_finished(s, b)
    }
}

/// The same workload streamed; also how many sessions are still held after the run and the
/// most plan nodes they held during it.
fn streamed(
    spec: &WorkloadSpec,
    overrides: Overrides,
    max_in_flight: Option<usize>,
) -> (Ran, usize, usize) {
    let setups = [setup("m", 8_000), setup("m", 8_000)];
    let (plan, generator) = stream_workload(spec, overrides).unwrap();
    let live: SharedSessions<'_> = Rc::new(RefCell::new(LiveSessions::new(Some(&plan.classes))));
    let stream = SessionStream::new(generator, Rc::clone(&live), Box::new(|t| t));
    let run = engine::Run::new(&[], &setups)
        .streamed(Box::new(stream))
        .max_in_flight(max_in_flight);
    let mut seeing = Seeing {
        rec: Recorder::default(),
        labels: Vec::new(),
        live: Rc::clone(&live),
        most_nodes: 0,
    };
    let outcome = run_with(run, &mut Rc::clone(&live), &mut seeing);
    let live = live.borrow();
    let sessions: Vec<String> = live.outcomes().iter().map(|o| format!("{o:?}")).collect();
    let held = live.held();
    let most_nodes = seeing.most_nodes;
    let ran = Ran {
        finished: seeing.rec.finished,
        labels: seeing.labels,
        outcome,
        sessions,
    };
    (ran, held, most_nodes)
}

fn overrides(n: Option<u64>) -> Overrides {
    Overrides {
        num_requests: n,
        seed: None,
        max_requests: None,
    }
}

/// Listed and streamed runs of `spec` agree, in trace and concurrency mode; returns the
/// sessions still held after the streamed trace-mode run.
fn agree(spec: &WorkloadSpec, n: Option<u64>) -> usize {
    let mut held = 0;
    for max_in_flight in [None, Some(3)] {
        let whole = listed(spec, overrides(n), max_in_flight);
        let (drawn, left, _) = streamed(spec, overrides(n), max_in_flight);
        assert!(!whole.finished.is_empty());
        assert!(whole.labels.iter().any(Option::is_some));
        assert_eq!(whole, drawn, "{} at {max_in_flight:?}", spec.source_name);
        if max_in_flight.is_none() {
            held = left;
        }
    }
    held
}

#[test]
fn streamed_agentic_sessions_run_as_listed_ones_and_are_let_go() {
    for name in ["react-search", "mcts-code", "fork-join-research"] {
        let spec = scenario(name).unwrap().spec().unwrap();
        assert_eq!(
            agree(&spec, Some(12)),
            0,
            "{name}: every session ended and was let go"
        );
    }
}

#[test]
fn streamed_sessions_cut_by_the_horizon_run_as_listed_ones() {
    let mut spec = scenario("react-search").unwrap().spec().unwrap();
    spec.horizon_us = Some(3_000_000);
    let held = agree(&spec, Some(12));
    // Sessions the horizon cut end too: nothing of them can change.
    assert_eq!(held, 0);
}

#[test]
fn streamed_conversations_and_closed_loop_users_run_as_listed_ones() {
    // Closed-loop users over a 40 ms link, lifecycle windows, cohorts (BLIS's example), to
    // its horizon.
    let spec = scenario("coding-assistant").unwrap().spec().unwrap();
    agree(&spec, None);
    let text = "aggregate_rate: 4\nnum_requests: 40\nclients:\n  - id: chat\n    rate_fraction: 1\n    \
        prefix_group: sys\n    prefix_length: 32\n    arrival: {process: poisson}\n    \
        network: {rtt_ms: 30, bandwidth_mbps: 10}\n    \
        input_distribution: {type: uniform, params: {min: 10, max: 60}}\n    \
        output_distribution: {type: uniform, params: {min: 2, max: 20}}\n    follow_up: \
        {probability: 0.6, max_turns: 4, context_growth: accumulate, think_time: {type: \
        exponential, params: {mean: 200000}}}\n  - id: flat\n    rate_fraction: 1\n    \
        arrival: {process: gamma, cv: 3}\n    network: {rtt_ms: 20, bandwidth_mbps: 1}\n    \
        input_distribution: {type: uniform, params: {min: 10, max: 3000}}\n    \
        output_distribution: {type: constant, params: {value: 5}}\n";
    let spec = WorkloadSpec::from_yaml(text, "w.yaml").unwrap();
    assert_eq!(agree(&spec, Some(40)), 0);
}

/// Three conversations of 150 turns (accumulated context with token ids over a client
/// network, exponential think times), and closed-loop users of 60 requests each.
fn long_conversations(horizon: Option<u64>) -> WorkloadSpec {
    let horizon = horizon.map_or(String::new(), |h| format!("horizon: {h}\n"));
    let text = format!(
        "aggregate_rate: 1\nnum_requests: 3\n{horizon}clients:\n  - id: chat\n    \
         rate_fraction: 1\n    prefix_group: sys\n    prefix_length: 16\n    arrival: \
         {{process: poisson}}\n    network: {{rtt_ms: 30, bandwidth_mbps: 10}}\n    \
         input_distribution: {{type: uniform, params: {{min: 5, max: 30}}}}\n    \
         output_distribution: {{type: uniform, params: {{min: 2, max: 9}}}}\n    follow_up: \
         {{probability: 1, max_turns: 150, context_growth: accumulate, think_time: {{type: \
         exponential, params: {{mean: 100000}}}}}}\n"
    );
    WorkloadSpec::from_yaml(&text, "w.yaml").unwrap()
}

#[test]
fn a_conversation_holds_the_turn_it_has_reached_not_its_whole_plan() {
    let users = "num_requests: 240\nclients:\n  - id: users\n    concurrency: 4\n    \
        think_time: {type: exponential, params: {mean: 50000}}\n    \
        input_distribution: {type: uniform, params: {min: 5, max: 300}}\n    \
        output_distribution: {type: uniform, params: {min: 2, max: 9}}\n";
    let closed = WorkloadSpec::from_yaml(users, "u.yaml").unwrap();
    let cut = long_conversations(Some(4_000_000));
    for (spec, sessions) in [(long_conversations(None), 3), (cut, 3), (closed, 4)] {
        for max_in_flight in [None, Some(2)] {
            let whole = listed(&spec, overrides(None), max_in_flight);
            let (drawn, left, most) = streamed(&spec, overrides(None), max_in_flight);
            assert_eq!(whole, drawn, "{} at {max_in_flight:?}", spec.source_name);
            assert_eq!(left, 0, "every session let go");
            // A whole plan holds two nodes a turn (the call and its think time): 119 and
            // more for each session here. Drawn a turn at a time and folded, a session
            // holds its latest turn and the next one.
            assert!(
                most <= 4 * sessions,
                "{most} nodes held by {sessions} sessions ({max_in_flight:?})"
            );
        }
    }
}

/// The live sessions, checking what each finished request hands on to the turn it releases.
struct HandOnCheck<'w> {
    live: SharedSessions<'w>,
    /// Released turns that started from handed-on hashes, and their blocks handed on.
    handed: u64,
    blocks: u64,
    /// Full prompt blocks of every released turn.
    prompt_blocks: u64,
}

impl Injector for HandOnCheck<'_> {
    fn deferred(&self) -> &[Request] {
        &[]
    }

    fn may_release(&self) -> bool {
        true
    }

    fn request_finished(
        &mut self,
        record: &RequestRecord<'_>,
        hashes: BlockHashes<'_>,
        out: &mut Vec<Request>,
    ) {
        let before = out.len();
        self.live.request_finished(record, hashes, out);
        for r in &out[before..] {
            self.prompt_blocks += u64::from(r.input_toks / 16);
            let Some(known) = &r.known_hashes else {
                continue;
            };
            // What it starts from is what hashing its own ids gives, blocks of its prompt.
            let mut own = Vec::new();
            block_hashes(&r.token_ids, 16, &mut own);
            assert_eq!(known.block_size, 16);
            assert!(known.hashes.len() <= (r.input_toks / 16) as usize);
            assert_eq!(*known.hashes, own[..known.hashes.len()], "request {}", r.id);
            self.handed += 1;
            self.blocks += known.hashes.len() as u64;
        }
    }

    fn request_dropped(&mut self, id: u64, at: blis_cosim::Nanos) {
        self.live.request_dropped(id, at);
    }
}

#[test]
fn a_conversation_turn_starts_from_the_block_hashes_its_previous_turn_hands_on() {
    let spec = long_conversations(None);
    let (whole, _, _) = streamed(&spec, overrides(None), None);
    let setups = [setup("m", 8_000), setup("m", 8_000)];
    let (plan, generator) = stream_workload(&spec, overrides(None)).unwrap();
    let live: SharedSessions<'_> = Rc::new(RefCell::new(LiveSessions::new(Some(&plan.classes))));
    let stream = SessionStream::new(generator, Rc::clone(&live), Box::new(|t| t));
    let run = engine::Run::new(&[], &setups).streamed(Box::new(stream));
    let mut seeing = Seeing {
        rec: Recorder::default(),
        labels: Vec::new(),
        live: Rc::clone(&live),
        most_nodes: 0,
    };
    let mut check = HandOnCheck {
        live: Rc::clone(&live),
        handed: 0,
        blocks: 0,
        prompt_blocks: 0,
    };
    let outcome = run_with(run, &mut check, &mut seeing);
    // The same run as the streamed one above.
    assert_eq!(outcome, whole.outcome);
    assert_eq!(seeing.rec.finished, whole.finished);
    // 3 sessions of 150 turns: every turn after the first that fills a block starts from
    // the turn before it, and most of its prompt's blocks are handed on, not hashed again.
    assert!(
        check.handed > 3 * 140,
        "{} turns handed hashes",
        check.handed
    );
    assert!(
        check.blocks * 10 > check.prompt_blocks * 9,
        "{} of {} prompt blocks handed on",
        check.blocks,
        check.prompt_blocks
    );
}
