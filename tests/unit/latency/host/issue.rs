use blis_cosim::config::HostSpec;
use blis_cosim::latency::StepMode;
use blis_cosim::latency::host::issue::*;

/// A 16-bit model whose norms fuse the residual add.
const BF16: Served = Served {
    fp8: false,
    residual_adds: false,
};

/// The same model with its linear layers and experts in FP8.
const FP8: Served = Served {
    fp8: true,
    residual_adds: false,
};

#[test]
fn a_host_bound_list_ends_with_the_last_issue_plus_its_kernel() {
    // Three kernels of 2 µs on the GPU, each issued in 10 µs from t = 0.
    let mut p = Pipeline::starting_at(0.0);
    p.run(3, 10_000.0, 6_000.0);
    // Issued at 10, 20, 30 µs; each runs 2 µs after its issue.
    assert_eq!(p.issued, 30_000.0);
    assert_eq!(p.gpu, 32_000.0);
}

#[test]
fn a_gpu_bound_list_ends_with_the_gpu_sum_after_the_first_issue() {
    // Kernels of 50 µs issued every 5 µs: only the first issue shows.
    let mut p = Pipeline::starting_at(0.0);
    p.run(4, 5_000.0, 200_000.0);
    assert_eq!(p.gpu, 205_000.0);
}

#[test]
fn a_mixed_list_waits_only_where_the_host_falls_behind() {
    // A 100 µs kernel issued at 5 µs, then ten 1 µs kernels issued every 20 µs: the GPU is
    // busy until 105, the host issues the ten at 25 … 205, each runs 1 µs.
    let mut p = Pipeline::starting_at(0.0);
    p.run(1, 5_000.0, 100_000.0);
    p.run(10, 20_000.0, 10_000.0);
    assert_eq!(p.gpu, 206_000.0);
    // With the host 1 ms ahead, every kernel is issued before the GPU needs it.
    let mut ahead = Pipeline::starting_at(-1_000_000.0);
    ahead.run(1, 5_000.0, 100_000.0);
    ahead.run(10, 20_000.0, 10_000.0);
    assert_eq!(ahead.gpu, 110_000.0);
}

/// Runs `blocks` blocks of `(count, issue, gpu)` kernels from `host_start`, one by one or
/// adding the blocks after the second in one go when they keep up.
fn blocks(host_start: f64, block: &[(u32, f64, f64)], n: u64, skip: bool) -> Pipeline {
    let mut p = Pipeline::starting_at(host_start);
    for b in 0..n {
        let lead = p.begin_block();
        for &(count, issue, gpu) in block {
            p.run(count, issue, gpu);
        }
        if skip && b > 0 && p.block_keeps_up(lead) {
            p.repeat_block(n - b - 1);
            break;
        }
    }
    p
}

#[test]
fn repeated_blocks_added_in_one_go_end_where_the_recurrence_ends() {
    let gpu_bound = [(1, 5_000.0, 100_000.0), (3, 7_000.0, 9_000.0)];
    let host_bound = [(1, 5_000.0, 1_000.0), (4, 20_000.0, 2_000.0)];
    // A big kernel, then tiny ones the host falls behind on within the block.
    let mixed = [(1, 7_000.0, 60_000.0), (8, 7_000.0, 4_000.0)];
    for block in [&gpu_bound[..], &host_bound, &mixed] {
        for start in [-1_000_000.0, -30_000.0, 0.0, 400_000.0] {
            let slow = blocks(start, block, 32, false);
            let fast = blocks(start, block, 32, true);
            assert!((slow.gpu - fast.gpu).abs() < 1e-6, "{block:?} {start}");
            assert!(
                (slow.issued - fast.issued).abs() < 1e-6,
                "{block:?} {start}"
            );
        }
    }
}

#[test]
fn a_graph_launch_holds_back_its_kernels() {
    let mut p = Pipeline::starting_at(0.0);
    p.launch_graph(3_000.0);
    p.run(2, 0.0, 8_000.0);
    assert_eq!(p.gpu, 11_000.0);
}

