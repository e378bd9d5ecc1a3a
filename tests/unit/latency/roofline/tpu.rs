//! A TPU's step (`src/latency/roofline/tpu.rs`): vLLM's padded counts, the compiled program's
//! ops and the ragged attention, against steps of Llama-3.1-8B on TPU-v6e-1 computed by hand
//! from the datasheet (918 TFLOP/s bf16, 1,638 GB/s, 256-wide MXU) and the derived constants.

use blis_cosim::config::{Dtype, Hardware, ModelArch};
use blis_cosim::latency::roofline::tpu::{padded_requests, padded_tokens};
use blis_cosim::latency::roofline::{MemoisedRoofline, Roofline};
use blis_cosim::latency::{BatchDesc, BatchItem, LatencyBackend, LayerTiming};

/// Matmul MMA rate, FLOP/ns: 918e3 × 0.731.
const MMA: f64 = 918e3 * 0.731;
/// Matmul weight stream, bytes/ns: 1,638 × 0.957.
const WEIGHTS: f64 = 1638.0 * 0.957;
/// Every op's fixed time, ns.
const FIXED: f64 = 490.0;

fn tpu_roofline() -> Roofline {
    let model = ModelArch::resolve("Llama-3.1-8B").unwrap();
    let tpu = Hardware::resolve("TPU-v6e-1").unwrap();
    Roofline::new(&model, &tpu, 1, Dtype::Bfloat16)
}

fn item(new_tokens: u32, context_tokens: u32) -> BatchItem {
    BatchItem {
        new_tokens,
        context_tokens,
    }
}

/// A bf16 matmul of `m` tokens, `k` to `n` (Llama's widths are whole 256-wide tiles), ns.
fn matmul(m: f64, k: f64, n: f64) -> f64 {
    let mma = 2.0 * m * k * n / MMA;
    let bytes = 2.0 * (k * n + m * k + m * n);
    FIXED + f64::max(mma, bytes / WEIGHTS)
}

/// A fused elementwise op over `bytes`: 0.422 of a pass at 1,638 GB/s, ns.
fn pass(bytes: f64) -> f64 {
    FIXED + 0.422 * bytes / 1638.0
}

/// The step's layers by name as `(repeats, ns)`, and its total.
fn priced(items: &[BatchItem]) -> (Vec<LayerTiming>, u64) {
    let mut r = tpu_roofline();
    let batch = BatchDesc::new(items);
    let layers = r.breakdown(&batch).unwrap();
    let total = r.step_time(&batch).unwrap();
    let sum: u64 = layers.iter().map(|l| l.repeats * l.time_ns).sum();
    assert_eq!(sum, total, "the breakdown sums to the step");
    (layers, total)
}

/// Checks `layers` against `(name, repeats, ns)` in order.
fn assert_layers(layers: &[LayerTiming], want: &[(&str, u64, f64)]) {
    let got: Vec<(&str, u64)> = layers.iter().map(|l| (l.name, l.repeats)).collect();
    let names: Vec<(&str, u64)> = want.iter().map(|w| (w.0, w.1)).collect();
    assert_eq!(got, names);
    for (l, w) in layers.iter().zip(want) {
        assert_eq!(l.time_ns, w.2.round() as u64, "{}: want {}", l.name, w.2);
    }
}

#[test]
fn vllm_pads_tokens_and_requests_to_powers_of_two() {
    assert_eq!(padded_tokens(1.0), 16.0);
    assert_eq!(padded_tokens(16.0), 16.0);
    assert_eq!(padded_tokens(17.0), 32.0);
    assert_eq!(padded_tokens(301.0), 512.0);
    assert_eq!(padded_tokens(1024.0), 1024.0);
    assert_eq!(padded_requests(0.0), 0.0);
    assert_eq!(padded_requests(3.0), 8.0);
    assert_eq!(padded_requests(9.0), 16.0);
    assert_eq!(padded_requests(128.0), 128.0);
}

#[test]
fn a_decode_batch_runs_at_the_padded_counts_and_streams_its_weights() {
    // Three decodes reading 100, 200 and 300 KV tokens: 16 padded tokens, 8 padded requests.
    let (layers, total) = priced(&[item(1, 99), item(1, 199), item(1, 299)]);
    // Norms and the embedding: 16 x 4,096 x 2 = 131,072 bytes -> 490 + 33.77 = 523.77 ns.
    let norm = pass(16.0 * 4096.0 * 2.0);
    // Q, K and V: K 4,096, N 6,144: 50,331,648 weight bytes + 327,680 of activations at
    // 1,567.57 bytes/ns = 32,317.2 ns (its MMA, 1,200 ns, hidden) -> 32,807.2.
    let qkv = matmul(16.0, 4096.0, 6144.0);
    assert!((qkv - 32_807.2).abs() < 0.1, "{qkv}");
    // Attention: 5,640 + 3 x 2,250 + 600 KV tokens x 4,096 bytes / (1,638 x 0.27) = 17,946.9.
    let attention: f64 = 5640.0 + 3.0 * 2250.0 + 600.0 * 4096.0 / (1638.0 * 0.27);
    assert!((attention - 17_946.9).abs() < 0.1, "{attention}");
    // The LM head over the 8 padded requests' rows (vocabulary 128,256 = 501 tiles) and the
    // sampler over their fp32 logits (4,104,192 bytes -> 1,547.3 ns).
    let lm_head = matmul(8.0, 4096.0, 128_256.0);
    let sampler = pass(8.0 * 128_256.0 * 4.0);
    let want = [
        ("embedding", 1, norm),
        ("input_layernorm", 32, norm),
        ("qkv_proj", 32, qkv),
        ("attention", 32, attention),
        ("o_proj", 32, matmul(16.0, 4096.0, 4096.0)),
        ("post_attention_layernorm", 32, norm),
        ("gate_up_proj", 32, matmul(16.0, 4096.0, 28_672.0)),
        ("down_proj", 32, matmul(16.0, 14_336.0, 4096.0)),
        ("final_layernorm", 1, norm),
        ("lm_head", 1, lm_head),
        ("sampler", 1, sampler),
    ];
    assert_layers(&layers, &want);
    // About 10.2 ms, nine tenths of it the weights.
    assert!((10_100_000..10_300_000).contains(&total), "{total}");
}

