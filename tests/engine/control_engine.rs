//! The control plane on the engine's clock: instance scheduling policies on a hand-timed
//! queue, control-plane latencies, the gateway queue's concurrency gate, request conservation
//! across all outcomes on random workloads, and reruns.

use crate::cluster_fixture as fixture;

use blis_cosim::Nanos;
use blis_cosim::control::admission::{AdmissionPolicy, BucketParams, TierShedParams};
use blis_cosim::control::flow::{Detector, DispatchOrder, FlowConfig};
use blis_cosim::control::{ControlConfig, ControlPlane, Dropped};
use blis_cosim::engine::{Observer, Run, RunOutcome, Services};
use blis_cosim::latency::LatencyBackend;
use blis_cosim::metrics::RequestRecord;
use blis_cosim::router::{Router, RoutingPolicy};
use blis_cosim::scheduler::QueueOrder;
use blis_cosim::workload::{Request, RequestClasses, RequestExtras};
use fixture::{Finished, LinearBackend, Recorder, request, setup};
use proptest::prelude::*;

/// Every end of every request, in order.
#[derive(Debug, Default, PartialEq)]
struct Ends {
    finished: Vec<Finished>,
    dropped: Vec<(u64, Nanos, Dropped)>,
}

impl Observer for Ends {
    fn request_finished(&mut self, r: &RequestRecord<'_>) -> anyhow::Result<()> {
        let mut rec = Recorder::default();
        rec.request_finished(r)?;
        self.finished.extend(rec.finished);
        Ok(())
    }

    fn request_dropped(&mut self, r: &Request, now: Nanos, why: Dropped) -> anyhow::Result<()> {
        self.dropped.push((r.id, now, why));
        Ok(())
    }
}

/// Runs `requests` on `n` instances (at most `max_seqs` running each) through a control
/// plane of `config` (none when `None`).
fn run(
    requests: &[Request],
    classes: Option<&RequestClasses>,
    n: usize,
    max_seqs: u32,
    config: Option<ControlConfig>,
) -> (RunOutcome, Ends) {
    let mut s = setup("m", 1_000);
    s.scheduler.max_num_seqs = Some(max_seqs);
    let setups = vec![s; n];
    let mut backends: Vec<LinearBackend> =
        (0..n).map(|_| LinearBackend { per_token: 10 }).collect();
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut router = Router::new(RoutingPolicy::LeastLoaded, 0);
    let mut ends = Ends::default();
    let mut control = config.map(|c| ControlPlane::new(c, classes));
    let services = Services::new(&mut dyns, &mut router, &mut ends).with_control(control.as_mut());
    let outcome = blis_cosim::engine::simulate(Run::new(requests, &setups), services).unwrap();
    (outcome, ends)
}

fn order_of(ends: &Ends) -> Vec<u64> {
    let mut f = ends.finished.clone();
    f.sort_by_key(|r| (r.first_token, r.id));
    f.iter().map(|r| r.id).collect()
}

