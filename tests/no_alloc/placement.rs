//! Pricing a step with weights streamed from CXL memory does not touch the heap.

use rtxpro6000_db::shared_data;

use blis_cosim::config::{Dtype, ModelArch, Placement, PlacementContext};
use blis_cosim::latency::{
    BatchDesc, BatchItem, LatencyBackend, StreamingSpec, WeightMemory, WeightStreaming,
};

use crate::counting_alloc;

use crate::rtxpro6000_db;

use counting_alloc::allocations;
use rtxpro6000_db::rtxpro6000_db;

#[test]
fn pricing_a_step_with_streamed_weights_does_not_allocate() {
    if !shared_data::available() {
        return;
    }
    let model = ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap();
    let db = rtxpro6000_db(&model, 1);
    let placement = Placement::parse(
        &serde_json::json!({
            "default": {"weights": "cpu"},
            "blocks": [{"blocks": "0-7", "weights": "cxl:0"}, {"blocks": "8-15", "weights": "cxl:1"}],
            "layers": {"lm_head": {"weights": "cxl:1"}, "o_proj": {"weights": "npu"}}
        }),
        &PlacementContext {
            source: "t",
            at: "placement",
            num_blocks: model.num_layers,
            cxl_devices: Some(2),
        },
    )
    .unwrap();
    let memory = |bw| WeightMemory {
        bandwidth_gbps: bw,
        latency_ns: 250.0,
    };
    let mut backend = WeightStreaming::new(
        Box::new(db),
        &StreamingSpec {
            placement: &placement,
            model: &model,
            bytes: Dtype::Bfloat16.served(Dtype::Bfloat16),
            tp: 1,
            ep: 1,
            cpu: memory(256.0),
            cxl: Some((memory(60.0), 2)),
        },
    )
    .unwrap();
    let item = |new_tokens, context_tokens| BatchItem {
        new_tokens,
        context_tokens,
    };
    let batches: Vec<Vec<BatchItem>> = vec![
        vec![item(10, 0)],
        vec![item(1, 128), item(1, 128), item(1, 512)],
        vec![item(300, 4096), item(1, 20), item(1, 9000)],
    ];
    let before = allocations();
    let mut total = 0;
    for batch in &batches {
        total += backend.step_time(&BatchDesc::new(batch)).unwrap();
    }
    assert_eq!(allocations() - before, 0);
    assert!(total > 0);
}
