//! The peer-memory all-reduce kernels vLLM 0.19 dispatches to, hand-computed: rounds of
//! 6 µs plus the bytes into each GPU at 0.79 of the link (H100-SXM: 450 GB/s a direction, so
//! 355.5 bytes/ns).

use blis_cosim::config::{Dtype, Hardware};
use blis_cosim::latency::VllmAllReduce;
use blis_cosim::latency::peer::{self, PeerKernel};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

fn dispatch(hardware: &str, tp: u32) -> VllmAllReduce {
    VllmAllReduce::of(&Hardware::resolve(hardware).unwrap(), tp, Dtype::Bfloat16).unwrap()
}

use PeerKernel::{Multimem, OneShot, TwoShot};

#[test]
fn each_kernel_moves_its_algorithms_bytes_in_its_rounds() {
    // 4 GPUs, 1 MiB: one-shot reads 3 MiB from the peers in one round; two-shot the ring's
    // 1.5 MiB in two; multimem 1.25 MiB each way (its share to the switch for each of the 4
    // loads and its sum once) in two.
    assert_eq!(
        (OneShot.rounds(), OneShot.link_bytes(4, MIB)),
        (1, 3.0 * MIB as f64)
    );
    assert_eq!(
        (TwoShot.rounds(), TwoShot.link_bytes(4, MIB)),
        (2, 1.5 * MIB as f64)
    );
    assert_eq!(
        (Multimem.rounds(), Multimem.link_bytes(4, MIB)),
        (2, 1.25 * MIB as f64)
    );
    assert_eq!(peer::PEER_ROUND_NS, 6_000.0);
    assert_eq!(peer::PEER_LINK_EFFICIENCY, 0.79);
}

#[test]
fn a_small_message_pays_its_rounds_a_large_one_its_bytes() {
    // Small: 32 decodes of hidden 4,096 at 4 GPUs (256 KiB, one-shot):
    // 6,000 + 3 × 262,144 / 355.5 = 8,212.2 ns, three quarters of it the round.
    assert_eq!(OneShot.ns(4, 256 * KIB, 450.0), 8_212);
    // Medium: Llama-3.1-70B's 256-token prefill at 4 GPUs (4 MiB, two-shot):
    // 12,000 + 1.5 × 4 MiB / 355.5 = 29,697.5 ns.
    assert_eq!(TwoShot.ns(4, 4 * MIB, 450.0), 29_697);
    // Large: Llama-3.1-8B's 2,048-token chunk at 4 GPUs (16 MiB, multimem):
    // 12,000 + 1.25 × 16 MiB / 355.5 = 70,991.6 ns, five sixths of it the bytes.
    assert_eq!(Multimem.ns(4, 16 * MIB, 450.0), 70_992);
}

#[test]
fn hopper_at_tp_4_switches_one_shot_two_shot_multimem_then_nccl() {
    let d = dispatch("H100-SXM", 4);
    // One-shot below 512 KiB: 6,000 + 3 × 524,272 / 355.5 = 10,424.2 ns.
    assert_eq!(d.kernel(512 * KIB - 16), Some(OneShot));
    assert_eq!(d.kernel_ns(512 * KIB - 16), Some(10_424));
    // Two-shot from 512 KiB: 12,000 + 1.5 × 524,288 / 355.5 = 14,212.2 ns.
    assert_eq!(d.kernel(512 * KIB), Some(TwoShot));
    assert_eq!(d.kernel_ns(512 * KIB), Some(14_212));
    // Up to the custom limit (8 MiB): 12,000 + 1.5 × 8,388,592 / 355.5 = 47,394.9 ns.
    assert_eq!(d.kernel_ns(8 * MIB - 16), Some(47_395));
    // Symmetric memory from 8 MiB, multimem at 4 GPUs on capability 9.0.
    assert_eq!(d.kernel(8 * MIB), Some(Multimem));
    assert_eq!(d.kernel_ns(16 * MIB), Some(70_992));
    // NCCL from 32 MiB: the ring prices it.
    assert_eq!(d.kernel(32 * MIB), None);
    assert_eq!(d.kernel_ns(32 * MIB), None);
}

#[test]
fn two_gpus_run_one_shot_and_torchs_two_shot_eight_gpus_multimem() {
    // TP 2: the custom kernel is always one-shot (6,000 + 4 MiB / 355.5 = 17,798.3 ns);
    // symmetric memory runs torch's two-shot at 2 GPUs (12,000 + 16 MiB / 355.5 =
    // 59,193.3 ns).
    let d = dispatch("H100-SXM", 2);
    assert_eq!(d.kernel_ns(4 * MIB), Some(17_798));
    assert_eq!(d.kernel(16 * MIB), Some(TwoShot));
    assert_eq!(d.kernel_ns(16 * MIB), Some(59_193));
    // TP 8: custom (one-shot) below 256 KiB, 6,000 + 7 × 262,128 / 355.5 = 11,161.5 ns;
    // multimem from there, 12,000 + 9/8 × 262,144 / 355.5 = 12,829.6 ns.
    let d = dispatch("H100-SXM", 8);
    assert_eq!(d.kernel_ns(256 * KIB - 16), Some(11_161));
    assert_eq!(d.kernel(256 * KIB), Some(Multimem));
    assert_eq!(d.kernel_ns(256 * KIB), Some(12_830));
    // B200 (10.0) runs multimem at 6 and 8 GPUs only: two-shot at 4.
    assert_eq!(dispatch("B200", 4).kernel(16 * MIB), Some(TwoShot));
    assert_eq!(dispatch("B200", 8).kernel(16 * MIB), Some(Multimem));
}

#[test]
fn off_nvswitch_every_kernel_is_the_rings() {
    // RTX PRO 6000 at TP 2 takes the custom kernel over PCIe peer access, which no table
    // times: the ring prices it.
    let d = dispatch("RTXPRO6000", 2);
    assert_eq!(d.kernel(4 * MIB), Some(OneShot));
    assert_eq!(d.kernel_ns(4 * MIB), None);
}
