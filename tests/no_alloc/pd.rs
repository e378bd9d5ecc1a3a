//! Prefill/decode runs allocate per request (its scheduler state on the prefill and on the
//! decode instance), never per step, per hand-off routing decision or per transfer.

use crate::cluster_fixture as fixture;
use crate::counting_alloc;

use blis_cosim::config::{InstanceRole, Link};
use blis_cosim::engine::Disaggregation;
use blis_cosim::engine::PdFlow;
use blis_cosim::engine::{Run, Services, simulate};
use blis_cosim::latency::LatencyBackend;
use blis_cosim::router::{Router, RoutingPolicy};
use counting_alloc::allocations;
use fixture::{LinearBackend, Recorder, request, setup};

#[test]
fn steps_hand_offs_and_transfers_do_not_allocate() {
    // 64 requests of 400 output tokens with token ids, two prefill and two decode instances.
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
    use InstanceRole::{Decode, Prefill};
    for policy in [RoutingPolicy::Load, RoutingPolicy::PrefixAffinity] {
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
        let pd = Disaggregation::new(
            vec![Prefill, Prefill, Decode, Decode],
            vec![1_000; 4],
            Router::with_stream(policy.clone(), 0, b"decode"),
            |_, _| Link {
                bandwidth_gbps: 16.0,
                latency_ns: 20_000.0,
            },
        )
        .with_flow(PdFlow::LlmServingSim);
        let out = simulate(
            Run::new(&requests, &setups).disaggregated(pd),
            Services::new(&mut dyns, &mut router, &mut rec),
        )
        .unwrap();
        let made = allocations() - before;
        assert!(out.steps > 10_000, "{}", out.steps);
        // Per request: its scheduler state on both sides (hashes, KV block list, gaps); plus
        // the setup and the amortised growth of a few buffers.
        assert!(
            made < 24 * requests.len() as u64 + 400,
            "{policy}: {made} allocations"
        );
    }
}
