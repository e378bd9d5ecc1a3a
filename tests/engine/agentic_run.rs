//! Sessions through the engine: the three example workflows and conversations keep their
//! timelines (each step arrives when its parents have finished, plus the sampled tool latency
//! or think time), and the invariants hold: causality (INV-A1), fan-in exactly once (INV-A2),
//! loop bound (INV-A3), completeness or horizon interruption (INV-A4), non-negative tool
//! latency (INV-A5), request conservation and determinism.

use crate::cluster_fixture as fixture;

use blis_cosim::Nanos;
use blis_cosim::engine::{self, RunOutcome};
use blis_cosim::latency::LatencyBackend;
use blis_cosim::router::{Router, RoutingPolicy};
use blis_cosim::workload::Workload;
use blis_cosim::workload::sessions::{NodeKind, NodeStatus, SessionOutcome, SessionRegistry};
use blis_cosim::workload::spec::{
    MAX_SESSION_TOKEN_IDS, Overrides, WorkloadSpec, generate_workload, scenario,
};
use fixture::{Finished, LinearBackend, Recorder, setup};
use std::collections::BTreeMap;

fn scenario_workload(name: &str, sessions: u64, horizon_us: Option<u64>) -> Workload {
    let mut spec = scenario(name).unwrap().spec().unwrap();
    if horizon_us.is_some() {
        spec.horizon_us = horizon_us;
    }
    let overrides = Overrides {
        num_requests: Some(sessions),
        seed: None,
        max_requests: None,
    };
    generate_workload(&spec, overrides).unwrap()
}

/// What a run left: the finished requests by id, the engine's outcome, and the sessions'.
struct Run<'w> {
    finished: BTreeMap<u64, Finished>,
    outcome: RunOutcome,
    registry: SessionRegistry<'w>,
}

impl Run<'_> {
    fn sessions(&self) -> Vec<SessionOutcome<'_>> {
        self.registry.outcomes()
    }
}

/// Runs `w` on two instances of a linear test backend.
fn simulate(w: &Workload, max_in_flight: Option<usize>) -> Run<'_> {
    let setups = [setup("m", 8_000), setup("m", 8_000)];
    let mut backends = [
        LinearBackend { per_token: 20 },
        LinearBackend { per_token: 20 },
    ];
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut router = Router::new(RoutingPolicy::Load, 0);
    let mut registry = SessionRegistry::new(&w.sessions);
    let initial = registry.initial_requests(&w.requests);
    let mut rec = Recorder::default();
    let (dyn_injector, dyn_max_in_flight) = (&mut registry, max_in_flight);
    let outcome = blis_cosim::engine::simulate(
        blis_cosim::engine::Run::new(&initial, &setups).max_in_flight(dyn_max_in_flight),
        engine::Services::new(&mut dyns, &mut router, &mut rec).with_injector(dyn_injector),
    )
    .unwrap();
    let mut finished = BTreeMap::new();
    for f in rec.finished {
        assert!(
            finished.insert(f.id, f).is_none(),
            "request {} finished twice",
            f.id
        );
    }
    Run {
        finished,
        outcome,
        registry,
    }
}

