//! Row kernels (`src/latency/roofline/rows.rs`): norms, SiLU-and-mul and rotary as a thread
//! block per row, against cases computed by hand from the hardware files' SMs, clocks and L2.

use blis_cosim::config::{Dtype, Hardware, ModelArch};
use blis_cosim::latency::roofline::rows::{Loads, RowKernels};
use blis_cosim::latency::roofline::{Roofline, Work};
use blis_cosim::latency::{BatchDesc, BatchItem};

fn part(name: &str) -> Hardware {
    Hardware::resolve(name).unwrap()
}

/// DRAM's streaming rate of `hardware`, bytes per ns (`memory_efficiency` of its peak).
fn dram(hardware: &Hardware) -> f64 {
    hardware.memory_bw_gbps * hardware.memory_efficiency
}

fn close(got: f64, want: f64) {
    assert!((got - want).abs() < 0.01, "got {got}, want {want}");
}

#[test]
fn one_row_pays_the_fixed_clocks_and_its_row_at_a_blocks_rate() {
    // RTX PRO 6000: 2,617 MHz. One 8 KiB row loaded 16 bytes at a time: 3,080 clocks / 2.617
    // = 1,176.92 ns, plus 8,192 bytes / (20.0 bytes per clock × 2.617) = 156.52 ns: 1,333.44
    // ns. Its L2 stream (1,176.92 + 8,192 / (2.445 × 1,597) = 1,179.02 ns) is shorter.
    let pro = part("RTXPRO6000");
    let k = RowKernels::new(&pro).unwrap();
    close(k.ns(8_192.0, 1.0, Loads::Vector, dram(&pro)), 1_333.44);
}

#[test]
fn a_row_loaded_one_element_at_a_time_moves_fewer_bytes_per_clock() {
    // The same row loaded one element at a time (vLLM's rotary kernel): 8,192 bytes / (9.9
    // bytes per clock × 2.617) = 316.19 ns after the 1,176.92 fixed: 1,493.11 ns.
    let pro = part("RTXPRO6000");
    let k = RowKernels::new(&pro).unwrap();
    close(k.ns(8_192.0, 1.0, Loads::Scalar, dram(&pro)), 1_493.11);
}

#[test]
fn many_waves_that_fit_in_l2_stream_at_a_multiple_of_dram() {
    // 2,048 rows of 8 KiB (16.8 MB, under the 128 MB L2) on 188 SMs: 11 waves of the row,
    // 1,176.92 + 11 × 156.52 = 2,898.59 ns; the L2 stream, 1,176.92 + 16,777,216 bytes /
    // (2.445 × 1,597 GB/s = 3,904.665 bytes per ns) = 5,473.63 ns, is longer.
    let pro = part("RTXPRO6000");
    let k = RowKernels::new(&pro).unwrap();
    close(
        k.ns(2_048.0 * 8_192.0, 2_048.0, Loads::Vector, dram(&pro)),
        5_473.63,
    );
}

#[test]
fn the_fp8_quantization_streams_its_l2_per_sm_and_clock() {
    // The same working set as the FP8 activation quantization: its L2 at 7.56 bytes per SM
    // per clock, 1,176.92 + 16,777,216 / (7.56 × 188 × 2.617 = 3,719.49) = 5,687.54 ns.
    let pro = part("RTXPRO6000");
    let k = RowKernels::new(&pro).unwrap();
    close(
        k.quant_ns(2_048.0 * 8_192.0, 2_048.0, Loads::Vector, dram(&pro)),
        5_687.54,
    );
}

#[test]
fn on_hopper_a_norms_l2_outruns_its_dram() {
    // H200 (132 SMs, 1,830 MHz, 50 MB L2, 4.8 TB/s): 4,000 rows of 12,288 bytes (49.2 MB).
    // Fixed 3,080 / 1.83 = 1,683.06 ns; 31 waves of 12,288 / (20.0 × 1.83) = 335.74 ns:
    // 12,090.93 ns. Its L2 at 2.445 × 4,800 = 11,736 bytes per ns takes 1,683.06 +
    // 49,152,000 / 11,736 = 5,871.20 ns, so the waves set it. The quantization's L2, 7.56 ×
    // 132 × 1.83 = 1,826.19 bytes per ns, slower than DRAM's 4,320: 28,598.06 ns.
    let h200 = part("H200");
    let k = RowKernels::new(&h200).unwrap();
    let bytes = 4_000.0 * 12_288.0;
    close(k.ns(bytes, 4_000.0, Loads::Vector, dram(&h200)), 12_090.93);
    close(
        k.quant_ns(bytes, 4_000.0, Loads::Vector, dram(&h200)),
        28_598.06,
    );
}