#[test]
fn kernel_counts_and_issue_costs_by_mode() {
    let host = HostSpec::default();
    let kernels = |layer| launches_of(layer, StepMode::Eager, BF16).kernels();
    assert_eq!(kernels("attention"), 2);
    assert_eq!(kernels("qkv_proj"), 1);
    let issue = |layer, mode| issue_ns(&host, layer, mode, BF16);
    assert_eq!(issue("qkv_proj", StepMode::Full), 0.0);
    assert_eq!(issue("qkv_proj", StepMode::Piecewise), 0.0);
    assert_eq!(
        issue("qkv_proj", StepMode::Compiled),
        host.compiled_kernel_ns
    );
    assert_eq!(issue("qkv_proj", StepMode::Eager), host.eager_op_ns);
    assert_eq!(issue("attention", StepMode::Full), 0.0);
    assert_eq!(issue("attention", StepMode::Piecewise), host.eager_op_ns);
    assert_eq!(issue("lm_head", StepMode::Full), host.eager_op_ns);
}

#[test]
fn a_fused_moe_layer_issues_two_triton_launches_beside_its_ops_outside_graphs() {
    let host = HostSpec::default();
    let eager = |layer| launches_of(layer, StepMode::Eager, BF16);
    assert_eq!(eager("experts").kernels(), 7);
    assert_eq!(eager("moe").kernels(), 8);
    assert_eq!(eager("experts").triton, 2);
    assert_eq!(eager("moe").triton, 2);
    assert_eq!(eager("qkv_proj").triton, 0);
    // Eager: five ops at 22.6 µs and two launches at 50.1 µs, (113 + 100.2) / 7 each.
    let eager = issue_ns(&host, "experts", StepMode::Eager, BF16);
    assert!((eager * 7.0 - (5.0 * 22_600.0 + 2.0 * 50_100.0)).abs() < 1e-6);
    // Compiled (no graph), the profile tables' layer with its gate GEMM: six kernels at 7 µs
    // and the same two launches.
    let compiled = issue_ns(&host, "moe", StepMode::Compiled, BF16);
    assert!((compiled * 8.0 - (6.0 * 7_000.0 + 2.0 * 50_100.0)).abs() < 1e-6);
    // Inside a graph the layer costs the host nothing.
    assert_eq!(issue_ns(&host, "experts", StepMode::Piecewise, BF16), 0.0);
    assert_eq!(issue_ns(&host, "experts", StepMode::Full, BF16), 0.0);
}

#[test]
fn an_fp8_linear_layer_issues_its_input_quantization_then_its_gemm_in_eager_mode() {
    // vLLM 0.19's CUTLASS FP8 path: `dynamic_per_token_scaled_fp8_quant`, then
    // `cutlass_scaled_mm`: two ops at 22.6 µs each, 45.2 µs a layer against 22.6 in BF16.
    let host = HostSpec::default();
    for layer in ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"] {
        let fp8 = launches_of(layer, StepMode::Eager, FP8);
        assert_eq!((fp8.ops, fp8.inner, fp8.triton), (2, 0, 0), "{layer}");
        assert_eq!(issue_ns(&host, layer, StepMode::Eager, FP8), 22_600.0);
        // Compiled, Inductor fuses the quantization into the op before it; in a graph the
        // host issues nothing: both keep the 16-bit count and cost.
        for mode in [StepMode::Compiled, StepMode::Piecewise, StepMode::Full] {
            assert_eq!(launches_of(layer, mode, FP8).kernels(), 1, "{layer}");
            assert_eq!(
                issue_ns(&host, layer, mode, FP8),
                issue_ns(&host, layer, mode, BF16)
            );
        }
    }
    // Nothing else quantizes: the embedding, norms, attention, router, LM head, sampler.
    for layer in [
        "embedding",
        "input_layernorm",
        "attention",
        "router",
        "lm_head",
    ] {
        let (fp8, bf16) = (
            launches_of(layer, StepMode::Eager, FP8),
            launches_of(layer, StepMode::Eager, BF16),
        );
        assert_eq!(fp8, bf16, "{layer}");
    }
    assert_eq!(launches_of("sampler", StepMode::Eager, FP8).kernels(), 4);
}

