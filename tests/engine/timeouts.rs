//! Per-request timeouts on the engine's clock: hand-timed timeouts of a request waiting on
//! an instance, running (its KV freed at once), in the control plane (admission, gateway
//! queue), held by the router, in a KV transfer (queued on the link and on the wire); a completion at the
//! deadline wins; timers of finished requests never move the clock; every request ends
//! exactly once on random workloads with timeouts, with and without a control plane and
//! under P/D.
//!
//! Times: the test backend prices a step at 1,000 ns + 10 ns per token + 100 ns per
//! sequence, so a 390-token prefill alone takes 5,000 ns and a one-sequence decode step
//! 1,110 ns.

use crate::cluster_fixture as fixture;

use blis_cosim::Nanos;
use blis_cosim::config::{InstanceRole, Link};
use blis_cosim::control::flow::{Detector, DispatchOrder, FlowConfig};
use blis_cosim::control::{ControlConfig, ControlPlane, Dropped, Outcome, Stage};
use blis_cosim::engine::{
    Cluster, Disaggregation, InstanceSetup, Observer, PdFlow, Run, RunOutcome,
};
use blis_cosim::engine::{Services, StepEvent, simulate};
use blis_cosim::latency::LatencyBackend;
use blis_cosim::metrics::RequestRecord;
use blis_cosim::router::{ClusterView, RouteDecision, Router, Routing, RoutingPolicy};
use blis_cosim::workload::{Request, RequestClasses, RequestProfile};
use fixture::{Finished, LinearBackend, Recorder, request, setup};
use proptest::prelude::*;

/// Every end of every request, in order.
#[derive(Debug, Default, PartialEq)]
struct Ends {
    finished: Vec<Finished>,
    dropped: Vec<(u64, Nanos, Dropped)>,
    steps: u64,
}

impl Observer for Ends {
    fn request_finished(&mut self, r: &RequestRecord<'_>) -> anyhow::Result<()> {
        let mut rec = Recorder::default();
        rec.request_finished(r)?;
        self.finished.extend(rec.finished);
        Ok(())
    }

    fn step_finished(
        &mut self,
        _: &StepEvent<'_>,
        _: &mut dyn LatencyBackend,
    ) -> anyhow::Result<()> {
        self.steps += 1;
        Ok(())
    }

    fn request_dropped(&mut self, r: &Request, now: Nanos, why: Dropped) -> anyhow::Result<()> {
        self.dropped.push((r.id, now, why));
        Ok(())
    }
}

/// Clients giving request `id` a timeout of `us` µs for each `(id, us)`.
fn timeouts(pairs: &[(u64, u64)]) -> RequestClasses {
    let mut classes = RequestClasses::default();
    for &(id, us) in pairs {
        let profile = RequestProfile {
            timeout_us: Some(us),
            ..RequestProfile::default()
        };
        classes.assign_profile(id, 1, "t", "standard", &profile);
    }
    classes
}

/// An instance running at most `max_seqs` requests, prefills unchunked.
fn instance(max_seqs: u32) -> InstanceSetup {
    let mut s = setup("m", 1_000);
    s.scheduler.max_num_seqs = Some(max_seqs);
    s.scheduler.max_num_batched_tokens = 4_096;
    s
}

fn backends(n: usize) -> Vec<LinearBackend> {
    (0..n).map(|_| LinearBackend { per_token: 10 }).collect()
}

/// Runs `requests` on `setups` (least-loaded routing) with `clients`' timeouts and the
/// control plane of `control`.
fn run(
    requests: &[Request],
    setups: &[InstanceSetup],
    clients: &RequestClasses,
    control: Option<ControlConfig>,
) -> (RunOutcome, Ends) {
    let mut backends = backends(setups.len());
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut router = Router::new(RoutingPolicy::LeastLoaded, 0);
    let mut ends = Ends::default();
    let mut control = control.map(|c| ControlPlane::new(c, Some(clients)));
    let services = Services::new(&mut dyns, &mut router, &mut ends).with_control(control.as_mut());
    let run = Run::new(requests, setups).clients(Some(clients));
    let outcome = simulate(run, services).unwrap();
    (outcome, ends)
}

fn timed_out(stage: Stage) -> Dropped {
    Dropped::timed_out(stage)
}