#[test]
fn a_working_set_beyond_l2_streams_from_dram() {
    // RTX 4090 (128 SMs, 2,730 MHz, 72 MB L2): SiLU-and-mul of 2,048 tokens of Llama-3.1-8B,
    // 86,016 bytes a row, 176.2 MB: 3,080 / 2.73 = 1,128.21 ns + 176,160,768 bytes / (1,008 ×
    // 0.9 = 907.2 bytes per ns) = 195,308.95 ns (its 16 waves take 26,334.36 ns).
    let rtx = part("RTX4090");
    let k = RowKernels::new(&rtx).unwrap();
    close(
        k.ns(2_048.0 * 86_016.0, 2_048.0, Loads::Vector, dram(&rtx)),
        195_308.95,
    );
}

#[test]
fn without_an_l2_size_every_working_set_streams_from_dram() {
    // The 16.8 MB of the L2 case above, from DRAM: 1,176.92 + 16,777,216 / (1,597 × 0.9 =
    // 1,437.3) = 1,176.92 + 11,672.73 = 12,849.65 ns.
    let mut pro = part("RTXPRO6000");
    pro.l2_cache_mb = None;
    let k = RowKernels::new(&pro).unwrap();
    close(
        k.ns(2_048.0 * 8_192.0, 2_048.0, Loads::Vector, dram(&pro)),
        12_849.65,
    );
}

#[test]
fn a_part_without_its_clock_has_no_row_kernel_prices() {
    // B200's file gives no `sm_clock_mhz`: the roofline prices its norms as any kernel.
    assert_eq!(RowKernels::new(&part("B200")), None);
    let mut pro = part("RTXPRO6000");
    pro.sm_count = None;
    assert_eq!(RowKernels::new(&pro), None);
}

#[test]
fn a_steps_norms_activation_and_rotary_are_priced_as_row_kernels() {
    // Llama-3.1-8B on RTX PRO 6000, 64 decodes: each norm is vLLM's fused add + RMSNorm over
    // 64 rows of 4,096 values (the row and the residual read and written, 32,768 bytes, and a
    // weight of 8,192), SiLU-and-mul 64 rows of 3 × 14,336 values, both loaded 16 bytes at a
    // time; rotary 64 rows loaded one element at a time; every one is its row kernel's time
    // plus the launch.
    let pro = part("RTXPRO6000");
    let model = ModelArch::resolve("Llama-3.1-8B").unwrap();
    let r = Roofline::new(&model, &pro, 1, Dtype::Bfloat16);
    let k = RowKernels::new(&pro).unwrap();
    let items = vec![
        BatchItem {
            new_tokens: 1,
            context_tokens: 100,
        };
        64
    ];
    let step = r.step(&BatchDesc::new(&items)).unwrap();
    let mut seen = Vec::new();
    r.for_each_layer(&step, |name, _, work| {
        if let Work::Rows { cost, rows, loads } = work {
            assert_eq!(rows, 64.0, "{name}");
            let want_loads = if name == "rotary_emb" {
                Loads::Scalar
            } else {
                Loads::Vector
            };
            assert_eq!(loads, want_loads, "{name}");
            let want = k.ns(cost.bytes, rows, loads, dram(&pro)) + pro.kernel_launch_ns;
            assert_eq!(r.layer_ns(work), want.round() as u64, "{name}");
            seen.push(name);
        }
    });
    let want = [
        "input_layernorm",
        "rotary_emb",
        "post_attention_layernorm",
        "act_fn",
        "final_layernorm",
    ];
    assert_eq!(seen, want);
    let norm = (64.0 * 4_096.0 * 4.0 + 4_096.0) * 2.0;
    let mut norm_bytes = Vec::new();
    r.for_each_layer(&step, |name, _, work| {
        if let Work::Rows { cost, .. } = work
            && name.ends_with("layernorm")
        {
            norm_bytes.push(cost.bytes);
        }
    });
    assert_eq!(norm_bytes, [norm; 3]);
}