#[test]
fn an_fp8_fused_moe_layer_issues_two_tensor_quantizations_in_eager_mode() {
    // Each per-tensor quantization (`dynamic_scaled_fp8_quant`) is one op whose C++ launches
    // the scale's memset, the max reduction and the quantization: the layer's 5 ops and 2
    // Triton launches gain 2 ops and 4 launches inside them, 13 kernels.
    let host = HostSpec::default();
    let fp8 = launches_of("experts", StepMode::Eager, FP8);
    assert_eq!((fp8.ops, fp8.inner, fp8.triton), (7, 4, 2));
    assert_eq!(fp8.kernels(), 13);
    // 7 × 22.6 + 4 × 3 + 2 × 50.1 = 270.4 µs a layer (BF16: 213.2).
    let eager = issue_ns(&host, "experts", StepMode::Eager, FP8);
    assert!((eager * 13.0 - 270_400.0).abs() < 1e-6, "{eager}");
    // Compiled and in graphs, the 16-bit count and cost.
    for mode in [StepMode::Compiled, StepMode::Piecewise, StepMode::Full] {
        assert_eq!(launches_of("moe", mode, FP8).kernels(), 8);
        assert_eq!(
            issue_ns(&host, "moe", mode, FP8).to_bits(),
            issue_ns(&host, "moe", mode, BF16).to_bits()
        );
    }
}

#[test]
fn phimoes_sparsemixer_issues_twenty_ops_and_three_clones_outside_graphs() {
    // vLLM's `sparsemixer`: 21 bare torch ops in place of the fused top-k's one (counted by
    // `experts`), the two out-of-place `masked_fill`s and the `scatter` cloning their input
    // first.
    let host = HostSpec::default();
    let eager = launches_of("sparsemixer", StepMode::Eager, BF16);
    assert_eq!(
        (eager.ops, eager.inner, eager.triton, eager.torch),
        (0, 3, 0, 20)
    );
    assert_eq!(eager.kernels(), 23);
    // Eager: (20 × 10.5 + 3 × 3) / 23 µs per kernel, 219 µs a layer; the same compiled
    // without graphs (it runs inside the fused-MoE custom op, which Inductor leaves alone).
    for mode in [StepMode::Eager, StepMode::Compiled] {
        let each = issue_ns(&host, "sparsemixer", mode, BF16);
        assert!((each * 23.0 - 219_000.0).abs() < 1e-6, "{mode:?}");
    }
    // Captured whole in a piecewise or full graph.
    assert_eq!(
        issue_ns(&host, "sparsemixer", StepMode::Piecewise, BF16),
        0.0
    );
    assert_eq!(issue_ns(&host, "sparsemixer", StepMode::Full, BF16), 0.0);
}

#[test]
fn a_model_adding_its_residuals_issues_the_add_before_each_norm_in_eager_mode() {
    let host = HostSpec::default();
    let phimoe = Served {
        fp8: false,
        residual_adds: true,
    };
    for norm in ["input_layernorm", "post_attention_layernorm", "layernorm"] {
        let eager = launches_of(norm, StepMode::Eager, phimoe);
        assert_eq!((eager.ops, eager.torch), (1, 1), "{norm}");
        assert_eq!(
            launches_of(norm, StepMode::Eager, BF16).kernels(),
            1,
            "{norm}"
        );
        // The norm's module call at 22.6 µs, the add at 10.5: 16.55 µs a kernel.
        let each = issue_ns(&host, norm, StepMode::Eager, phimoe);
        assert!((each - 16_550.0).abs() < 1e-6, "{norm}");
        // Compiled, Inductor fuses the add into the norm.
        let compiled = launches_of(norm, StepMode::Compiled, phimoe);
        assert_eq!(compiled.kernels(), 1, "{norm}");
    }
    // The final norm's add is the last layer's second: counted on the input norms' side.
    assert_eq!(
        launches_of("final_layernorm", StepMode::Eager, phimoe).kernels(),
        1
    );
    assert_eq!(
        launches_of("qkv_proj", StepMode::Eager, phimoe).kernels(),
        1
    );
}
