//! The engine with several instances: conservation, ordering of same-time events, routing by
//! model and capacity, heterogeneous step times and determinism.

use crate::cluster_fixture as fixture;

use blis_cosim::choice::Choice;
use blis_cosim::engine::{InstanceSetup, RunOutcome, SimError};
use blis_cosim::engine::{Run, Services, simulate};
use blis_cosim::latency::LatencyBackend;
use blis_cosim::router::{Router, RoutingPolicy};
use blis_cosim::workload::Request;
use fixture::{Finished, LinearBackend, Recorder, request, setup, workload};

fn policies() -> Vec<RoutingPolicy> {
    vec![
        RoutingPolicy::Load,
        RoutingPolicy::RoundRobin,
        RoutingPolicy::Random,
        RoutingPolicy::LeastLoaded,
        RoutingPolicy::PrefixAffinity,
        RoutingPolicy::weighted("queue=1,running=1,kv=1,prefix=2".parse().unwrap()),
    ]
}

/// Runs `requests` on `setups` (instance `i` priced at `per_token[i]` per token).
fn run(
    requests: &[Request],
    setups: &[InstanceSetup],
    per_token: &[u64],
    policy: RoutingPolicy,
    seed: u64,
) -> Result<(RunOutcome, Recorder), SimError> {
    let mut backends: Vec<LinearBackend> = per_token
        .iter()
        .map(|&per_token| LinearBackend { per_token })
        .collect();
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut rec = Recorder::default();
    let out = simulate(
        Run::new(requests, setups),
        Services::new(&mut dyns, &mut Router::new(policy, seed), &mut rec),
    )?;
    Ok((out, rec))
}

#[test]
fn every_request_ends_exactly_once_and_no_instance_runs_two_steps_at_once() {
    // A small pool on instance 2 forces preemptions there.
    let setups = [
        setup("m", 2_000),
        setup("m", 2_000),
        setup("m", 40),
        setup("m", 500),
    ];
    let requests = workload(11, 600, true);
    for policy in policies() {
        let name = policy.name();
        let (out, rec) = run(&requests, &setups, &[10, 10, 10, 20], policy, 3).unwrap();
        let mut ids: Vec<u64> = rec.finished.iter().map(|f| f.id).collect();
        ids.sort_unstable();
        assert_eq!(ids, (0..600).collect::<Vec<_>>(), "{name}");
        assert_eq!(out.finished, 600);
        let per_instance: u64 = out.instances.iter().map(|i| i.finished).sum();
        assert_eq!(per_instance, 600, "{name}");
        assert_eq!(out.steps, rec.steps.len() as u64);
        for id in 0..4 {
            let steps: Vec<_> = rec.steps.iter().filter(|s| s.instance == id).collect();
            assert_eq!(
                steps.len() as u64,
                out.instances[id as usize].steps,
                "{name}"
            );
            for w in steps.windows(2) {
                assert!(
                    w[0].start < w[0].end && w[0].end <= w[1].start,
                    "{name}: {w:?}"
                );
            }
            let done = rec.finished.iter().filter(|f| f.instance == id).count() as u64;
            assert_eq!(done, out.instances[id as usize].finished, "{name}");
        }
        // Completion order across instances: by time, ties by instance id.
        for w in rec.finished.windows(2) {
            let key = |f: &Finished| (f.end, f.instance);
            assert!(key(&w[0]) <= key(&w[1]), "{name}: {w:?}");
        }
        for f in &rec.finished {
            assert!(
                f.arrival < f.first_token && f.first_token <= f.end,
                "{name}: {f:?}"
            );
        }
        assert_eq!(
            out.total_clocks_ns,
            rec.finished.iter().map(|f| f.end).max().unwrap()
        );
        let used: Vec<u64> = out.instances.iter().map(|i| i.finished).collect();
        assert!(
            used.iter().filter(|&&n| n > 0).count() >= 2,
            "{name} spreads: {used:?}"
        );
    }
}

#[test]
fn runs_are_deterministic_and_the_seed_drives_random_routing() {
    let setups = [setup("m", 2_000), setup("m", 2_000), setup("m", 2_000)];
    let requests = workload(5, 300, true);
    let assignment = |policy: RoutingPolicy, seed| {
        let (out, rec) = run(&requests, &setups, &[10, 10, 10], policy, seed).unwrap();
        (out, rec.finished, rec.steps)
    };
    for policy in policies() {
        assert_eq!(
            assignment(policy.clone(), 9),
            assignment(policy.clone(), 9),
            "{policy}"
        );
    }
    let instances = |seed| {
        let mut f = assignment(RoutingPolicy::Random, seed).1;
        f.sort_by_key(|f| f.id);
        f.into_iter().map(|f| f.instance).collect::<Vec<_>>()
    };
    assert_ne!(instances(1), instances(2));
}

