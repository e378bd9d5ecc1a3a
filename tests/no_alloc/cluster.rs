//! The multi-instance loop allocates per request (its scheduler state), never per step or per
//! routing decision.

use crate::cluster_fixture as fixture;
use crate::counting_alloc;

use blis_cosim::engine::{Run, Services, simulate};
use blis_cosim::latency::LatencyBackend;
use blis_cosim::router::{Router, RoutingPolicy, SignalConfig};
use counting_alloc::allocations;
use fixture::{LinearBackend, Recorder, request, setup};

#[test]
fn steps_and_routing_do_not_allocate() {
    // 64 requests of 400 output tokens with token ids over 4 instances: over 10,000 steps.
    let requests: Vec<_> = (0..64u64)
        .map(|id| {
            let ids = (0..500)
                .map(|t| if t < 64 { t } else { t + 1000 * id as u32 })
                .collect();
            request(id, id * 500_000, 100, 400, ids)
        })
        .collect();
    let setups = [
        setup("m", 500),
        setup("m", 500),
        setup("m", 500),
        setup("m", 500),
    ];
    let stale = SignalConfig::default()
        .with_snapshot_refresh(50_000)
        .with_cache_signal_delay(50_000);
    let scorers = "prefix-affinity:2,precise-prefix-cache:1,queue-depth:1,kv-utilization:1";
    for (policy, signals) in [
        (RoutingPolicy::Load, SignalConfig::default()),
        (RoutingPolicy::PrefixAffinity, SignalConfig::default()),
        (
            RoutingPolicy::weighted("queue=1,prefix=1".parse().unwrap()),
            SignalConfig::default(),
        ),
        (RoutingPolicy::scorers(scorers.parse().unwrap()), stale),
    ] {
        let mut backends: Vec<LinearBackend> =
            (0..4).map(|_| LinearBackend { per_token: 10 }).collect();
        let mut dyns: Vec<&mut dyn LatencyBackend> = backends
            .iter_mut()
            .map(|b| b as &mut dyn LatencyBackend)
            .collect();
        let mut router = Router::new(policy.clone(), 0);
        let mut rec = Recorder::default();
        rec.finished.reserve(requests.len());
        rec.steps.reserve(40_000);
        let before = allocations();
        let out = simulate(
            Run::new(&requests, &setups).signals(signals),
            Services::new(&mut dyns, &mut router, &mut rec),
        )
        .unwrap();
        let made = allocations() - before;
        assert!(out.steps > 10_000, "{}", out.steps);
        // Per request: its scheduler state (hashes, KV block list, gaps); plus the setup and
        // the amortised growth of a few buffers.
        assert!(
            made < 16 * requests.len() as u64 + 400,
            "{policy}: {made} allocations"
        );
    }
}

/// Requests without token ids, 16 at a time on one instance: once the first ones finished,
/// a request's KV block list is one a finished request emptied (growing one by one it took
/// five allocations for its 20 blocks), and its blocks go back to the pool in one go.
#[test]
fn finished_requests_hand_their_block_lists_on() {
    let requests: Vec<_> = (0..2_000u64)
        .map(|id| request(id, id * 200_000, 100, 200, Vec::new()))
        .collect();
    let setups = [setup("m", 4_000)];
    let mut backend = LinearBackend { per_token: 10 };
    let mut dyns: [&mut dyn LatencyBackend; 1] = [&mut backend];
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    let mut rec = Recorder::default();
    rec.finished.reserve(requests.len());
    rec.steps.reserve(400_000);
    let before = allocations();
    let out = simulate(
        Run::new(&requests, &setups),
        Services::new(&mut dyns, &mut router, &mut rec),
    )
    .unwrap();
    let made = allocations() - before;
    assert_eq!(out.finished, 2_000);
    // Per request: its inter-token gaps for the observer; plus the setup and the amortised
    // growth of a few buffers.
    assert!(made < 2 * requests.len() as u64 + 400, "{made} allocations");
}