/// Replays every session's plan against the recorded requests: each node is ready when its
/// parents are done (a root at the session's arrival); an LLM call arrives then (`exact`, in
/// trace mode) or later (concurrency mode); a tool call or think time ends its sampled
/// duration after it is ready; nothing ready at or after the deadline runs, everything
/// ready before it does. Returns how many LLM calls ran.
fn check_timeline(w: &Workload, run: &Run<'_>, exact: bool) -> u64 {
    let mut ran = 0;
    for (s, plan) in w.sessions.sessions().iter().enumerate() {
        let mut end: Vec<Option<Nanos>> = vec![None; plan.nodes.len()];
        for (n, node) in plan.nodes.iter().enumerate() {
            let Some(ends) = node
                .parents
                .iter()
                .map(|&p| end[p as usize])
                .collect::<Option<Vec<_>>>()
            else {
                assert_ne!(run.registry.timing(s, n as u32).status, NodeStatus::Done);
                continue;
            };
            let ready = ends.into_iter().max().unwrap_or(plan.arrival_ns);
            let cut = plan.deadline_ns.is_some_and(|d| ready >= d);
            match node.kind {
                NodeKind::Llm { request } => {
                    let id = w.sessions.requests()[request as usize].id;
                    let Some(f) = run.finished.get(&id) else {
                        assert!(
                            cut,
                            "{} {}: ready at {ready} but never ran",
                            plan.id, node.label
                        );
                        continue;
                    };
                    assert!(
                        !cut,
                        "{} {}: ran though due after the deadline",
                        plan.id, node.label
                    );
                    if exact {
                        assert_eq!(f.arrival, ready, "{} {}", plan.id, node.label);
                    } else {
                        assert!(f.arrival >= ready, "{} {}", plan.id, node.label);
                    }
                    end[n] = Some(f.end);
                    ran += 1;
                }
                NodeKind::Tool { latency_ns: d } | NodeKind::Think { ns: d } => {
                    if !cut {
                        end[n] = Some(ready + d);
                    }
                }
            }
        }
    }
    ran
}

/// Request conservation: every released request finished, and every planned LLM call was
/// either released or never started.
fn check_conservation(w: &Workload, run: &Run<'_>) {
    let reg = &run.registry;
    assert_eq!(reg.released(), reg.completed());
    let flat = w.requests.len() as u64;
    assert_eq!(run.outcome.finished, flat + reg.released());
    assert_eq!(run.finished.len() as u64, run.outcome.finished);
    let mut never = 0;
    for (s, plan) in w.sessions.sessions().iter().enumerate() {
        for &n in &plan.llm_nodes {
            let status = reg.timing(s, n).status;
            assert_ne!(status, NodeStatus::Running, "{}: still running", plan.id);
            never += u64::from(status != NodeStatus::Done);
        }
    }
    assert_eq!(reg.released() + never, w.sessions.requests().len() as u64);
}

#[test]
fn react_sessions_follow_their_timeline_and_run_every_iteration() {
    let w = scenario_workload("react-search", 12, None);
    let run = simulate(&w, None);
    assert_eq!(check_timeline(&w, &run, true), 12 * 11);
    check_conservation(&w, &run);
    for o in run.sessions() {
        assert!(o.complete);
        assert_eq!((o.loop_iterations, o.llm_calls, o.tool_calls), (5, 11, 5));
        assert_eq!(o.critical_path_ns, o.e2e_ns());
    }
    // INV-A3: no step instance beyond the loop bound.
    let plans = w.sessions.sessions();
    assert!(
        plans
            .iter()
            .flat_map(|p| &p.nodes)
            .all(|n| n.iteration.is_none_or(|k| k < 5))
    );
}

#[test]
fn mcts_evaluates_once_after_all_four_candidates() {
    let w = scenario_workload("mcts-code", 10, None);
    let run = simulate(&w, None);
    assert_eq!(check_timeline(&w, &run, true), 10 * 7);
    check_conservation(&w, &run);
    for (s, plan) in w.sessions.sessions().iter().enumerate() {
        // INV-A2: the fan-in step is one node, started once, after its four parents.
        let evaluate: Vec<u32> = (0..plan.nodes.len() as u32)
            .filter(|&n| plan.nodes[n as usize].label == "evaluate")
            .collect();
        let [e] = evaluate[..] else {
            panic!("one evaluate")
        };
        assert_eq!(plan.nodes[e as usize].parents.len(), 4);
        let last_candidate = plan.nodes[e as usize]
            .parents
            .iter()
            .map(|&p| run.registry.timing(s, p).end_ns)
            .max()
            .unwrap();
        assert_eq!(run.registry.timing(s, e).start_ns, last_candidate);
    }
    for o in run.sessions() {
        assert_eq!((o.fan_out_done, o.fan_out_planned), (4, 4));
        assert_eq!(o.tool_calls, 1);
    }
}

