//! The decode side of prefill/decode disaggregation follows the run's policies: the decode
//! router sees the instances through the run's signals (as stale as the prefill router
//! sees them), and decode instances order their waiting queues by the control plane's
//! priorities, as colocated ones do.
//!
//! Times: the test backend prices a step at 1,000 ns + 10 ns per token + 100 ns per
//! sequence; KV is 100 bytes per token over a link of 1,000 ns + 1 byte/ns.

use crate::cluster_fixture as fixture;

use blis_cosim::config::{InstanceRole, Link};
use blis_cosim::control::{ControlConfig, ControlPlane};
use blis_cosim::engine::{Disaggregation, InstanceSetup, PdFlow, Run, Services, simulate};
use blis_cosim::latency::LatencyBackend;
use blis_cosim::router::{Router, RoutingPolicy, SignalConfig};
use blis_cosim::scheduler::QueueOrder;
use blis_cosim::workload::{Request, RequestClasses};
use fixture::{Finished, LinearBackend, Recorder, request, setup};

use InstanceRole::{Decode, Prefill};

fn link() -> Link {
    Link {
        bandwidth_gbps: 1e9 / f64::from(1u32 << 30),
        latency_ns: 1_000.0,
    }
}

/// An instance running at most `max_seqs` requests, prefills unchunked.
fn instance(max_seqs: u32) -> InstanceSetup {
    let mut s = setup("m", 1_000);
    s.scheduler.max_num_seqs = Some(max_seqs);
    s.scheduler.max_num_batched_tokens = 4_096;
    s
}

/// Runs `requests` on instances of `roles` (`setups`), least-loaded on both sides, with
/// `signals` and the control plane of `control`; returns the finished requests by id.
fn run(
    requests: &[Request],
    setups: &[InstanceSetup],
    roles: &[InstanceRole],
    signals: SignalConfig,
    control: Option<(ControlConfig, &RequestClasses)>,
) -> Vec<Finished> {
    let mut backends: Vec<LinearBackend> = setups
        .iter()
        .map(|_| LinearBackend { per_token: 10 })
        .collect();
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let decode_router = Router::with_stream(RoutingPolicy::LeastLoaded, 7, b"decode");
    let n = roles.len();
    let pd = Disaggregation::new(roles.to_vec(), vec![100; n], decode_router, |_, _| link())
        .with_flow(PdFlow::LlmServingSim);
    let mut router = Router::new(RoutingPolicy::LeastLoaded, 7);
    let mut rec = Recorder::default();
    let mut control = control.map(|(c, classes)| ControlPlane::new(c, Some(classes)));
    let services = Services::new(&mut dyns, &mut router, &mut rec).with_control(control.as_mut());
    let run = Run::new(requests, setups)
        .disaggregated(pd)
        .signals(signals);
    simulate(run, services).unwrap();
    rec.finished.sort_by_key(|f| f.id);
    rec.finished
}

#[test]
fn the_decode_choice_sees_the_signals_as_stale_as_the_prefill_router_does() {
    // Both requests are prefilled in one step, 0..3200, and handed off at 3200 in order.
    // Fresh signals: 0 goes to decode instance 1 (both idle, the first wins), and 1 sees 0
    // on its way there and goes to 2. With queue signals refreshed every second, the
    // decode router still holds the snapshot taken at 0, where both are idle: 1 follows 0
    // to instance 1.
    let requests = vec![
        request(0, 0, 100, 3, Vec::new()),
        request(1, 0, 100, 3, Vec::new()),
    ];
    let setups = vec![instance(16); 3];
    let roles = [Prefill, Decode, Decode];
    let fresh = run(
        &requests,
        &setups,
        &roles,
        SignalConfig::all_immediate(),
        None,
    );
    let on = |f: &[Finished]| f.iter().map(|r| r.instance).collect::<Vec<u32>>();
    assert_eq!(on(&fresh), [1, 2]);
    let stale = SignalConfig::all_immediate().with_snapshot_refresh(1_000_000_000);
    assert_eq!(on(&run(&requests, &setups, &roles, stale, None)), [1, 1]);
}

#[test]
fn a_decode_instance_orders_its_waiting_queue_by_priority() {
    // One prefill instance (one request at a time) and one decode instance (one running
    // request). 0 (standard, 30 tokens out) is prefilled 0..2100, its KV (10,000 bytes)
    // arrives at 13100; it decodes 29 steps of 1,110 ns, to 45290. 1 (batch) is prefilled
    // 2200..4300 and its KV waits for the link: 13100..24100. 2 (critical) is prefilled
    // 4400..6500, its KV arrives at 35100. At 45290 both wait on the decode instance: FCFS
    // takes 1 (2 decode steps, to 47510) then 2 (to 49730); priority-fcfs takes 2 first.
    let requests = vec![
        request(0, 0, 100, 30, Vec::new()),
        request(1, 2_200, 100, 3, Vec::new()),
        request(2, 4_400, 100, 3, Vec::new()),
    ];
    let mut classes = RequestClasses::default();
    classes.assign(0, 1, "t", "standard");
    classes.assign(1, 1, "t", "batch");
    classes.assign(2, 1, "t", "critical");
    let setups = vec![instance(1), instance(1)];
    let roles = [Prefill, Decode];
    let signals = SignalConfig::default();
    let ends = |f: Vec<Finished>| f.iter().map(|r| (r.id, r.end)).collect::<Vec<_>>();
    let fcfs = run(&requests, &setups, &roles, signals, None);
    assert_eq!(ends(fcfs), [(0, 45_290), (1, 47_510), (2, 49_730)]);
    let priority = ControlConfig {
        scheduler: QueueOrder::PriorityFcfs,
        ..ControlConfig::default()
    };
    let prio = run(
        &requests,
        &setups,
        &roles,
        signals,
        Some((priority, &classes)),
    );
    assert_eq!(ends(prio), [(0, 45_290), (1, 49_730), (2, 47_510)]);
}
