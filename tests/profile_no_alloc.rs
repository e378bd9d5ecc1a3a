//! `ProfileDb::step_time` prices a step without touching the heap, skewed batches included.

use std::path::Path;

use blis_cosim::config::{Dtype, ModelArch};
use blis_cosim::latency::{BatchDesc, BatchItem, LatencyBackend, ProfileDb, ProfileSpec};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::allocations;

#[test]
fn pricing_a_step_does_not_allocate() {
    let root = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/data/llmservingsim/profiler/perf"
    ));
    for (name, tp) in [
        ("meta-llama/Llama-3.1-8B", 1),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", 2),
    ] {
        let model = ModelArch::resolve(name).unwrap();
        let mut db = ProfileDb::load(&ProfileSpec {
            root,
            hardware: "RTXPRO6000",
            model: &model,
            dtype: Dtype::Bfloat16,
            kv_cache_fp8: false,
            tp,
            architecture: None,
            max_num_batched_tokens: 2048,
            max_num_seqs: Some(256),
            collectives: blis_cosim::latency::Collectives::NONE,
        })
        .unwrap();
        let item = |new_tokens, context_tokens| BatchItem {
            new_tokens,
            context_tokens,
        };
        let batches: Vec<Vec<BatchItem>> = vec![
            vec![item(10, 0)],
            vec![item(1, 128), item(1, 128), item(1, 128), item(1, 512)],
            vec![item(300, 4096), item(1, 20), item(1, 9000), item(1, 300)],
            (0..300).map(|i| item(1, 100 * i)).collect(),
        ];
        let before = allocations();
        let mut total = 0;
        for batch in &batches {
            total += db.step_time(&BatchDesc::new(batch)).unwrap();
        }
        assert_eq!(allocations() - before, 0, "{name}");
        assert!(total > 0);
    }
}