#[test]
fn fork_join_synthesizes_when_the_slowest_tool_returns() {
    let w = scenario_workload("fork-join-research", 20, None);
    let run = simulate(&w, None);
    assert_eq!(check_timeline(&w, &run, true), 20 * 2);
    check_conservation(&w, &run);
    let requests = w.sessions.requests();
    for (plan, o) in w.sessions.sessions().iter().zip(run.sessions()) {
        let tools: Vec<Nanos> = plan
            .nodes
            .iter()
            .filter_map(|n| match n.kind {
                NodeKind::Tool { latency_ns } => Some(latency_ns),
                _ => None,
            })
            .collect();
        assert_eq!(tools.len(), 3);
        assert_eq!(o.tool_wait_ns, tools.iter().sum::<Nanos>());
        let plan_end = run.finished[&plan.first_id].end;
        let synth = run.finished[&(plan.first_id + 1)];
        assert_eq!(synth.arrival, plan_end + tools.iter().max().unwrap());
        // The tools' outputs join synthesize's prompt.
        assert!(
            requests
                .iter()
                .any(|r| r.id == plan.first_id + 1 && r.input_toks > 256)
        );
    }
}

#[test]
fn the_horizon_interrupts_sessions_and_nothing_starts_after_it() {
    // Each session takes a few hundred ms (five searches of 50 ms on average): with the
    // horizon 100 ms after the last session starts, the last ones are cut.
    let probe = scenario_workload("react-search", 12, None);
    let last = probe
        .sessions
        .sessions()
        .iter()
        .map(|s| s.arrival_ns)
        .max()
        .unwrap();
    let horizon_ns = (last / 1_000 + 100_000) * 1_000;
    let w = scenario_workload("react-search", 12, Some(horizon_ns / 1_000));
    let run = simulate(&w, None);
    check_timeline(&w, &run, true);
    check_conservation(&w, &run);
    let outcomes = run.sessions();
    let interrupted = outcomes.iter().filter(|o| !o.complete).count();
    assert!(
        interrupted > 0 && interrupted < outcomes.len(),
        "{interrupted}"
    );
    for (s, (plan, o)) in w.sessions.sessions().iter().zip(&outcomes).enumerate() {
        let cut: Vec<u32> = (0..plan.nodes.len() as u32)
            .filter(|&n| run.registry.timing(s, n).status == NodeStatus::Cut)
            .collect();
        // INV-A4: complete, or interrupted by the horizon (with a step cut at it).
        assert_eq!(o.complete, cut.is_empty(), "{}", plan.id);
        for n in cut {
            assert!(run.registry.timing(s, n).ready_ns >= horizon_ns);
        }
        assert!(o.loop_iterations <= 5);
    }
}

#[test]
fn tool_latencies_are_never_negative() {
    let text = "aggregate_rate: 5\nnum_requests: 8\nclients:\n  - id: a\n    rate_fraction: 1\n    \
        arrival: {process: poisson}\n    agentic:\n      steps:\n        - {id: ask, type: \
        llm_call, input_distribution: {type: constant, params: {value: 20}}, \
        output_distribution: {type: constant, params: {value: 3}}}\n        - {id: tool, type: \
        tool_call, tool: t, depends_on: [ask]}\n        - {id: answer, type: llm_call, \
        depends_on: [tool], input_distribution: {type: constant, params: {value: 20}}, \
        output_distribution: {type: constant, params: {value: 3}}}\n      tools:\n        t: \
        {latency: {type: gaussian, params: {mean: -5000, std_dev: 3000}}}\n";
    let spec = WorkloadSpec::from_yaml(text, "w.yaml").unwrap();
    let w = generate_workload(&spec, Overrides::default()).unwrap();
    for plan in w.sessions.sessions() {
        assert_eq!(plan.nodes[1].kind, NodeKind::Tool { latency_ns: 0 });
    }
    let run = simulate(&w, None);
    assert_eq!(check_timeline(&w, &run, true), 16);
    let err = WorkloadSpec::from_yaml(
        &text.replace("std_dev: 3000", "std_dev: 3000, max: -1"),
        "w.yaml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("holds no duration in µs in [0, 4294967295]"),
        "{err}"
    );
}

