//! Unit tests of `blis_cosim::runner::backend`.

use blis_cosim::config::{Hardware, ModelArch};
use blis_cosim::latency::{BatchDesc, LatencyBackend, MemoisedRoofline, Roofline};
use blis_cosim::latency::{BatchItem, MemoStats};
use blis_cosim::runner::backend::*;
use blis_cosim::setup::EngineOptions;
use blis_cosim::setup::InstanceConfig;

fn llama_on_h100(tp: u32) -> InstanceConfig {
    let model = ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap();
    let hardware = Hardware::resolve("H100-SXM").unwrap();
    EngineOptions::default().instance(0, model, hardware, tp)
}

#[test]
fn instances_that_price_alike_share_one_memoised_roofline() {
    let rooflines = Rooflines::default();
    let (a, b, wider) = (llama_on_h100(1), llama_on_h100(1), llama_on_h100(2));
    let (mut on_a, mut on_b) = (rooflines.of(&a, ""), rooflines.of(&b, ""));
    let mut on_wider = rooflines.of(&wider, "");
    let items = [
        BatchItem {
            new_tokens: 300,
            context_tokens: 0,
        },
        BatchItem {
            new_tokens: 1,
            context_tokens: 700,
        },
    ];
    let batch = BatchDesc::new(&items);
    let alone = |inst: &InstanceConfig| {
        let roofline = Roofline::new(&inst.model, &inst.hardware, inst.tp, inst.dtype)
            .with_expert_parallel(&inst.model, inst.collectives)
            .with_tp_link(inst.collectives);
        MemoisedRoofline::new(roofline).step_time(&batch).unwrap()
    };
    assert_eq!(on_a.step_time(&batch).unwrap(), alone(&a));
    // B's step is A's memo hits (the step's two totals): the same backend, priced once.
    assert_eq!(on_b.step_time(&batch).unwrap(), alone(&b));
    assert_eq!(
        on_b.with(MemoisedRoofline::totals_stats),
        MemoStats { hits: 2, misses: 2 }
    );
    // The share tells the layer list its roofline priced last, which a host model over
    // it reads to skip listing the layers again.
    assert!(on_b.last_layer_list().is_some());
    assert_eq!(
        on_b.last_layer_list(),
        on_b.with(MemoisedRoofline::last_layer_list)
    );
    // TP 2 prices differently: a roofline of its own.
    assert_eq!(on_wider.step_time(&batch).unwrap(), alone(&wider));
    assert_ne!(alone(&wider), alone(&a));
    assert_eq!(
        on_wider.with(MemoisedRoofline::totals_stats),
        MemoStats { hits: 0, misses: 2 }
    );
    assert_eq!(rooflines.built_count(), 2);
}
