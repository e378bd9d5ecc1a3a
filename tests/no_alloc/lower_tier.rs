//! The lower tier of the prefix cache allocates per request at most (the pool's growth is
//! amortised), never per step, lookup or recall.

use crate::cluster_fixture as fixture;
use crate::counting_alloc;

use blis_cosim::engine::{InstanceSetup, LowerTierSetup};
use blis_cosim::engine::{Run, Services, simulate};
use blis_cosim::latency::LatencyBackend;
use blis_cosim::router::{Router, RoutingPolicy};
use blis_cosim::scheduler::TierMemory;
use counting_alloc::allocations;
use fixture::{LinearBackend, Recorder, request, setup};

#[test]
fn steps_with_a_shared_lower_tier_do_not_allocate() {
    // 96 requests over 4 instances sharing one pool: 12 families of 512-token prefixes, which
    // every instance meets one after the other, each request with 88 tokens of its own and 200
    // output tokens; 150 KV blocks per instance, so prefixes leave the GPUs and come back from
    // the tier.
    let requests: Vec<_> = (0..96u64)
        .map(|id| {
            let family = (id / 4 % 12) as u32;
            let ids = (0..800)
                .map(|t| {
                    if t < 512 {
                        family * 1000 + t
                    } else {
                        100_000 + t + 1000 * id as u32
                    }
                })
                .collect();
            request(id, id * 2_000_000, 600, 200, ids)
        })
        .collect();
    let memory = TierMemory {
        capacity_bytes: 1 << 30,
        bandwidth_gbps: 100.0,
        latency_ns: 500.0,
    };
    let setups: Vec<InstanceSetup> = (0..4)
        .map(|_| InstanceSetup {
            pipeline: None,
            lower_tier: Some(LowerTierSetup {
                pool: 0,
                memory,
                kv_bytes_per_token: 1_000,
                offload: None,
            }),
            ..setup("m", 150)
        })
        .collect();
    let mut backends: Vec<LinearBackend> =
        (0..4).map(|_| LinearBackend { per_token: 10 }).collect();
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let mut router = Router::new(RoutingPolicy::RoundRobin, 0);
    let mut rec = Recorder::default();
    rec.finished.reserve(requests.len());
    rec.steps.reserve(40_000);
    let before = allocations();
    let out = simulate(
        Run::new(&requests, &setups),
        Services::new(&mut dyns, &mut router, &mut rec),
    )
    .unwrap();
    let made = allocations() - before;
    assert!(out.steps > 10_000, "{}", out.steps);
    assert!(out.stats.recalled_tokens > 10_000, "{:?}", out.stats);
    assert!(
        made < 16 * requests.len() as u64 + 400,
        "{made} allocations"
    );
}
