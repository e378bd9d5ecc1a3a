use blis_cosim::config::HostSpec;
use blis_cosim::latency::StepMode;
use blis_cosim::latency::host::issue::*;

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
    assert_eq!(kernels_of("attention"), 2);
    assert_eq!(kernels_of("qkv_proj"), 1);
    assert_eq!(issue_ns(&host, "qkv_proj", StepMode::Full), 0.0);
    assert_eq!(issue_ns(&host, "qkv_proj", StepMode::Piecewise), 0.0);
    assert_eq!(
        issue_ns(&host, "qkv_proj", StepMode::Compiled),
        host.compiled_kernel_ns
    );
    assert_eq!(
        issue_ns(&host, "qkv_proj", StepMode::Eager),
        host.eager_op_ns
    );
    assert_eq!(issue_ns(&host, "attention", StepMode::Full), 0.0);
    assert_eq!(
        issue_ns(&host, "attention", StepMode::Piecewise),
        host.eager_op_ns
    );
    assert_eq!(issue_ns(&host, "lm_head", StepMode::Full), host.eager_op_ns);
}

#[test]
fn a_fused_moe_layer_issues_two_triton_launches_beside_its_ops_outside_graphs() {
    let host = HostSpec::default();
    assert_eq!(kernels_of("experts"), 6);
    assert_eq!(triton_launches_of("experts"), 2);
    assert_eq!(triton_launches_of("moe"), 2);
    assert_eq!(triton_launches_of("qkv_proj"), 0);
    // Eager: four ops at 22.6 µs and two launches at 50.1 µs, (90.4 + 100.2) / 6 each.
    let eager = issue_ns(&host, "experts", StepMode::Eager);
    assert!((eager * 6.0 - (4.0 * 22_600.0 + 2.0 * 50_100.0)).abs() < 1e-6);
    // Compiled (no graph): four kernels at 7 µs and the same two launches.
    let compiled = issue_ns(&host, "moe", StepMode::Compiled);
    assert!((compiled * 6.0 - (4.0 * 7_000.0 + 2.0 * 50_100.0)).abs() < 1e-6);
    // Inside a graph the layer costs the host nothing.
    assert_eq!(issue_ns(&host, "experts", StepMode::Piecewise), 0.0);
    assert_eq!(issue_ns(&host, "experts", StepMode::Full), 0.0);
}
