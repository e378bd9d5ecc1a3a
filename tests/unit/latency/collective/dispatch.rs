//! vLLM 0.19's all-reduce dispatch and its copies, hand-computed from vLLM's tables
//! (`all_reduce_utils.py`) and the bundled hardware files.

use blis_cosim::config::{Dtype, Hardware, TpFabric};
use blis_cosim::latency::{AllReducePath, Collectives, CommLink, VllmAllReduce};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

fn dispatch(hardware: &str, tp: u32, dtype: Dtype) -> VllmAllReduce {
    VllmAllReduce::of(&Hardware::resolve(hardware).unwrap(), tp, dtype).unwrap()
}

/// The path of each message size, in order.
fn paths(d: &VllmAllReduce, sizes: &[u64]) -> Vec<AllReducePath> {
    sizes.iter().map(|&s| d.path(s)).collect()
}

use AllReducePath::{Custom, Nccl, SymmetricMemory as Symm};

#[test]
fn hopper_at_tp_4_takes_custom_below_8_mib_symmetric_memory_below_32_mib_then_nccl() {
    // Custom: min(8 MiB, CUSTOM_ALL_REDUCE_MAX_SIZES["9.0"][4] = 32 MiB); symmetric memory:
    // SYMM_MEM_ALL_REDUCE_MAX_SIZES["9.0"][4] = 32 MiB; both exclusive.
    for hardware in ["H100-SXM", "H200"] {
        let d = dispatch(hardware, 4, Dtype::Bfloat16);
        let sizes = [16, 8 * MIB - 16, 8 * MIB, 32 * MIB - 4, 32 * MIB, 64 * MIB];
        assert_eq!(paths(&d, &sizes), [Custom, Custom, Symm, Symm, Nccl, Nccl]);
    }
}

#[test]
fn hopper_lowers_the_custom_limit_by_world_size_where_symmetric_memory_is_up() {
    let h100 = |tp| dispatch("H100-SXM", tp, Dtype::Bfloat16);
    // TP 2: min(8 MiB, 64 MiB); symmetric memory below 64 MiB.
    let sizes = [8 * MIB - 16, 8 * MIB, 64 * MIB - 4, 64 * MIB];
    assert_eq!(paths(&h100(2), &sizes), [Custom, Symm, Symm, Nccl]);
    // TP 6: 512 KiB, TP 8: 256 KiB; symmetric memory below 64 MiB at both.
    let sizes = [512 * KIB - 16, 512 * KIB, 64 * MIB - 4, 64 * MIB];
    assert_eq!(paths(&h100(6), &sizes), [Custom, Symm, Symm, Nccl]);
    let sizes = [256 * KIB - 16, 256 * KIB, 64 * MIB - 4, 64 * MIB];
    assert_eq!(paths(&h100(8), &sizes), [Custom, Symm, Symm, Nccl]);
}

#[test]
fn b200_takes_its_own_tables() {
    // "10.0": custom 2 MiB at TP 2 and 4, 1 MiB at 8; symmetric memory 8 / 32 / 128 MiB.
    let b200 = |tp| dispatch("B200", tp, Dtype::Bfloat16);
    let sizes = [2 * MIB - 16, 2 * MIB, 8 * MIB - 4, 8 * MIB];
    assert_eq!(paths(&b200(2), &sizes), [Custom, Symm, Symm, Nccl]);
    let sizes = [2 * MIB - 16, 2 * MIB, 32 * MIB - 4, 32 * MIB];
    assert_eq!(paths(&b200(4), &sizes), [Custom, Symm, Symm, Nccl]);
    let sizes = [MIB - 16, MIB, 128 * MIB - 4, 128 * MIB];
    assert_eq!(paths(&b200(8), &sizes), [Custom, Symm, Symm, Nccl]);
}

#[test]
fn symmetric_memory_takes_bfloat16_alone_and_still_lowers_the_custom_limit() {
    // Its communicator is up whatever the model's dtype (so the custom limit is Hopper's
    // table's), but `should_use_symm_mem` refuses a float16 message: NCCL takes it.
    let d = dispatch("H100-SXM", 8, Dtype::Float16);
    let sizes = [256 * KIB - 16, 256 * KIB, 16 * MIB];
    assert_eq!(paths(&d, &sizes), [Custom, Nccl, Nccl]);
    // FP8 serving keeps bfloat16 activations.
    let fp8 = VllmAllReduce::of(
        &Hardware::resolve("H100-SXM").unwrap(),
        4,
        Dtype::Fp8.activations(),
    );
    assert_eq!(fp8.unwrap().path(16 * MIB), Symm);
}

#[test]
fn a_message_whose_bytes_are_not_aligned_skips_the_custom_kernel() {
    // Custom needs a multiple of 16 bytes, symmetric memory of 4.
    let d = dispatch("H100-SXM", 4, Dtype::Bfloat16);
    assert_eq!(paths(&d, &[1_002, 1_004, 1_006]), [Nccl, Symm, Nccl]);
    assert_eq!(d.path(1_008), Custom);
}

#[test]
fn ampere_has_no_symmetric_memory_and_keeps_the_8_mib_custom_limit() {
    let d = dispatch("A100-80G", 8, Dtype::Bfloat16);
    assert_eq!(paths(&d, &[8 * MIB - 16, 8 * MIB]), [Custom, Nccl]);
}

