//! `ProfileDb::step_time` prices a step without touching the heap, skewed batches included.

use rtxpro6000_db::shared_data;

use blis_cosim::config::ModelArch;
use blis_cosim::latency::{BatchDesc, BatchItem, LatencyBackend};

use crate::counting_alloc;

use crate::rtxpro6000_db;

use counting_alloc::allocations;
use rtxpro6000_db::rtxpro6000_db;

#[test]
fn pricing_a_step_does_not_allocate() {
    if !shared_data::available() {
        return;
    }
    for (name, tp) in [
        ("meta-llama/Llama-3.1-8B", 1),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", 2),
    ] {
        let model = ModelArch::resolve(name).unwrap();
        let mut db = rtxpro6000_db(&model, tp);
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