#[test]
fn priority_fcfs_serves_the_urgent_request_first_on_a_hand_timed_queue() {
    // One instance running one request at a time. Request 0 (arrives at 0) occupies it; 1
    // (batch, priority -1) arrives at 10, 2 (critical, 4) at 20: both wait behind 0.
    let requests = vec![
        request(0, 0, 100, 5, Vec::new()),
        request(1, 10, 100, 5, Vec::new()),
        request(2, 20, 100, 5, Vec::new()),
    ];
    let mut classes = RequestClasses::default();
    classes.assign(0, 1, "t", "standard");
    classes.assign(1, 1, "t", "batch");
    classes.assign(2, 1, "t", "critical");
    let fcfs = ControlConfig {
        scheduler: QueueOrder::Fcfs,
        routing_latency_ns: 1, // an active control plane that orders nothing
        ..ControlConfig::default()
    };
    let (_, ends) = run(&requests, Some(&classes), 1, 1, Some(fcfs));
    assert_eq!(order_of(&ends), [0, 1, 2]);
    let prio = ControlConfig {
        scheduler: QueueOrder::PriorityFcfs,
        ..ControlConfig::default()
    };
    let (_, ends) = run(&requests, Some(&classes), 1, 1, Some(prio.clone()));
    assert_eq!(order_of(&ends), [0, 2, 1]);
    // Request 2 starts exactly when 0 ends: its first token is one prefill step later.
    let end0 = ends.finished.iter().find(|f| f.id == 0).unwrap().end;
    let first2 = ends
        .finished
        .iter()
        .find(|f| f.id == 2)
        .unwrap()
        .first_token;
    assert_eq!(first2, end0 + 1_000 + 10 * 100 + 100);
    // A request's own priority beats its class: make 1 more urgent than critical.
    classes.assign_with(
        1,
        1,
        "t",
        "batch",
        RequestExtras {
            priority: Some(9),
            slo_target_ns: None,
        },
    );
    let (_, ends) = run(&requests, Some(&classes), 1, 1, Some(prio));
    assert_eq!(order_of(&ends), [0, 1, 2]);
    // Reverse priority: least urgent first.
    let reverse = ControlConfig {
        scheduler: QueueOrder::ReversePriority,
        ..ControlConfig::default()
    };
    let (_, ends) = run(&requests, Some(&classes), 1, 1, Some(reverse));
    assert_eq!(order_of(&ends), [0, 2, 1]);
    // Shortest job first: the shorter prompt jumps the queue.
    let short = vec![
        request(0, 0, 100, 5, Vec::new()),
        request(1, 10, 200, 5, Vec::new()),
        request(2, 20, 50, 5, Vec::new()),
    ];
    let sjf = ControlConfig {
        scheduler: QueueOrder::Sjf,
        ..ControlConfig::default()
    };
    let (_, ends) = run(&short, None, 1, 1, Some(sjf));
    assert_eq!(order_of(&ends), [0, 2, 1]);
}

#[test]
fn routing_latency_adds_exactly_that_much_to_each_ttft_on_an_idle_cluster() {
    // Requests far apart: each finds the cluster idle.
    let requests: Vec<Request> = (0..5)
        .map(|i| request(i, i * 10_000_000, 50 + 10 * i as u32, 4, Vec::new()))
        .collect();
    let (_, plain) = run(&requests, None, 2, 16, None);
    let delayed = ControlConfig {
        routing_latency_ns: 200_000,
        admission_latency_ns: 0,
        ..ControlConfig::default()
    };
    let (_, late) = run(&requests, None, 2, 16, Some(delayed));
    assert_eq!(plain.finished.len(), 5);
    for (a, b) in plain.finished.iter().zip(&late.finished) {
        assert_eq!(a.id, b.id);
        assert_eq!(
            b.first_token - b.arrival,
            a.first_token - a.arrival + 200_000
        );
    }
    // Admission latency adds up with it.
    let both = ControlConfig {
        routing_latency_ns: 200_000,
        admission_latency_ns: 50_000,
        ..ControlConfig::default()
    };
    let (_, later) = run(&requests, None, 2, 16, Some(both));
    for (a, b) in plain.finished.iter().zip(&later.finished) {
        assert_eq!(b.first_token - a.first_token, 250_000);
    }
}

#[test]
fn the_concurrency_gate_runs_one_request_at_a_time() {
    let requests: Vec<Request> = (0..6)
        .map(|i| request(i, i * 10, 64, 3, Vec::new()))
        .collect();
    let gated = ControlConfig {
        flow: Some(FlowConfig {
            detector: Detector::concurrency(1),
            order: DispatchOrder::Fifo,
            ..FlowConfig::default()
        }),
        ..ControlConfig::default()
    };
    let (outcome, ends) = run(&requests, None, 1, 16, Some(gated));
    assert_eq!(outcome.finished, 6);
    let mut f = ends.finished.clone();
    f.sort_by_key(|r| r.id);
    for pair in f.windows(2) {
        assert!(pair[1].first_token > pair[0].end, "{pair:?}");
    }
}