#[test]
fn a_running_request_times_out_mid_step_and_frees_its_kv_at_once() {
    // Request 0 (390 + 1000 tokens, timeout 8 µs) runs alone: prefill 0..5000, decode steps
    // of 1,110 ns end at 6110, 7220, 8330. At 8000 it times out inside the step
    // 7220..8330. Request 1 (390 + 2) waits behind it (one running at a time) and starts
    // when that step ends: prefill 8330..13330, one decode step to 14440.
    let requests = vec![
        request(0, 0, 390, 1_000, Vec::new()),
        request(1, 10, 390, 2, Vec::new()),
    ];
    let clients = timeouts(&[(0, 8)]);
    let setups = vec![instance(1)];
    let mut backends = backends(1);
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut router = Router::new(RoutingPolicy::LeastLoaded, 0);
    let mut ends = Ends::default();
    let mut services = Services::new(&mut dyns, &mut router, &mut ends);
    let run = Run::new(&requests, &setups).clients(Some(&clients));
    let mut cluster = Cluster::new(run, &services).unwrap();
    cluster.step_until(7_999, &mut services).unwrap();
    // 390 tokens + 2 decoded = 392: 25 blocks of 16.
    assert_eq!(cluster.scheduler(0).kv_blocks_free(), 1_000 - 25);
    cluster.step_until(8_000, &mut services).unwrap();
    assert_eq!(cluster.scheduler(0).kv_blocks_free(), 1_000);
    assert_eq!(cluster.scheduler(0).num_running(), 0);
    assert_eq!(cluster.scheduler(0).num_waiting(), 1);
    assert_eq!(cluster.timed_out(), 1);
    let outcome = cluster.run(services).unwrap();
    assert_eq!(
        (outcome.finished, outcome.timed_out, outcome.total_clocks_ns),
        (1, 1, 14_440)
    );
    assert_eq!(ends.dropped, [(0, 8_000, timed_out(Stage::Instance))]);
    let f = ends.finished[0];
    assert_eq!((f.id, f.first_token, f.end), (1, 13_330, 14_440));
}

#[test]
fn a_waiting_request_times_out_in_the_queue() {
    // 0 (390 + 5) runs 0..5000, then decodes to 6110, 7220, 8330, 9440. 1 (timeout 3 µs,
    // arrived at 10) times out waiting at 3010; 2 (arrived at 20) starts at 9440: prefill
    // to 14440, one decode step to 15550.
    let requests = vec![
        request(0, 0, 390, 5, Vec::new()),
        request(1, 10, 390, 5, Vec::new()),
        request(2, 20, 390, 2, Vec::new()),
    ];
    let (outcome, ends) = run(&requests, &[instance(1)], &timeouts(&[(1, 3)]), None);
    assert_eq!((outcome.finished, outcome.timed_out), (2, 1));
    assert_eq!(ends.dropped, [(1, 3_010, timed_out(Stage::Instance))]);
    let ids: Vec<(u64, Nanos, Nanos)> = ends
        .finished
        .iter()
        .map(|f| (f.id, f.first_token, f.end))
        .collect();
    assert_eq!(ids, [(0, 5_000, 9_440), (2, 14_440, 15_550)]);
}

#[test]
fn a_completion_at_the_deadline_wins_and_finished_timers_do_not_move_the_clock() {
    // A one-token request of 390 tokens ends with its prefill at 5000.
    let requests = vec![request(0, 0, 390, 1, Vec::new())];
    let (outcome, ends) = run(&requests, &[instance(1)], &timeouts(&[(0, 5)]), None);
    assert_eq!((outcome.finished, outcome.timed_out), (1, 0));
    assert_eq!(ends.finished[0].end, 5_000);
    assert_eq!(outcome.total_clocks_ns, 5_000);
    // A timer due long after the request finished does nothing, not even move the clock.
    let (outcome, _) = run(
        &requests,
        &[instance(1)],
        &timeouts(&[(0, 1_000_000)]),
        None,
    );
    assert_eq!((outcome.finished, outcome.total_clocks_ns), (1, 5_000));
    // One µs less and it times out at 4000; its step still ends at 5000.
    let (outcome, ends) = run(&requests, &[instance(1)], &timeouts(&[(0, 4)]), None);
    assert_eq!((outcome.finished, outcome.timed_out), (0, 1));
    assert_eq!(ends.dropped, [(0, 4_000, timed_out(Stage::Instance))]);
    assert_eq!((outcome.total_clocks_ns, ends.steps), (5_000, 1));
}

