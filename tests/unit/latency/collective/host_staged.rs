//! Unit tests of `blis_cosim::latency::host_staged`: collectives on GPUs without peer access.

use blis_cosim::latency::{CommLink, host_staged};

/// A link whose GPUs stage collectives through host memory; its ring numbers are not used.
const STAGED: CommLink = CommLink {
    bandwidth_gbps: 32.0 * 0.654 * 1e9 / (1u64 << 30) as f64,
    latency_ns: 2_000.0,
    local_mem_gbps: 0.0,
    through_host: true,
};

/// The constants are what the module's cited nccl-tests times give (RTX 4090s, stock
/// driver): an 8-byte all-reduce over 8 GPUs (14 ring steps) at 42.14 µs out of place and
/// 40.06 µs in place (NVIDIA/nccl#1530); the seven 8-64-byte all-to-all times over 2 GPUs
/// with P2P off (one step; tinygrad/open-gpu-kernel-modules#17); 18 GB/s of bus bandwidth
/// over 4 GPUs on SHM (NVIDIA/nccl#1603).
#[test]
fn the_constants_follow_from_the_cited_nccl_tests_runs() {
    let eight_gpus_us = (42.14 + 40.06) / 2.0;
    let mut two_gpus_us = [11.87, 11.79, 11.92, 11.27, 11.64, 11.47, 11.46];
    two_gpus_us.sort_by(f64::total_cmp);
    let two_gpus_us = two_gpus_us[3];
    let to_10ns = |us: f64| ((us * 100.0).round() * 10.0) as u64;
    let step = to_10ns((eight_gpus_us - two_gpus_us) / 13.0);
    assert_eq!(step, host_staged::STEP_NS);
    assert_eq!(to_10ns(two_gpus_us) - step, host_staged::BASE_NS);
    assert_eq!(host_staged::BUS_GBPS, 18.0);
    // The model meets its two small-message points within 0.1 µs.
    assert_eq!(host_staged::BASE_NS + host_staged::STEP_NS, 11_640);
    assert_eq!(host_staged::all_reduce_ns(8, 8), 41_150);
}

#[test]
fn all_reduces_through_host_memory_are_priced_by_hand() {
    // 2 GPUs, 8 KiB: 9,370 + 2 · 2,270 ns, and 8,192 · 2/2 bus bytes at 18 B/ns (455.1).
    assert_eq!(host_staged::all_reduce_ns(2, 8192), 13_910 + 455);
    // 4 GPUs, a 9-sequence Llama-8B decode (9 × 4,096 × 2 = 73,728 B): 6 steps,
    // 73,728 · 6/4 = 110,592 bus bytes = 6,144 ns.
    assert_eq!(
        host_staged::all_reduce_ns(4, 73_728),
        9_370 + 6 * 2_270 + 6_144
    );
    // 8 GPUs, a 206-token Llama-8B prefill (1,687,552 B): 14 steps, 2,953,216 bus bytes =
    // 164,067.6 ns.
    assert_eq!(
        host_staged::all_reduce_ns(8, 1_687_552),
        9_370 + 14 * 2_270 + 164_067
    );
    // One GPU communicates nothing.
    assert_eq!(host_staged::all_reduce_ns(1, 8192), 0);
    assert_eq!(host_staged::all_reduce_ns(0, 8192), 0);
}

#[test]
fn gathers_and_scatters_take_half_the_steps() {
    // All-gather of 1,000 B per rank over 2: one step, 2,000 · 1/2 bus bytes (55.6 ns).
    assert_eq!(host_staged::all_gather_ns(2, 1000), 9_370 + 2_270 + 55);
    // Reduce-scatter of 6,400 B over 4: 3 steps, 4,800 bus bytes (266.7 ns).
    assert_eq!(
        host_staged::reduce_scatter_ns(4, 6400),
        9_370 + 3 * 2_270 + 266
    );
    assert_eq!(host_staged::all_gather_ns(1, 1000), 0);
    assert_eq!(host_staged::reduce_scatter_ns(1, 6400), 0);
}

#[test]
fn a_link_without_peer_access_prices_every_collective_through_host_memory() {
    for (n, bytes) in [(2, 8192), (4, 73_728), (8, 1_687_552)] {
        assert_eq!(
            STAGED.all_reduce_ns(n, bytes),
            host_staged::all_reduce_ns(n, bytes)
        );
        assert_eq!(
            STAGED.all_gather_ns(n, bytes),
            host_staged::all_gather_ns(n, bytes)
        );
        assert_eq!(
            STAGED.reduce_scatter_ns(n, bytes),
            host_staged::reduce_scatter_ns(n, bytes)
        );
    }
    // The same link with peer access keeps the ring: 2 steps of 4,096 B at 20.928 B/ns
    // (⌊2,000 + 195.7⌋ + 10 each) + 10, no reduction (no local-memory bandwidth).
    let peer = CommLink {
        through_host: false,
        ..STAGED
    };
    assert_eq!(peer.all_reduce_ns(2, 8192), 2 * 2_205 + 10);
}
