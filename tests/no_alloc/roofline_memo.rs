//! The roofline with its memoised token-wise layers prices steps without touching the heap:
//! the memo takes all its memory when it is made.

use blis_cosim::config::{Dtype, Hardware, ModelArch};
use blis_cosim::latency::{
    BatchDesc, BatchItem, DecodeLead, GraphOptions, GraphPolicy, HostModel, LatencyBackend,
    MemoisedRoofline, Roofline, SharedBackend, SharedHost,
};

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

#[test]
fn pure_decodes_priced_from_their_sums_do_not_allocate() {
    let model = ModelArch::resolve("Llama-3.1-8B").unwrap();
    let hardware = Hardware::resolve("H100").unwrap();
    let roofline = Roofline::new(&model, &hardware, 1, Dtype::Bfloat16);
    let memoised = SharedBackend::new(MemoisedRoofline::new(roofline));
    let policy = GraphPolicy::resolve(&GraphOptions::default(), 128, 2048).unwrap();
    let host = HostModel::over_roofline(&memoised, hardware.host, policy, true);
    let shared = SharedBackend::new(host);
    let mut instances = [SharedHost::new(&shared), SharedHost::new(&shared)];
    // Two instances' stretches of 8 and 40 decodes, their contexts growing; the sizes change
    // (a size resolved again) every 50 steps.
    let batches: Vec<Vec<BatchItem>> = (0..400u32)
        .map(|step| {
            let size = if step % 2 == 0 { 8 } else { 40 } + step / 100;
            (0..size)
                .map(|i| BatchItem {
                    new_tokens: 1,
                    context_tokens: 500 * i + step,
                })
                .collect()
        })
        .collect();
    let price = |instances: &mut [SharedHost; 2], batches: &[Vec<BatchItem>]| {
        let mut total = 0;
        for (step, items) in batches.iter().enumerate() {
            let lead = DecodeLead::summing(items).unwrap();
            let batch = BatchDesc::new(items)
                .with_back_to_back(true)
                .with_decode_lead(lead);
            total += instances[step % 2].step_time(&batch).unwrap();
        }
        total
    };
    // The first steps work out the host's layer buffer and issue plan (allocated once).
    price(&mut instances, &batches[..4]);
    let before = allocations();
    let total = price(&mut instances, &batches);
    assert_eq!(allocations() - before, 0);
    assert!(total > 0);
    // Most steps were priced from their sums: the chain's memo saw few of them.
    let stats = memoised.with(|m| m.stats());
    assert!(stats.hits + stats.misses < 100, "{stats:?}");
}