#[test]
fn pcie_runs_the_custom_kernel_at_two_gpus_with_peer_access_only() {
    // RTX PRO 6000 (peer access): custom at TP 2 below 8 MiB; refused beyond two PCIe GPUs.
    let pro = |tp| dispatch("RTXPRO6000", tp, Dtype::Bfloat16);
    assert_eq!(paths(&pro(2), &[8 * MIB - 16, 8 * MIB]), [Custom, Nccl]);
    assert_eq!(paths(&pro(4), &[16, 8 * MIB - 16]), [Nccl, Nccl]);
    // RTX 4090 (no peer access): NCCL at any size.
    let gf = dispatch("RTX4090", 2, Dtype::Bfloat16);
    assert_eq!(paths(&gf, &[16, 8 * MIB - 16]), [Nccl, Nccl]);
}

#[test]
fn a_world_size_outside_vllms_lists_runs_on_nccl() {
    // Custom all-reduce runs at 2, 4, 6 or 8 GPUs; symmetric memory at its table's sizes.
    let d = dispatch("H100-SXM", 3, Dtype::Bfloat16);
    assert_eq!(paths(&d, &[16, 16 * MIB]), [Nccl, Nccl]);
}

#[test]
fn no_dispatch_at_tp_1_or_where_the_hardware_file_does_not_say_what_decides_it() {
    let mut h100 = Hardware::resolve("H100-SXM").unwrap();
    assert_eq!(VllmAllReduce::of(&h100, 1, Dtype::Bfloat16), None);
    h100.tp_fabric = None;
    assert_eq!(VllmAllReduce::of(&h100, 4, Dtype::Bfloat16), None);
    h100.tp_fabric = Some(TpFabric::Nvswitch);
    h100.compute_capability = None;
    assert_eq!(VllmAllReduce::of(&h100, 4, Dtype::Bfloat16), None);
}

#[test]
fn the_custom_kernel_copies_its_input_outside_a_graph_and_symmetric_memory_copies_twice() {
    let d = dispatch("H100-SXM", 4, Dtype::Bfloat16);
    for graphed in [false, true] {
        assert_eq!(d.copies(4 * MIB, graphed), u64::from(!graphed));
        assert_eq!(d.copies(16 * MIB, graphed), 2);
        assert_eq!(d.copies(32 * MIB, graphed), 0);
    }
}

#[test]
fn a_copy_streams_its_reads_and_writes_as_an_elementwise_kernel() {
    // H100-SXM: 3,350 GB/s × 0.9 = 3,015 bytes/ns, 500 ns a kernel, at least 2,120 ns.
    let d = dispatch("H100-SXM", 4, Dtype::Bfloat16);
    // Llama-3.1-8B's 2,048-token chunk, 16 MiB on symmetric memory: two copies of
    // 2 × 16 MiB / 3,015 + 500 = 11,629.2 ns.
    assert_eq!(d.copies_ns(16 * MIB, false), 2 * 11_629);
    assert_eq!(d.copies_ns(16 * MIB, true), 2 * 11_629);
    // Llama-3.1-70B's 256-token prefill, 4 MiB on the custom kernel: one copy of
    // 8 MiB / 3,015 + 500 = 3,282.3 ns outside a graph, none replayed.
    assert_eq!(d.copies_ns(4 * MIB, false), 3_282);
    assert_eq!(d.copies_ns(4 * MIB, true), 0);
    // 32 decodes of hidden 4,096 (256 KiB): 673.9 ns, below the least kernel time.
    assert_eq!(d.copies_ns(256 * KIB, false), 2_120);
    // NCCL copies nothing.
    assert_eq!(d.copies_ns(32 * MIB, false), 0);
}

#[test]
fn a_tp_all_reduce_in_a_step_is_its_kernel_plus_its_copies() {
    let h100 = Hardware::resolve("H100-SXM").unwrap();
    let link = CommLink {
        bandwidth_gbps: 450.0 * 0.654 * 1e9 / f64::from(1u32 << 30),
        latency_ns: 1_000.0,
        local_mem_gbps: 0.0,
        through_host: false,
    };
    let ring_only = Collectives {
        tp: 4,
        tp_link: Some(link),
        ..Collectives::NONE
    };
    let vllm = Collectives {
        tp_dispatch: VllmAllReduce::of(&h100, 4, Dtype::Bfloat16),
        ..ring_only
    };
    // 2,048 tokens of hidden 4,096: the ring's 91,576 ns without a dispatch; with vLLM's,
    // multimem's 70,992 ns (`peer.rs`) plus two 16 MiB copies.
    let ring = ring_only.tp_all_reduce_ns(2048, 4096, 2);
    assert_eq!(ring, 91_576);
    assert_eq!(ring_only.tp_all_reduce_step_ns(2048, 4096, 2, false), ring);
    assert_eq!(
        vllm.tp_all_reduce_step_ns(2048, 4096, 2, false),
        70_992 + 23_258
    );
    // 256 tokens of hidden 8,192 (4 MiB): two-shot's 29,697 ns (`peer.rs`), its copy outside
    // a graph only.
    assert_eq!(
        vllm.tp_all_reduce_step_ns(256, 8192, 2, false),
        29_697 + 3_282
    );
    assert_eq!(vllm.tp_all_reduce_step_ns(256, 8192, 2, true), 29_697);
    // 2,048 tokens of hidden 8,192 (32 MiB) run on NCCL: the ring alone.
    let ring = vllm.tp_all_reduce_ns(2048, 8192, 2);
    assert_eq!(ring, 177_088);
    assert_eq!(vllm.tp_all_reduce_step_ns(2048, 8192, 2, false), ring);
    // Without a link nothing is priced, copies included.
    let unlinked = Collectives {
        tp_link: None,
        ..vllm
    };
    assert_eq!(unlinked.tp_all_reduce_step_ns(2048, 4096, 2, false), 0);
}
