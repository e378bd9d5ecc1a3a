use blis_cosim::config::HostSpec;
use blis_cosim::latency::LayerTiming;
use blis_cosim::latency::host::issue;
use blis_cosim::latency::host::plan::*;

fn layer(name: &'static str, repeats: u64) -> LayerTiming {
    LayerTiming {
        name,
        repeats,
        time_ns: 1_000,
        is_comm: false,
    }
}

#[test]
fn the_plan_follows_the_list_it_is_given() {
    let host = HostSpec::default();
    let mut plan = IssuePlan::default();
    let dense = [
        layer("embedding", 1),
        layer("attention", 32),
        layer("sampler", 1),
    ];
    plan.fit(&dense, &host);
    let bound = |layers: &[LayerTiming], mode| -> f64 {
        (layers.iter())
            .map(|l| {
                let cost =
                    f64::from(issue::kernels_of(l.name)) * issue::issue_ns(&host, l.name, mode);
                l.repeats as f64 * (cost + host.launch_ns)
            })
            .sum()
    };
    for mode in MODES {
        assert_eq!(plan.bound(mode).to_bits(), bound(&dense, mode).to_bits());
        let attention = plan.layers()[1];
        assert_eq!(attention.kernels, 2);
        assert_eq!(
            attention.cost(mode),
            issue::issue_ns(&host, "attention", mode)
        );
        assert_eq!(attention.in_graph(mode), issue::in_graph("attention", mode));
    }
    // Another list (attention left out, a block repeated less) is worked out again.
    let other = [layer("embedding", 1), layer("sampler", 1)];
    plan.fit(&other, &host);
    assert_eq!(plan.layers().len(), 2);
    assert_eq!(plan.layers()[1].kernels, 4);
    let fewer = [
        layer("embedding", 1),
        layer("attention", 16),
        layer("sampler", 1),
    ];
    plan.fit(&fewer, &host);
    for mode in MODES {
        assert_eq!(plan.bound(mode).to_bits(), bound(&fewer, mode).to_bits());
    }
}