#[test]
fn a_prefill_beside_a_decode_is_padded_and_its_largest_matmuls_are_mma_bound() {
    // A 300-token prompt and one decode reading 1,000 KV tokens: 301 tokens -> 512, two
    // requests -> 8.
    let (layers, _) = priced(&[item(300, 0), item(1, 999)]);
    let t = 512.0;
    // Q, K and V at 512 tokens: MMA 2 x 512 x 4,096 x 6,144 / 671,058 = 38,401.7 ns under the
    // stream, 60,817,408 bytes -> 38,797.4 ns.
    let qkv = matmul(t, 4096.0, 6144.0);
    assert!((qkv - (FIXED + 38_797.4)).abs() < 0.1, "{qkv}");
    // Gate and up: MMA 2 x 512 x 4,096 x 28,672 / 671,058 = 179,208.2 ns over the stream
    // (268,435,456 bytes -> 171,243.5 ns).
    let gate_up = matmul(t, 4096.0, 28_672.0);
    assert!((gate_up - (FIXED + 179_208.2)).abs() < 0.1, "{gate_up}");
    // Attention: the prompt's 5 query tiles of 64 rows reach 1 + 2 + 3 + 4 + 5 = 15 KV tiles
    // per head: 32 heads x 15 x 64 x 64 x 4 x 128 = 1,006,632,960 FLOPs at 918e3 x 0.0527
    // FLOP/ns = 20,807.4 ns; the decode 2,250 + 1,000 x 4,096 / 442.26 = 11,511.5; the
    // prefill's fixed 5,360: 37,678.9 ns.
    let tiles: f64 = 32.0 * 15.0 * 64.0 * 64.0 * 4.0 * 128.0;
    let attention: f64 = 5360.0 + tiles / (918e3 * 0.0527) + 2250.0 + 1000.0 * 4096.0 / 442.26;
    assert!((attention - 37_678.9).abs() < 0.1, "{attention}");
    let norm = pass(t * 4096.0 * 2.0);
    let want = [
        ("embedding", 1, norm),
        ("input_layernorm", 32, norm),
        ("qkv_proj", 32, qkv),
        ("attention", 32, attention),
        ("o_proj", 32, matmul(t, 4096.0, 4096.0)),
        ("post_attention_layernorm", 32, norm),
        ("gate_up_proj", 32, gate_up),
        ("down_proj", 32, matmul(t, 14_336.0, 4096.0)),
        ("final_layernorm", 1, norm),
        ("lm_head", 1, matmul(8.0, 4096.0, 128_256.0)),
        ("sampler", 1, pass(8.0 * 128_256.0 * 4.0)),
    ];
    let got: Vec<_> = layers.iter().map(|l| (l.name, l.time_ns)).collect();
    for ((name, _, ns), (got_name, got_ns)) in want.iter().zip(&got) {
        assert_eq!(name, got_name);
        // The attention's KV bytes per ns are 1,638 x 0.27 exactly, not 442.26.
        let slack = if *name == "attention" { 1 } else { 0 };
        assert!(
            got_ns.abs_diff(ns.round() as u64) <= slack,
            "{name}: {got_ns} vs {ns}"
        );
    }
}

#[test]
fn a_batch_padded_to_the_same_counts_costs_the_same_outside_attention() {
    // 5 and 9 decodes both compute 16 tokens; their LM heads 8 and 16 rows.
    let (five, _) = priced(&[item(1, 10); 5]);
    let (nine, _) = priced(&[item(1, 10); 9]);
    for (a, b) in five.iter().zip(&nine) {
        match a.name {
            "attention" | "lm_head" | "sampler" => {}
            _ => assert_eq!(a.time_ns, b.time_ns, "{}", a.name),
        }
    }
}

#[test]
fn the_memoised_roofline_prices_a_tpu_step_as_the_roofline() {
    let items = [item(300, 0), item(1, 999), item(1, 5)];
    let batch = BatchDesc::new(&items);
    let mut memo = MemoisedRoofline::new(tpu_roofline());
    let (_, total) = priced(&items);
    assert_eq!(memo.step_time(&batch).unwrap(), total);
    assert_eq!(memo.step_time(&batch).unwrap(), total);
}
