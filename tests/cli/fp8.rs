//! FP8 as vLLM serves it, through the binary: `--dtype fp8` (or a checkpoint whose
//! `quantization_config` says `fp8`) makes the linear layers FP8 and leaves the rest, the KV
//! cache included, in 16 bits; `--kv-cache-dtype fp8` is what halves the KV reads.

use crate::binary::{self, read_csv, run};

use std::path::Path;

/// One 4,096-token prompt and 64 output tokens of Llama-3.1-8B on an H100 SXM, with
/// `extra` flags; its (TTFT, TPOT) in ns.
fn one_request(dir: &Path, tag: &str, extra: &[&str]) -> (u64, u64) {
    let csv = dir.join(format!("{tag}.csv"));
    let mut args = vec![
        "--rate",
        "1",
        "--num-prompts",
        "1",
        "--prompt-tokens",
        "4096",
        "--output-tokens",
        "64",
        "--hardware",
        "H100-SXM",
        "--output",
        csv.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    binary::ok(&args);
    let (_, rows) = read_csv(&csv);
    let field = |name: &str| rows[0][name].parse::<u64>().unwrap();
    (field("TTFT"), field("TPOT"))
}

/// A GEMM on H100 SXM as the roofline prices it, ns: 2,680 fixed plus 136 per byte each SM
/// streams per clock (3,350 GB/s over 132 SMs at 1,830 MHz), the longer of its MMA
/// work (`mma` ns) and its stream (`bytes` at 0.905 × 3,350 GB/s, HBM3), `unhidden` of the shorter,
/// a 500 ns launch.
fn gemm(mma: f64, bytes: f64, unhidden: f64) -> f64 {
    let m = bytes / (3350.0 * 0.905);
    let fixed = 2680.0 + 136.0 * 3350.0 / (132.0 * 1.83);
    fixed + mma.max(m) + unhidden * mma.min(m) + 500.0
}

/// One decode token through a `k × n` linear layer in BF16 less the same in FP8, ns: BF16
/// streams 2-byte weights, its FLOPs at 0.82 of 989.4 TFLOP/s, half the shorter unhidden;
/// FP8 quantizes the token (a row kernel: 3,080 clocks at 1,830 MHz, 5 bytes a value plus a
/// 4-byte scale at 20 bytes per clock, a launch) and streams 1-byte weights and input, its
/// MMA work vLLM's Hopper tiles for one token and N > 1,280 (16 × 64, one per SM of 132, in
/// ceil(N / 64 / 132) waves, at 0.66 of 1,978.9 TFLOP/s), a tenth of the shorter unhidden.
fn bf16_less_fp8(k: f64, n: f64) -> f64 {
    let bf16 = gemm(2.0 * k * n / (989.4e3 * 0.82), 2.0 * (k * n + k + n), 0.5);
    let quant = 3080.0 / 1.83 + (5.0 * k + 4.0) / (20.0 * 1.83) + 500.0;
    let waves = (n / 64.0 / 132.0).ceil();
    let mma = waves * 2.0 * 16.0 * 64.0 * k * 132.0 / (1978.9e3 * 0.66);
    // The quantization is a layer of its own, rounded to the ns before the GEMM is added.
    let fp8 = gemm(mma, k * n + k + 2.0 * n, 0.10) + quant.round();
    bf16.round() - fp8.round()
}

#[test]
fn an_fp8_run_is_faster_by_its_linear_layers_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (ttft16, tpot16) = one_request(dir.path(), "bf16", &["--dtype", "bfloat16"]);
    let (ttft8, tpot8) = one_request(dir.path(), "fp8", &["--dtype", "fp8"]);
    // Every decode step differs by the 32 blocks' QKV, output, gate-and-up and down
    // projections (4,096 → 6,144, 4,096 → 4,096, 4,096 → 28,672, 14,336 → 4,096); norms,
    // attention (its KV in 16 bits both times), the LM head and the sampler are the same.
    let per_block: f64 = [
        (4096.0, 6144.0),
        (4096.0, 4096.0),
        (4096.0, 28672.0),
        (14336.0, 4096.0),
    ]
    .iter()
    .map(|&(k, n)| bf16_less_fp8(k, n))
    .sum();
    let expected = 32.0 * per_block;
    let got = tpot16 as f64 - tpot8 as f64;
    assert!(
        (got - expected).abs() <= 2.0,
        "TPOT {tpot16} → {tpot8}: {got} ns less, {expected} by hand"
    );
    assert!((1_700_000.0..1_900_000.0).contains(&got), "{got}");
    // The prefill's GEMMs run at about 1.6 times the MMA rate.
    assert!(ttft8 < ttft16 * 4 / 5, "TTFT {ttft16} → {ttft8}");

    // An FP8 KV cache halves the decodes' KV reads: only the attention changes.
    let (ttft_kv, tpot_kv) = one_request(
        dir.path(),
        "fp8-kv",
        &["--dtype", "fp8", "--kv-cache-dtype", "fp8"],
    );
    assert_eq!(ttft_kv, ttft8);
    assert!(tpot_kv < tpot8, "TPOT {tpot8} → {tpot_kv}");
}

#[test]
fn an_fp8_checkpoint_is_served_in_fp8_by_its_quantization_config() {
    let dir = tempfile::tempdir().unwrap();
    let bundled = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/model_archs/meta-llama/Llama-3.1-8B.json"
    );
    let text = std::fs::read_to_string(bundled).unwrap();
    let with = |q: &str| {
        let body = text.trim_end().trim_end_matches('}');
        format!("{body},\n  \"quantization_config\": {q}\n}}\n")
    };
    let config = dir.path().join("fp8.json");
    std::fs::write(&config, with(r#"{"quant_method": "fp8"}"#)).unwrap();
    let model = config.to_str().unwrap();
    let flag = one_request(dir.path(), "flag", &["--dtype", "fp8"]);
    // `--dtype bfloat16` names the activations, as vLLM's does: the weights stay FP8.
    for extra in [
        &["--model", model][..],
        &["--model", model, "--dtype", "bfloat16"],
    ] {
        assert_eq!(one_request(dir.path(), "config", extra), flag, "{extra:?}");
    }

    let awq = dir.path().join("awq.json");
    std::fs::write(&awq, with(r#"{"quant_method": "awq", "bits": 4}"#)).unwrap();
    let csv = dir.path().join("awq.csv");
    let out = run(&[
        "--rate",
        "1",
        "--num-prompts",
        "1",
        "--model",
        awq.to_str().unwrap(),
        "--output",
        csv.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("awq.json"), "{stderr}");
    assert!(
        stderr.contains("quantization_config.quant_method"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}
