//! Pricing steps with decode attention on PIM, plain and interleaved, does not touch the heap.

use rtxpro6000_db::shared_data;

use blis_cosim::config::{Dtype, ModelArch};
use blis_cosim::latency::{
    BatchDesc, BatchItem, LatencyBackend, PimOffload, PimSpec, WeightMemory,
};

use crate::counting_alloc;

use crate::rtxpro6000_db;

use counting_alloc::allocations;
use rtxpro6000_db::rtxpro6000_db;

#[test]
fn pricing_steps_with_pim_attention_does_not_allocate() {
    if !shared_data::available() {
        return;
    }
    let model = ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap();
    let item = |new_tokens, context_tokens| BatchItem {
        new_tokens,
        context_tokens,
    };
    let batches: Vec<Vec<BatchItem>> = vec![
        vec![item(10, 0)],
        vec![item(1, 128), item(1, 128), item(1, 512)],
        vec![item(300, 4096), item(1, 20), item(1, 9000)],
        (0..200).map(|i| item(1, 100 + i)).collect(),
    ];
    for sub_batch in [false, true] {
        let db = rtxpro6000_db(&model, 1);
        // LLMServingSim's DDR4 PIM in 512 GB of host memory: 64 channels.
        let mut backend = PimOffload::new(
            Box::new(db),
            PimSpec {
                channels: 64,
                slope_ns: 333.2538,
                intercept_ns: 30675.2739,
                memory: WeightMemory {
                    bandwidth_gbps: 1638.4,
                    latency_ns: 13.0,
                },
                heads: model.num_heads,
                kv_heads: model.num_kv_heads,
                head_dim: model.head_dim,
                tp: 1,
                bytes: Dtype::Bfloat16.served(Dtype::Bfloat16),
                num_layers: model.num_layers,
                sub_batch,
            },
        )
        .unwrap();
        let before = allocations();
        let mut total = 0;
        for batch in &batches {
            total += backend.step_time(&BatchDesc::new(batch)).unwrap();
        }
        assert_eq!(allocations() - before, 0, "sub_batch {sub_batch}");
        assert!(total > 0);
    }
}
