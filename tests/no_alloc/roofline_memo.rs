//! The roofline with its memoised token-wise layers prices steps without touching the heap:
//! the memo takes all its memory when it is made.

use blis_cosim::config::{Dtype, Hardware, ModelArch};
use blis_cosim::latency::{BatchDesc, BatchItem, LatencyBackend, MemoisedRoofline, Roofline};

use crate::counting_alloc;

use counting_alloc::allocations;

#[test]
fn pricing_steps_through_the_memo_does_not_allocate() {
    let model = ModelArch::resolve("Llama-3.1-8B").unwrap();
    let hardware = Hardware::resolve("H100").unwrap();
    let mut backend = MemoisedRoofline::new(Roofline::new(&model, &hardware, 1, Dtype::Bfloat16));
    let item = |new_tokens, context_tokens| BatchItem {
        new_tokens,
        context_tokens,
    };
    // Misses (new token shapes) and hits (the same shapes, contexts one token longer), more
    // prefills than fit on the stack included.
    let batches: Vec<Vec<BatchItem>> = (0..200u32)
        .map(|step| match step % 4 {
            0 => vec![item(10 + step, 0)],
            1 => (0..64).map(|i| item(1, 100 * i + step)).collect(),
            2 => vec![item(300, 4096), item(1, 20 + step), item(1, 9000)],
            _ => (0..40).map(|i| item(2 + i, step)).collect(),
        })
        .collect();
    let mut layers = Vec::with_capacity(64);
    let before = allocations();
    let mut total = 0;
    for batch in &batches {
        let desc = BatchDesc::new(batch);
        total += backend.step_time(&desc).unwrap();
        backend.layer_times(&desc, &mut layers).unwrap();
        total += backend.step_parts(&desc).unwrap().block_ns;
    }
    assert_eq!(allocations() - before, 0);
    assert!(total > 0);
    let stats = backend.stats();
    assert!(stats.hits > 0 && stats.misses > 0, "{stats:?}");
}
