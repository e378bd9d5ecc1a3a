use blis_cosim::config::HostSpec;
use blis_cosim::latency::host::issue;
use blis_cosim::latency::host::issue::Served;
use blis_cosim::latency::host::plan::*;
use blis_cosim::latency::{LayerTiming, StepMode};

/// A model with its linear layers and experts in FP8.
const FP8: Served = Served {
    fp8: true,
    residual_adds: false,
};

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
    plan.fit(&dense, &host, Served::default());
    let bound = |layers: &[LayerTiming], mode| -> f64 {
        (layers.iter())
            .map(|l| {
                let kernels = issue::launches_of(l.name, mode, Served::default()).kernels();
                let cost =
                    f64::from(kernels) * issue::issue_ns(&host, l.name, mode, Served::default());
                l.repeats as f64 * (cost + host.launch_ns)
            })
            .sum()
    };
    for mode in MODES {
        assert_eq!(plan.bound(mode).to_bits(), bound(&dense, mode).to_bits());
        let attention = plan.layers()[1];
        assert_eq!(attention.kernels(mode), 2);
        assert_eq!(
            attention.cost(mode),
            issue::issue_ns(&host, "attention", mode, Served::default())
        );
        assert_eq!(attention.in_graph(mode), issue::in_graph("attention", mode));
    }
    // Another list (attention left out, a block repeated less) is worked out again.
    let other = [layer("embedding", 1), layer("sampler", 1)];
    plan.fit(&other, &host, Served::default());
    assert_eq!(plan.layers().len(), 2);
    assert_eq!(plan.layers()[1].kernels(StepMode::Eager), 4);
    let fewer = [
        layer("embedding", 1),
        layer("attention", 16),
        layer("sampler", 1),
    ];
    plan.fit(&fewer, &host, Served::default());
    for mode in MODES {
        assert_eq!(plan.bound(mode).to_bits(), bound(&fewer, mode).to_bits());
    }
}

#[test]
fn an_fp8_plan_issues_the_quantizations_in_eager_mode_alone() {
    // 32 FP8 QKV projections and 32 FP8 fused-MoE layers, default host: eager, each
    // projection is two ops (22.6 µs each) and each MoE layer seven ops, four launches inside
    // them (3 µs each) and two Triton launches (50.1 µs each); every layer also bounds a
    // graph launch (3 µs).
    let host = HostSpec::default();
    let layers = [layer("qkv_proj", 32), layer("experts", 32)];
    let mut plan = IssuePlan::default();
    plan.fit(&layers, &host, FP8);
    let eager = 32.0 * (2.0 * 22_600.0 + 3_000.0)
        + 32.0 * (7.0 * 22_600.0 + 4.0 * 3_000.0 + 2.0 * 50_100.0 + 3_000.0);
    assert!((plan.bound(StepMode::Eager) - eager).abs() < 1e-6);
    assert_eq!(plan.layers()[0].kernels(StepMode::Eager), 2);
    assert_eq!(plan.layers()[1].kernels(StepMode::Eager), 13);
    // Compiled and graph-replayed, the plan is the 16-bit one.
    let mut sixteen = IssuePlan::default();
    sixteen.fit(&layers, &host, Served::default());
    for mode in [StepMode::Compiled, StepMode::Piecewise, StepMode::Full] {
        assert_eq!(plan.bound(mode).to_bits(), sixteen.bound(mode).to_bits());
        for (a, b) in plan.layers().iter().zip(sixteen.layers()) {
            assert_eq!(a.kernels(mode), b.kernels(mode));
            assert_eq!(a.cost(mode).to_bits(), b.cost(mode).to_bits());
        }
    }
    assert_eq!(sixteen.layers()[0].kernels(StepMode::Eager), 1);
    assert_eq!(sixteen.layers()[1].kernels(StepMode::Eager), 7);
}
