use blis_cosim::config::{InstanceRole, Link};
use blis_cosim::engine::pd::Disaggregation;
use blis_cosim::router::Router;

/// A link of `gbps` GB/s and no latency.
fn link(gbps: f64) -> Link {
    Link {
        bandwidth_gbps: gbps,
        latency_ns: 0.0,
    }
}

#[test]
fn grouped_instances_hold_one_link_per_pair_of_groups() {
    // Issue 36: two templates of 50,000 replica slots each hold 4 links, not 10^10.
    let per = 50_000;
    let roles = [InstanceRole::Prefill, InstanceRole::Decode].map(|r| vec![r; per]);
    let pd = Disaggregation::grouped(
        roles.concat(),
        vec![100; 2 * per],
        Router::new(blis_cosim::router::RoutingPolicy::RoundRobin, 1),
        per,
        |from, to| link((1 + 10 * from + to) as f64),
    );
    assert_eq!(pd.links.len(), 4);
    for (from, to, gbps) in [(0, per, 2.0), (per - 1, 2 * per - 1, 2.0), (per, 3, 11.0)] {
        assert_eq!(pd.link(from, to).bandwidth_gbps, gbps, "{from} to {to}");
    }
}
