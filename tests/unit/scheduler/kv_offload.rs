use blis_cosim::scheduler::kv_offload::{CpuTierSize, TransferLink};

/// A link of 10 GB/s (10 bytes per ns) and 100 ns per transfer.
fn link() -> TransferLink {
    TransferLink::new(10.0, 100)
}

#[test]
fn a_cpu_tier_in_gib_holds_whole_blocks() {
    assert_eq!(CpuTierSize::Blocks(7).blocks(1_000), Some(7));
    // 1 GiB of 16-token blocks of 128 KiB per token (2 MiB a block): 512 blocks.
    assert_eq!(CpuTierSize::Gib(1.0).blocks(2 << 20), Some(512));
    assert_eq!(CpuTierSize::Gib(1.5).blocks(1 << 30), Some(1));
    assert_eq!(CpuTierSize::Gib(1e12).blocks(1), None);
}

#[test]
fn a_transfer_takes_latency_plus_bytes_over_bandwidth() {
    let l = link();
    assert_eq!(l.transfer_ns(0), 0);
    assert_eq!(l.transfer_ns(1_000), 100 + 100);
    assert_eq!(l.transfer_ns(1_009), 100 + 100, "whole ns, rounded down");
    // PCIe 5.0 x16 at 64 GB/s, 2 µs: a 16-token block of 128 KiB per token.
    let pcie = TransferLink::new(64.0, 2_000);
    assert_eq!(pcie.transfer_ns(16 * 131_072), 2_000 + 32_768);
}

#[test]
fn a_reload_on_an_idle_link_waits_only_for_itself() {
    let mut l = link();
    assert_eq!(l.reload(5_000, 0), 0, "nothing to reload");
    assert_eq!(l.reload(5_000, 2_000), 300);
    assert_eq!(l.depth(5_299), 1);
    assert_eq!(l.depth(5_300), 0);
    let s = l.stats();
    assert_eq!((s.reloads, s.reload_wait_ns, s.max_queue_depth), (1, 0, 1));
}

#[test]
fn two_transfers_on_one_link_queue() {
    let mut l = link();
    // An offload of 4 blocks, 3,000 bytes, at t = 1,000: on the link until 1,400.
    assert_eq!(l.offload(1_000, 4, 3_000), 1_400);
    // A reload of 1,000 bytes at t = 1,100 starts when the offload ends (1,400) and takes
    // 200 ns: the step waits 300 ns in the queue, then 200 ns.
    assert_eq!(l.reload(1_100, 1_000), 500);
    // An observer counts the same without dropping anything: both until 1,400, the
    // reload alone until 1,600, none from then.
    let seen = [1_100, 1_399, 1_400, 1_599, 1_600].map(|t| l.depth_at(t));
    assert_eq!(seen, [2, 2, 1, 1, 0]);
    // Split by direction: the offload, then the reload.
    let split = [1_100, 1_400, 1_600].map(|t| l.pending_at(t));
    assert_eq!(split, [(1, 1), (0, 1), (0, 0)]);
    assert_eq!(l.depth(1_100), 2);
    assert_eq!(l.depth(1_400), 1);
    // A third transfer after both ended finds the link idle.
    assert_eq!(l.offload(2_000, 1, 500), 2_150);
    let s = l.stats();
    assert_eq!((s.offloads, s.offloaded_blocks), (2, 5));
    assert_eq!(
        (s.reloads, s.reload_wait_ns, s.max_queue_depth),
        (1, 300, 2)
    );
}
