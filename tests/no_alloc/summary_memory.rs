//! The summary's memory does not grow with generated tokens: inter-token gaps are kept as a
//! count per distinct gap, so recording requests 40 or 40,000 tokens long allocates the
//! same, and the percentiles stay numpy's, exactly.

use crate::counting_alloc;

use blis_cosim::metrics::{Itl, RequestRecord, SummaryCollector};
use counting_alloc::{allocated_bytes, allocations};

/// Gaps cycling through 40 distinct step times.
fn gaps(n: usize) -> Vec<u64> {
    (0..n)
        .map(|i| 5_000_000 + (i as u64 * 7919) % 40 * 1_000)
        .collect()
}

fn record(itl_ns: &[u64]) -> RequestRecord<'_> {
    RequestRecord {
        instance_id: 0,
        request_id: 0,
        model: "m",
        input_toks: 10,
        output_toks: itl_ns.len() as u32 + 1,
        arrival_ns: 0,
        first_token_ns: 1_000_000,
        end_ns: 1_000_000 + itl_ns.iter().sum::<u64>(),
        queuing_delay_ns: 0,
        itl_ns: Itl::Listed(itl_ns),
        pd: None,
    }
}

/// Allocations and bytes allocated recording 500 requests of `tokens` gaps each.
fn allocations_recording(tokens: usize) -> (u64, u64) {
    let itl = gaps(tokens);
    let mut collector = SummaryCollector::new();
    let before = (allocations(), allocated_bytes());
    for _ in 0..500 {
        collector.record(&record(&itl));
    }
    (allocations() - before.0, allocated_bytes() - before.1)
}

#[test]
fn recording_longer_outputs_allocates_nothing_more() {
    // Both see the same 40 distinct gaps, the second a thousand times over.
    assert_eq!(allocations_recording(40_000), allocations_recording(40));
}