#[test]
fn a_step_ending_at_an_arrival_is_applied_before_the_arrival_is_routed() {
    // Instance 0 runs request 0 (40 tokens, one output token, 3 KV blocks) from 0 to
    // 1000 + 10·40 + 100 = 1500. Instance 1 runs request 1 (8 tokens then a long decode, 1 KV
    // block) from 10 on. Request 2 arrives at exactly 1500. After the completion instance 0 is
    // empty and wins least-loaded; were the arrival routed first, both instances would hold
    // one request and instance 1 (fewer blocks) would win.
    let setups = [setup("m", 100), setup("m", 100)];
    let requests = [
        request(0, 0, 40, 1, Vec::new()),
        request(1, 10, 8, 50, Vec::new()),
        request(2, 1_500, 8, 1, Vec::new()),
    ];
    let (_, rec) = run(&requests, &setups, &[10, 10], RoutingPolicy::LeastLoaded, 0).unwrap();
    let first = rec.finished.iter().find(|f| f.id == 0).unwrap();
    assert_eq!((first.instance, first.end), (0, 1_500));
    let third = rec.finished.iter().find(|f| f.id == 2).unwrap();
    assert_eq!(
        third.instance, 0,
        "routed against the state after the completion"
    );
    let step = rec
        .steps
        .iter()
        .find(|s| s.instance == 0 && s.start == 1_500)
        .unwrap();
    assert_eq!(
        step.tokens, 8,
        "instance 0 starts the new request at the same instant"
    );
}

#[test]
fn simultaneous_completions_are_reported_in_instance_id_order() {
    // Instance 2 (model b) starts first, at 0, and ends at 1000 + 1100 + 100 = 2200; instances
    // 0 and 1 (model a) start at 1000 and end at 1000 + 1000 + 100 + 100 = 2200 too.
    let setups = [setup("a", 100), setup("a", 100), setup("b", 100)];
    let mut requests = vec![
        request(0, 0, 110, 1, Vec::new()),
        request(1, 1_000, 10, 1, Vec::new()),
        request(2, 1_000, 10, 1, Vec::new()),
    ];
    requests[0].model = Some("b".into());
    requests[1].model = Some("A".into());
    requests[2].model = Some("org/a".into());
    // Every policy but RAND spreads the two simultaneous requests over instances 0 and 1.
    for policy in policies()
        .into_iter()
        .filter(|p| *p != RoutingPolicy::Random)
    {
        let (out, rec) = run(&requests, &setups, &[10, 10, 10], policy.clone(), 0).unwrap();
        let order: Vec<(u32, u64)> = rec.finished.iter().map(|f| (f.instance, f.end)).collect();
        assert_eq!(order, [(0, 2_200), (1, 2_200), (2, 2_200)], "{policy}");
        assert_eq!(out.total_clocks_ns, 2_200);
    }
}

#[test]
fn requests_go_only_to_instances_that_serve_their_model_and_can_hold_them() {
    let setups = [setup("a", 2_000), setup("b", 2_000), setup("a", 30)];
    let mut requests = workload(3, 200, false);
    for (i, r) in requests.iter_mut().enumerate() {
        r.model = Some(if i % 2 == 0 { "a" } else { "b" }.into());
        r.input_toks = 100;
        r.output_toks = 200; // 19 blocks of 16: fits every instance
    }
    requests[10].input_toks = 400; // 38 blocks: too many for instance 2
    for policy in policies() {
        let (_, rec) = run(&requests, &setups, &[10, 10, 10], policy.clone(), 0).unwrap();
        for f in &rec.finished {
            let expected: &[u32] = if f.id % 2 == 0 { &[0, 2] } else { &[1] };
            assert!(expected.contains(&f.instance), "{policy}: {f:?}");
        }
        let long = rec.finished.iter().find(|f| f.id == 10).unwrap();
        assert_eq!(long.instance, 0, "{policy}");
    }
    requests[7].model = Some("c".into());
    let err = run(&requests, &setups, &[10, 10, 10], RoutingPolicy::Load, 0).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("request 7")
            && text.contains("no instance serves it")
            && text.contains("a, b"),
        "{text}"
    );
    requests[7].model = Some("a".into());
    requests[7].input_toks = 40_000; // more than any instance's cache
    let text = run(&requests, &setups, &[10, 10, 10], RoutingPolicy::Load, 0)
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("request 7") && text.contains("KV blocks"),
        "{text}"
    );
}

#[test]
fn slower_hardware_takes_longer_for_the_same_work() {
    // Two instances, identical but for the backend's cost per token; round robin gives each
    // the same requests in turn.
    let setups = [setup("m", 2_000), setup("m", 2_000)];
    let mut requests = Vec::new();
    for pair in 0..50u64 {
        for k in 0..2 {
            requests.push(request(2 * pair + k, pair * 1_000_000, 100, 20, Vec::new()));
        }
    }
    let (_, rec) = run(&requests, &setups, &[10, 25], RoutingPolicy::RoundRobin, 0).unwrap();
    for pair in 0..50 {
        let f = |id| rec.finished.iter().find(|f| f.id == id).unwrap();
        let (fast, slow) = (f(2 * pair), f(2 * pair + 1));
        assert_eq!((fast.instance, slow.instance), (0, 1));
        assert_eq!(fast.first_token - fast.arrival, 1_000 + 10 * 100 + 100);
        assert_eq!(slow.first_token - slow.arrival, 1_000 + 25 * 100 + 100);
        assert!(slow.end - slow.arrival > fast.end - fast.arrival);
    }
}