#[test]
fn reject_all_ends_every_request_and_the_run_cleanly() {
    let requests = fixture::workload(3, 40, false);
    let config = ControlConfig {
        admission: blis_cosim::control::admission::AdmissionConfig {
            policy: AdmissionPolicy::RejectAll,
            ..Default::default()
        },
        ..ControlConfig::default()
    };
    let (outcome, ends) = run(&requests, None, 2, 16, Some(config));
    assert_eq!(
        (outcome.finished, outcome.dropped, outcome.steps),
        (0, 40, 0)
    );
    assert_eq!(ends.dropped.len(), 40);
    assert!(
        ends.dropped
            .iter()
            .all(|(_, _, why)| why.policy == "reject-all")
    );
}

/// A control plane that drops requests in every way it can.
fn lossy(
    capacity: u64,
    ttl: Nanos,
    depth: usize,
    order: DispatchOrder,
    admit: usize,
) -> ControlConfig {
    let policy = match admit {
        0 => AdmissionPolicy::TokenBucket(BucketParams {
            token_bucket_capacity: capacity as f64,
            token_bucket_refill_rate: 200_000.0,
            per_tenant: false,
        }),
        1 => AdmissionPolicy::TierShed(TierShedParams {
            tier_shed_threshold: 6,
            tier_shed_min_priority: 3,
        }),
        _ => AdmissionPolicy::AlwaysAdmit,
    };
    ControlConfig {
        admission: blis_cosim::control::admission::AdmissionConfig {
            policy,
            ..Default::default()
        },
        flow: Some(FlowConfig {
            detector: Detector::utilization(2.0, 0.5),
            order,
            per_band_capacity: Some(depth),
            max_depth: Some(depth + 2),
            ttl_ns: Some(ttl),
        }),
        admission_latency_ns: 3,
        routing_latency_ns: 7,
        scheduler: QueueOrder::PriorityFcfs,
        preemption: blis_cosim::scheduler::PreemptionOrder::Priority,
        ..ControlConfig::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn every_request_ends_exactly_once(
        seed in 1u64..1_000,
        n in 1u64..80,
        capacity in 50u64..2_000,
        ttl in 1_000u64..200_000,
        depth in 1usize..6,
        order in 0usize..3,
        admit in 0usize..3,
    ) {
        let requests = fixture::workload(seed, n, seed % 2 == 0);
        let mut classes = RequestClasses::default();
        for r in &requests {
            let class = ["critical", "standard", "batch", "sheddable"][(r.id % 4) as usize];
            classes.assign(r.id, 1, if r.id % 3 == 0 { "a" } else { "b" }, class);
        }
        let order = [DispatchOrder::Fifo, DispatchOrder::Priority, DispatchOrder::SloDeadline][order];
        let config = lossy(capacity, ttl, depth, order, admit);
        let (outcome, ends) = run(&requests, Some(&classes), 2, 4, Some(config.clone()));
        prop_assert_eq!(outcome.finished + outcome.dropped + outcome.rejected, n);
        let mut ids: Vec<u64> = ends.finished.iter().map(|f| f.id).collect();
        ids.extend(ends.dropped.iter().map(|d| d.0));
        ids.sort_unstable();
        prop_assert_eq!(ids, (0..n).collect::<Vec<u64>>());
        // Reruns are identical.
        let (again, ends_again) = run(&requests, Some(&classes), 2, 4, Some(config));
        prop_assert_eq!(outcome, again);
        prop_assert_eq!(ends, ends_again);
    }
}

#[test]
fn a_control_plane_that_changes_nothing_changes_nothing() {
    // Equal priorities: priority preemption picks the newest, as LIFO does.
    let requests = fixture::workload(11, 120, true);
    let (plain_outcome, plain) = run(&requests, None, 3, 4, None);
    let same = ControlConfig {
        preemption: blis_cosim::scheduler::PreemptionOrder::Priority,
        ..ControlConfig::default()
    };
    assert!(!same.is_passive());
    let (outcome, ends) = run(&requests, None, 3, 4, Some(same));
    assert_eq!(plain_outcome, outcome);
    assert_eq!(plain, ends);
}
