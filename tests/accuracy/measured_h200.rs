//! Our own measurements on an H200 (`scripts/gpu/measure_host.py`, results in
//! `data/measured/H200-2026-11-26.json`, issue 28):
//! - the `[host]` table of `hardware/H200.toml` is the statistic of them that its comments
//!   name, so the two cannot drift apart;
//! - the roofline's blind check on that GPU (no constant of the roofline was derived from it
//!   but the GEMMs' fixed time and bandwidth, of which it is one of three sources, and not the
//!   median one):
//!   predicted against measured kernel time per op family, printed as the guide's tables with
//!   `cargo test --release --test accuracy measured_h200:: -- --nocapture`, and held to
//!   today's error bands so that a change of the roofline that moves them shows here.

use blis_cosim::config::{Dtype, Hardware, ModelArch};
use blis_cosim::latency::{BatchDesc, BatchItem, LatencyBackend, Roofline};
use serde_json::Value;

const DATA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/data/measured/H200-2026-11-26.json"
);
const H200: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/hardware/H200.toml");

fn data() -> Value {
    serde_json::from_str(&std::fs::read_to_string(DATA).unwrap()).unwrap()
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn rows(v: &Value) -> &Vec<Value> {
    v.as_array().unwrap_or_else(|| panic!("not an array: {v}"))
}

fn round100(x: f64) -> f64 {
    (x / 100.0).round() * 100.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    assert!(n > 0);
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Host issue time per kernel of the whole Llama-3.1-8B decoder layer run eagerly (torch ops),
/// ns: every layer row of both runs (two machines of the same kind).
fn eager_per_kernel(d: &Value) -> Vec<f64> {
    let mut out = Vec::new();
    for phase in ["prefill", "decode"] {
        for row in rows(&d["pass1"]["layer"][phase]) {
            out.push(num(&row["host_issue_ns"]) / num(&row["kernels"]));
        }
    }
    for (name, row) in d["pass2"]["host_repeat"].as_object().unwrap() {
        if name.starts_with("layer_") {
            out.push(num(&row["host_ns_per_kernel"]));
        }
    }
    out
}

#[test]
fn the_h200_host_table_is_the_measurement() {
    let d = data();
    for pass in ["pass1", "pass2"] {
        assert!(d[pass]["errors"].as_object().unwrap().is_empty(), "{pass}");
        assert_eq!(d[pass]["meta"]["device"], "NVIDIA H200");
    }
    let host = Hardware::resolve(H200).unwrap().host;
    // One graph launch: torch.cuda.CUDAGraph.replay() of 33 different 10-kernel graphs in a
    // row, as vLLM's piecewise mode replays its pieces, per replay.
    let launch = num(&d["pass2"]["host_graph_repeat"]["pieces33_per_replay_ns"]);
    assert_eq!(host.launch_ns, round100(launch));
    // One Inductor kernel: the slope of a torch.compile'd function's host time per call
    // against its kernels (3, 9 and 17 kernels).
    let compiled = num(&d["pass2"]["host_compile_repeat"]["host_ns_per_kernel_marginal"]);
    assert_eq!(host.compiled_kernel_ns, round100(compiled));
    // One eager op: the median over both machines of a whole eager decoder layer's host issue
    // time per kernel.
    let per_kernel = eager_per_kernel(&d);
    assert_eq!(per_kernel.len(), 16);
    let layer_kernel = median(per_kernel);
    assert_eq!(host.eager_op_ns, round100(layer_kernel));
    // One bare torch op in a Python function of tensor ops: Hugging Face's eager RMSNorm
    // (eight ops), per kernel; the other parts' default is their eager op at the same ratio.
    let bare = num(&d["pass2"]["host_repeat"]["rms_norm_hf_sequence"]["host_ns_per_kernel"]);
    assert_eq!(host.torch_op_ns, round100(bare));
    let default = blis_cosim::config::HostSpec::default();
    let scaled = default.eager_op_ns * bare / layer_kernel;
    assert_eq!(default.torch_op_ns, round100(scaled));
    // Not measured (no vLLM there): the engine loop's CPU work stays the public numbers.
    assert_eq!(host.step_cpu_ns, default.step_cpu_ns);
    assert_eq!(host.seq_cpu_ns, default.seq_cpu_ns);
}

/// The roofline of `model` on the H200 at TP 1 in bf16.
fn roofline(model: &str) -> Roofline {
    Roofline::new(
        &ModelArch::resolve(model).unwrap(),
        &Hardware::resolve(H200).unwrap(),
        1,
        Dtype::Bfloat16,
    )
}

/// The roofline's time of one occurrence of `layer` in a step of `items`, ns.
fn layer_ns(r: &mut Roofline, items: &[BatchItem], layer: &str) -> f64 {
    let layers = r.breakdown(&BatchDesc::new(items)).unwrap();
    let l = layers.iter().find(|l| l.name == layer).unwrap();
    l.time_ns as f64
}

fn decodes(n: u32, context_tokens: u32) -> Vec<BatchItem> {
    vec![
        BatchItem {
            new_tokens: 1,
            context_tokens
        };
        n as usize
    ]
}

fn prefill(tokens: u32) -> Vec<BatchItem> {
    vec![BatchItem {
        new_tokens: tokens,
        context_tokens: 0,
    }]
}

/// The roofline's layers whose kernels the measured layer runs as vLLM does.
const LIKE_FOR_LIKE: [&str; 7] = [
    "input_layernorm",
    "qkv_proj",
    "attention",
    "o_proj",
    "post_attention_layernorm",
    "gate_up_proj",
    "down_proj",
];

/// Prediction over measurement minus one.
fn err(predicted: f64, measured: f64) -> f64 {
    predicted / measured - 1.0
}

fn us(ns: f64) -> String {
    format!("{:.1}", ns / 1e3)
}

fn pct(e: f64) -> String {
    format!("{:+.0}%", e * 100.0)
}

/// The blind check: every measured kernel family against the roofline, printed as Markdown.
/// Returns `(family, M or size, error)` rows.
fn blind_check() -> Vec<(&'static str, u32, f64)> {
    let d = data();
    let p = &d["pass1"];
    let mut out = Vec::new();
    let mut llama = roofline("Llama-3.1-8B");
    check_gemms(p, &mut llama, &mut out);
    check_attention(p, &mut llama, &mut out);
    check_moe(p, &mut out);
    check_layers(p, &mut llama, &mut out);
    out
}

/// Error rows of the blind check.
type Rows = Vec<(&'static str, u32, f64)>;

/// GEMMs at Llama-3.1-8B shapes by token count.
fn check_gemms(p: &Value, llama: &mut Roofline, out: &mut Rows) {
    println!("\n| GEMM | M | measured µs | TFLOP/s | GB/s | roofline µs | error |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for row in rows(&p["gemm"]) {
        let op = row["op"].as_str().unwrap();
        let m = num(&row["M"]) as u32;
        let measured = num(&row["gpu_ns"]);
        let predicted = layer_ns(llama, &decodes(m, 0), op);
        let e = err(predicted, measured);
        let family = if m <= 64 {
            "gemm_small_m"
        } else {
            "gemm_large_m"
        };
        out.push((family, m, e));
        println!(
            "| {op} | {m} | {} | {:.0} | {:.0} | {} | {} |",
            us(measured),
            num(&row["tflops"]),
            num(&row["gbps"]),
            us(predicted),
            pct(e)
        );
    }
}

/// Prefill (against cuDNN) and decode attention (against the faster kernel).
fn check_attention(p: &Value, llama: &mut Roofline, out: &mut Rows) {
    println!(
        "\n| attention | size | measured µs (FA2 / cuDNN) | roofline µs | error vs FA2 | error vs cuDNN |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: |");
    for row in rows(&p["attention"]["prefill"]) {
        let l = num(&row["L"]) as u32;
        let (fa, cudnn) = (
            num(&row["flash_enable_gqa_ns"]),
            num(&row["cudnn_enable_gqa_ns"]),
        );
        let predicted = layer_ns(llama, &prefill(l), "attention");
        out.push(("prefill_attention_cudnn", l, err(predicted, cudnn)));
        println!(
            "| prefill | {l} tokens | {} / {} | {} | {} | {} |",
            us(fa),
            us(cudnn),
            us(predicted),
            pct(err(predicted, fa)),
            pct(err(predicted, cudnn))
        );
    }
    for row in rows(&p["attention"]["decode"]) {
        let (b, kv) = (num(&row["batch"]) as u32, num(&row["kv"]) as u32);
        let (fa, cudnn) = (num(&row["flash_ns"]), num(&row["cudnn_ns"]));
        let predicted = layer_ns(llama, &decodes(b, kv - 1), "attention");
        out.push(("decode_attention_best", b, err(predicted, fa.min(cudnn))));
        println!(
            "| decode | {b} × {kv} KV | {} / {} | {} | {} | {} |",
            us(fa),
            us(cudnn),
            us(predicted),
            pct(err(predicted, fa)),
            pct(err(predicted, cudnn))
        );
    }
}

/// Qwen3-30B-A3B's experts against `torch._grouped_mm`.
fn check_moe(p: &Value, out: &mut Rows) {
    let mut qwen = roofline("Qwen3-30B-A3B-Instruct-2507");
    println!(
        "\n| MoE experts (Qwen3-30B-A3B) | tokens | active experts | measured µs (torch._grouped_mm) | roofline µs | error |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for row in rows(&p["moe"]["rows"]) {
        let t = num(&row["tokens"]) as u32;
        let measured = num(&row["grouped_mm_ns"]);
        let predicted = layer_ns(&mut qwen, &decodes(t, 0), "experts");
        let e = err(predicted, measured);
        out.push(("moe_grouped_mm", t, e));
        println!(
            "| experts | {t} | {} | {} | {} | {} |",
            num(&row["active_experts"]),
            us(measured),
            us(predicted),
            pct(e)
        );
    }
}

/// Whole Llama-3.1-8B decoder layers, and the kernels both sides have.
fn check_layers(p: &Value, llama: &mut Roofline, out: &mut Rows) {
    println!(
        "\n| decoder layer (Llama-3.1-8B) | measured µs (graph replay) | eager wall µs | roofline block µs | error | norms+GEMMs+attention measured µs | roofline µs | error |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut layer_rows = Vec::new();
    for row in rows(&p["layer"]["prefill"]) {
        let t = num(&row["tokens"]) as u32;
        layer_rows.push((format!("prefill {t} tokens"), prefill(t), row, t));
    }
    for row in rows(&p["layer"]["decode"]) {
        let (b, kv) = (num(&row["batch"]) as u32, num(&row["kv"]) as u32);
        layer_rows.push((format!("decode {b} × {kv} KV"), decodes(b, kv - 1), row, b));
    }
    for (name, items, row, size) in layer_rows {
        let measured = num(&row["graph_gpu_ns"]);
        let predicted = llama.step_parts(&BatchDesc::new(&items)).unwrap().block_ns as f64;
        let e = err(predicted, measured);
        out.push(("layer", size, e));
        // Like for like: the kernels both have (vLLM fuses the rest: RoPE, residual adds,
        // SiLU-and-mul, the KV-cache write), from the profiler's kernel list.
        let mut kernels = 0.0;
        for k in rows(&row["kernel_list"]) {
            let name = k[0].as_str().unwrap();
            if [
                "nvjet",
                "splitK",
                "gemm",
                "sdpa",
                "flash",
                "Memset",
                "layer_nor",
            ]
            .iter()
            .any(|p| name.contains(p))
            {
                kernels += num(&k[1]);
            }
        }
        let subset: f64 = llama
            .breakdown(&BatchDesc::new(&items))
            .unwrap()
            .iter()
            .filter(|l| LIKE_FOR_LIKE.contains(&l.name))
            .map(|l| l.time_ns as f64)
            .sum();
        out.push(("layer_like_for_like", size, err(subset, kernels)));
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} |",
            us(measured),
            us(num(&row["steady_wall_ns"])),
            us(predicted),
            pct(e),
            us(kernels),
            us(subset),
            pct(err(subset, kernels))
        );
    }
}

#[test]
fn the_roofline_blind_check_on_h200_stays_in_todays_bands() {
    let rows = blind_check();
    let band = |family: &str| -> (f64, f64) {
        let errs: Vec<f64> = rows.iter().filter(|r| r.0 == family).map(|r| r.2).collect();
        let lo = errs.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = errs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        println!("{family}: {} rows, error {lo:+.3} .. {hi:+.3}", errs.len());
        (lo, hi)
    };
    // Today's bands (prediction / measurement - 1), a little wider than measured: a change
    // of the roofline that moves a family out of its band must update the guide's table.
    let mut outside = Vec::new();
    for (family, low, high) in [
        ("gemm_small_m", -0.25, 0.15),
        ("gemm_large_m", -0.20, 0.25),
        ("prefill_attention_cudnn", -0.30, 0.50),
        ("decode_attention_best", -0.30, 0.35),
        ("moe_grouped_mm", -0.65, 0.45),
        ("layer", -0.40, -0.03),
        ("layer_like_for_like", -0.15, 0.25),
    ] {
        let (lo, hi) = band(family);
        if !(lo >= low && hi <= high) {
            outside.push(format!("{family}: {lo:+.3} .. {hi:+.3}"));
        }
    }
    assert!(outside.is_empty(), "outside today's bands: {outside:?}");
}