#[test]
fn requests_time_out_in_admission_and_in_the_gateway_queue() {
    // Admission takes 10 µs: a request with a 5 µs timeout never gets past it.
    let requests = vec![request(0, 0, 390, 2, Vec::new())];
    let slow = ControlConfig {
        admission_latency_ns: 10_000,
        ..ControlConfig::default()
    };
    let (outcome, ends) = run(&requests, &[instance(1)], &timeouts(&[(0, 5)]), Some(slow));
    assert_eq!((outcome.timed_out, outcome.steps), (1, 0));
    assert_eq!(ends.dropped, [(0, 5_000, timed_out(Stage::Admission))]);
    // The gateway queue lets one request in at a time: 0 (390 + 5) runs 0..9440; 1
    // (timeout 3 µs) times out queued at 3010; 2 is dispatched when 0 ends and runs
    // 9440..14440 (prefill), ..15550 (one decode step).
    let requests = vec![
        request(0, 0, 390, 5, Vec::new()),
        request(1, 10, 390, 5, Vec::new()),
        request(2, 20, 390, 2, Vec::new()),
    ];
    let gated = ControlConfig {
        flow: Some(FlowConfig {
            detector: Detector::concurrency(1),
            order: DispatchOrder::Fifo,
            ..FlowConfig::default()
        }),
        ..ControlConfig::default()
    };
    let (outcome, ends) = run(
        &requests,
        &[instance(16)],
        &timeouts(&[(1, 3)]),
        Some(gated),
    );
    assert_eq!((outcome.finished, outcome.timed_out), (2, 1));
    assert_eq!(ends.dropped, [(1, 3_010, timed_out(Stage::FlowControl))]);
    let last = ends.finished.iter().find(|f| f.id == 2).unwrap();
    assert_eq!((last.first_token, last.end), (14_440, 15_550));
}

/// Holds every request at the gateway while its instance has any request: one at a time.
struct OneAtATime;

impl Routing for OneAtATime {
    fn decide(&mut self, _: &Request, candidates: &[u32], view: &dyn ClusterView) -> RouteDecision {
        let s = view.snapshot(candidates[0]);
        if s.waiting + s.running == 0 {
            RouteDecision::To(candidates[0])
        } else {
            RouteDecision::Queue
        }
    }
}

#[test]
fn a_request_held_by_the_router_times_out_there() {
    // 0 (390 + 5) runs 0..9440; 1 (timeout 3 µs) is held by the router and times out at
    // 3010; 2 is held until 0 ends and runs 9440..14440 (prefill), ..15550.
    let requests = vec![
        request(0, 0, 390, 5, Vec::new()),
        request(1, 10, 390, 5, Vec::new()),
        request(2, 20, 390, 2, Vec::new()),
    ];
    let clients = timeouts(&[(1, 3)]);
    let setups = vec![instance(16)];
    let mut backends = backends(1);
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut router = OneAtATime;
    let mut ends = Ends::default();
    let services = Services::new(&mut dyns, &mut router, &mut ends);
    let run = Run::new(&requests, &setups).clients(Some(&clients));
    let outcome = simulate(run, services).unwrap();
    assert_eq!((outcome.finished, outcome.timed_out), (2, 1));
    assert_eq!(ends.dropped, [(1, 3_010, timed_out(Stage::Routing))]);
    let last = ends.finished.iter().find(|f| f.id == 2).unwrap();
    assert_eq!((last.first_token, last.end), (14_440, 15_550));
}

/// A link of exactly one byte per ns plus 1,000 ns.
fn link() -> Link {
    Link {
        bandwidth_gbps: 1e9 / f64::from(1u32 << 30),
        latency_ns: 1_000.0,
    }
}

/// Runs `requests` on one prefill (0) and one decode (1) instance, 100 KV bytes per token, in
/// P/D flow `flow`.
fn run_pd(requests: &[Request], clients: &RequestClasses, flow: PdFlow) -> (RunOutcome, Ends) {
    let setups = vec![instance(16), instance(16)];
    let mut backends = backends(2);
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let roles = vec![InstanceRole::Prefill, InstanceRole::Decode];
    let decode_router = Router::with_stream(RoutingPolicy::LeastLoaded, 7, b"decode");
    let pd = Disaggregation::new(roles, vec![100; 2], decode_router, |_, _| link()).with_flow(flow);
    let mut router = Router::new(RoutingPolicy::LeastLoaded, 7);
    let mut ends = Ends::default();
    let services = Services::new(&mut dyns, &mut router, &mut ends);
    let run = Run::new(requests, &setups)
        .disaggregated(pd)
        .clients(Some(clients));
    (simulate(run, services).unwrap(), ends)
}