#[test]
fn conversations_wait_for_the_think_time_and_draw_their_turns() {
    let text = "aggregate_rate: 4\nnum_requests: 40\nclients:\n  - id: chat\n    rate_fraction: 1\n    \
        prefix_group: sys\n    prefix_length: 32\n    arrival: {process: poisson}\n    \
        input_distribution: {type: uniform, params: {min: 10, max: 60}}\n    \
        output_distribution: {type: uniform, params: {min: 2, max: 20}}\n    follow_up: \
        {probability: 0.6, max_turns: 4, context_growth: accumulate, think_time: {type: \
        exponential, params: {mean: 200000}}}\n  - id: rounds\n    rate_fraction: 1\n    \
        arrival: {process: poisson}\n    input_distribution: {type: constant, params: {value: \
        30}}\n    output_distribution: {type: constant, params: {value: 5}}\n    reasoning: \
        {multi_turn: {max_rounds: 3, think_time_us: 50000}}\n";
    let spec = WorkloadSpec::from_yaml(text, "w.yaml").unwrap();
    let w = generate_workload(&spec, Overrides::default()).unwrap();
    let run = simulate(&w, None);
    check_timeline(&w, &run, true);
    check_conservation(&w, &run);
    let mut turns = BTreeMap::new();
    for (plan, o) in w.sessions.sessions().iter().zip(run.sessions()) {
        if plan.client.as_deref() == Some("rounds") {
            assert_eq!((o.llm_calls, o.think_ns), (3, 100_000_000));
        } else {
            *turns.entry(o.llm_calls).or_insert(0) += 1;
        }
    }
    assert!(
        turns.len() >= 3 && turns.keys().all(|&t| (1..=4).contains(&t)),
        "{turns:?}"
    );
    // Accumulated context: a follow-up's prompt starts with its previous turn's prompt and
    // output, token for token.
    let requests = w.sessions.requests();
    let chat = w
        .sessions
        .sessions()
        .iter()
        .find(|p| p.llm_nodes.len() > 1 && p.client.as_deref() == Some("chat"))
        .unwrap();
    let first = requests.iter().find(|r| r.id == chat.first_id).unwrap();
    let second = requests.iter().find(|r| r.id == chat.first_id + 1).unwrap();
    assert!(second.token_ids.starts_with(&first.token_ids));
    assert_eq!(
        second.input_toks as usize,
        second.token_ids.len() - second.output_toks as usize
    );
}

#[test]
fn accumulated_context_carries_token_ids_without_a_prefix_group() {
    // Neither client is in a prefix group: the turns that carry their context carry token
    // ids (so that the prefix cache can find it), the turns that do not carry none.
    let text = "aggregate_rate: 4\nnum_requests: 20\nclients:\n  - id: chat\n    rate_fraction: 1\n    \
        arrival: {process: poisson}\n    input_distribution: {type: uniform, params: {min: 10, \
        max: 60}}\n    output_distribution: {type: uniform, params: {min: 2, max: 20}}\n    \
        reasoning: {multi_turn: {max_rounds: 3, think_time_us: 50000, context_growth: \
        accumulate}}\n  - id: rounds\n    rate_fraction: 1\n    arrival: {process: poisson}\n    \
        input_distribution: {type: constant, params: {value: 30}}\n    output_distribution: \
        {type: constant, params: {value: 5}}\n    reasoning: {multi_turn: {max_rounds: 3, \
        think_time_us: 50000}}\n";
    let spec = WorkloadSpec::from_yaml(text, "w.yaml").unwrap();
    let w = generate_workload(&spec, Overrides::default()).unwrap();
    let requests = w.sessions.requests();
    let by_id = |id: u64| requests.iter().find(|r| r.id == id).unwrap();
    let (mut carried, mut fresh) = (0, 0);
    for plan in w.sessions.sessions() {
        let calls: Vec<_> = (0..plan.llm_nodes.len() as u64)
            .map(|k| by_id(plan.first_id + k))
            .collect();
        if plan.client.as_deref() == Some("rounds") {
            assert!(calls.iter().all(|r| r.token_ids.is_empty()));
            fresh += 1;
            continue;
        }
        for pair in calls.windows(2) {
            let (before, after) = (pair[0], pair[1]);
            assert_eq!(
                before.token_ids.len(),
                (before.input_toks + before.output_toks) as usize
            );
            assert!(after.token_ids.starts_with(&before.token_ids));
            carried += 1;
        }
    }
    assert!(carried > 0 && fresh > 0, "{carried} {fresh}");
}

