//! Pricing a step with weights streamed from CXL memory does not touch the heap.

use std::path::Path;

use blis_cosim::config::{Dtype, ModelArch, Placement, PlacementContext};
use blis_cosim::latency::{
    BatchDesc, BatchItem, Collectives, LatencyBackend, ProfileDb, ProfileSpec, StreamingSpec,
    WeightMemory, WeightStreaming,
};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::allocations;

#[test]
fn pricing_a_step_with_streamed_weights_does_not_allocate() {
    let root = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/data/llmservingsim/profiler/perf"
    ));
    let model = ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap();
    let db = ProfileDb::load(&ProfileSpec {
        root,
        hardware: "RTXPRO6000",
        model: &model,
        dtype: Dtype::Bfloat16,
        kv_cache_fp8: false,
        tp: 1,
        architecture: None,
        max_num_batched_tokens: 2048,
        max_num_seqs: Some(256),
        collectives: Collectives::NONE,
    })
    .unwrap();
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
            fp: 2,
            tp: 1,
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