#[test]
fn requests_time_out_in_their_kv_transfer_queued_and_on_the_wire() {
    // 0 (390 + 3, timeout 30 µs): prefill 0..5000, its 39,000 KV bytes on the wire
    // 5000..45000. 1 (390 + 3, timeout 20 µs, arrived at 10): prefill 5000..10000, its
    // transfer queued behind 0's; it times out there at 20010 (the transfer is called
    // off); 0 times out on the wire at 30000, and its KV is dropped when it arrives at
    // 45000: the decode instance never runs a step.
    let requests = vec![
        request(0, 0, 390, 3, Vec::new()),
        request(1, 10, 390, 3, Vec::new()),
    ];
    let clients = timeouts(&[(0, 30), (1, 20)]);
    let (outcome, ends) = run_pd(&requests, &clients, PdFlow::LlmServingSim);
    assert_eq!((outcome.finished, outcome.timed_out), (0, 2));
    let transfer = timed_out(Stage::Transfer);
    assert_eq!(ends.dropped, [(1, 20_010, transfer), (0, 30_000, transfer)]);
    assert_eq!(outcome.total_clocks_ns, 45_000);
    assert_eq!(outcome.instances[1].steps, 0);
    assert_eq!(outcome.instances[0].steps, 2);
}

/// Gives every fourth request of `requests` a timeout between 1 and 60 µs.
fn random_timeouts(requests: &[Request], seed: u64) -> RequestClasses {
    let mut rng = fixture::Rng(seed | 1);
    let pairs: Vec<(u64, u64)> = requests
        .iter()
        .filter(|r| r.id % 4 != 3)
        .map(|r| (r.id, 1 + rng.below(60)))
        .collect();
    timeouts(&pairs)
}

/// Checks that every request of `0..n` ended exactly once.
fn each_once(outcome: &RunOutcome, ends: &Ends, n: u64) -> Result<(), TestCaseError> {
    let total = outcome.finished + outcome.dropped + outcome.rejected + outcome.timed_out;
    prop_assert_eq!(total, n);
    let mut ids: Vec<u64> = ends.finished.iter().map(|f| f.id).collect();
    ids.extend(ends.dropped.iter().map(|d| d.0));
    ids.sort_unstable();
    prop_assert_eq!(ids, (0..n).collect::<Vec<u64>>());
    for &(_, _, why) in ends
        .dropped
        .iter()
        .filter(|d| d.2.outcome == Outcome::TimedOut)
    {
        prop_assert_eq!(why.policy, "timeout");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn every_request_ends_exactly_once_with_timeouts(seed in 1u64..1_000, n in 1u64..80) {
        let requests = fixture::workload(seed, n, seed % 2 == 0);
        let clients = random_timeouts(&requests, seed);
        let mut setups = vec![setup("m", 120); 2];
        for s in &mut setups {
            s.scheduler.max_num_seqs = Some(4);
        }
        let (outcome, ends) = run(&requests, &setups, &clients, None);
        each_once(&outcome, &ends, n)?;
        prop_assert!(outcome.timed_out > 0 || n < 8);
        let gated = ControlConfig {
            flow: Some(FlowConfig {
                detector: Detector::concurrency(2),
                order: DispatchOrder::Priority,
                ..FlowConfig::default()
            }),
            admission_latency_ns: 300,
            routing_latency_ns: 700,
            ..ControlConfig::default()
        };
        let (outcome, ends) = run(&requests, &setups, &clients, Some(gated.clone()));
        each_once(&outcome, &ends, n)?;
        for flow in [PdFlow::LlmServingSim, PdFlow::Vllm, PdFlow::Lmcache] {
            let (pd_outcome, pd_ends) = run_pd(&requests, &clients, flow);
            each_once(&pd_outcome, &pd_ends, n)?;
        }
        // Reruns are identical.
        let (again, ends_again) = run(&requests, &setups, &clients, Some(gated));
        prop_assert_eq!(outcome, again);
        prop_assert_eq!(ends, ends_again);
    }
}

#[test]
fn without_timeouts_a_run_is_unchanged() {
    let requests = fixture::workload(5, 150, true);
    let setups = vec![setup("m", 200); 3];
    let none = RequestClasses::default();
    let (with_clients, ends) = run(&requests, &setups, &none, None);
    let mut backends = backends(3);
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut router = Router::new(RoutingPolicy::LeastLoaded, 0);
    let mut plain_ends = Ends::default();
    let services = Services::new(&mut dyns, &mut router, &mut plain_ends);
    let plain = simulate(Run::new(&requests, &setups), services).unwrap();
    assert_eq!(with_clients, plain);
    assert_eq!(ends, plain_ends);
}