#[test]
fn a_session_stops_carrying_token_ids_past_its_budget() {
    // Turns of 100,000 prompt tokens, each carrying the ones before: the ids a session draws
    // grow with the square of its turns, so its later turns carry none once its calls would
    // draw more than MAX_SESSION_TOKEN_IDS; the sizes are drawn all the same.
    let text = "aggregate_rate: 1\nnum_requests: 1\nclients:\n  - id: chat\n    rate_fraction: 1\n    \
        arrival: {process: poisson}\n    input_distribution: {type: constant, params: {value: \
        100000}}\n    output_distribution: {type: constant, params: {value: 1000}}\n    \
        reasoning: {multi_turn: {max_rounds: 12, think_time_us: 1000, context_growth: \
        accumulate}}\n";
    let spec = WorkloadSpec::from_yaml(text, "w.yaml").unwrap();
    let w = generate_workload(&spec, Overrides::default()).unwrap();
    let turns = w.sessions.requests();
    assert_eq!(turns.len(), 12);
    let mut drawn = 0;
    let carried: Vec<bool> = turns
        .iter()
        .map(|r| {
            let n = (r.input_toks + r.output_toks) as usize;
            if !r.token_ids.is_empty() {
                assert_eq!(r.token_ids.len(), n);
                drawn += n;
            }
            !r.token_ids.is_empty()
        })
        .collect();
    // 101,000 ids, then 202,000, ...: the first five turns draw 1,515,000, the sixth would
    // pass 2,097,152.
    assert_eq!(carried, [vec![true; 5], vec![false; 7]].concat());
    assert!(drawn <= MAX_SESSION_TOKEN_IDS);
    assert_eq!(turns[11].input_toks, 11 * 101_000 + 100_000);
}

#[test]
fn concurrency_mode_still_honours_tool_latencies() {
    let mut w = scenario_workload("mcts-code", 8, None);
    let first = w.first_arrival().unwrap();
    w.retime(|_| first);
    let run = simulate(&w, Some(3));
    check_timeline(&w, &run, false);
    check_conservation(&w, &run);
    let mut events: Vec<(Nanos, i32)> = Vec::new();
    for f in run.finished.values() {
        events.push((f.arrival, 1));
        events.push((f.end, -1));
    }
    events.sort();
    let mut in_flight = 0;
    for (_, delta) in events {
        in_flight += delta;
        assert!(in_flight <= 3);
    }
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let a = scenario_workload("mcts-code", 6, None);
    let b = scenario_workload("mcts-code", 6, None);
    assert_eq!(a, b);
    let (ra, rb) = (simulate(&a, None), simulate(&b, None));
    assert_eq!(ra.finished, rb.finished);
    assert_eq!(ra.outcome, rb.outcome);
    assert_eq!(ra.sessions(), rb.sessions());
    let mut spec = scenario("mcts-code").unwrap().spec().unwrap();
    spec.seed += 1;
    let other = generate_workload(
        &spec,
        Overrides {
            num_requests: Some(6),
            seed: None,
            max_requests: None,
        },
    )
    .unwrap();
    assert_ne!(other.sessions.requests(), a.sessions.requests());
}
