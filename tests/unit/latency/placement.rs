//! The load/compute pipeline on a tiny hand-made model, with the expected times worked out
//! in the comments.

use blis_cosim::Nanos;
use blis_cosim::config::{Dtype, ModelArch, Placement, PlacementContext, ServedBytes};
use blis_cosim::latency::*;
use serde_json::json;

/// Two bytes for everything (bfloat16).
const BF16: ServedBytes = ServedBytes {
    weights: 2,
    activations: 2,
    kv: 2,
};

/// Two blocks; with 1-byte weights: embedding and lm_head 10·4 = 40 B, qkv_proj
/// 4·(4 + 2·2) = 32 B, down_proj 8·4 = 32 B (all halved at TP2).
fn tiny_model() -> ModelArch {
    ModelArch {
        name: "tiny".into(),
        model_type: "llama".into(),
        hidden_size: 4,
        num_layers: 2,
        num_heads: 2,
        num_kv_heads: 1,
        head_dim: 2,
        intermediate_size: 8,
        vocab_size: 10,
        max_position_embeddings: 1024,
        torch_dtype: None,
        quantization: None,
        moe: None,
        sliding_window: None,
    }
}

/// A compute backend with fixed layer times: embedding 10, per block qkv_proj 20,
/// attention 30, down_proj 20, then lm_head 25 ns: 175 ns a step.
struct Fixed;

impl LatencyBackend for Fixed {
    fn name(&self) -> &'static str {
        "fixed"
    }

    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        Ok(self
            .breakdown(batch)?
            .iter()
            .map(|l| l.repeats * l.time_ns)
            .sum())
    }

    fn layer_times(
        &mut self,
        _: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        let layer = |name, repeats, time_ns| LayerTiming {
            name,
            repeats,
            time_ns,
            is_comm: false,
        };
        *out = vec![
            layer("embedding", 1, 10),
            layer("qkv_proj", 2, 20),
            layer("attention", 2, 30),
            layer("down_proj", 2, 20),
            layer("lm_head", 1, 25),
        ];
        Ok(())
    }
}

fn placement(value: serde_json::Value) -> Placement {
    Placement::parse(
        &value,
        &PlacementContext {
            source: "t",
            at: "placement",
            num_blocks: 2,
            cxl_devices: Some(2),
        },
    )
    .unwrap()
}

/// Host memory 1 B/ns with 2 ns latency; CXL 2 B/ns, no latency, two devices.
fn streaming(p: &Placement, tp: u32) -> WeightStreaming {
    let model = tiny_model();
    WeightStreaming::new(
        Box::new(Fixed),
        &StreamingSpec {
            placement: p,
            model: &model,
            bytes: ServedBytes {
                weights: 1,
                activations: 1,
                kv: 1,
            },
            tp,
            ep: 1,
            cpu: WeightMemory {
                bandwidth_gbps: 1.0,
                latency_ns: 2.0,
            },
            cxl: Some((
                WeightMemory {
                    bandwidth_gbps: 2.0,
                    latency_ns: 0.0,
                },
                2,
            )),
        },
    )
    .unwrap()
}

fn step(backend: &mut WeightStreaming) -> Nanos {
    let items = [BatchItem {
        new_tokens: 1,
        context_tokens: 7,
    }];
    backend.step_time(&BatchDesc::new(&items)).unwrap()
}

/// Default cpu, block 1 on cxl:0, lm_head on cxl:1.
fn mixed() -> Placement {
    placement(json!({
        "default": {"weights": "cpu"},
        "blocks": [{"blocks": "1", "weights": "cxl:0"}],
        "layers": {"lm_head": {"weights": "cxl:1"}}
    }))
}

#[test]
fn weight_bytes_follow_llmservingsim_tensor_sizes() {
    let m = ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap();
    let w = |name, tp| layer_weight_bytes(&m, name, BF16, tp, 1);
    assert_eq!(w("qkv_proj", 1), 50_331_648);
    assert_eq!(w("o_proj", 1), 33_554_432);
    assert_eq!(w("gate_up_proj", 1), 234_881_024);
    assert_eq!(w("down_proj", 1), 117_440_512);
    assert_eq!(w("layernorm", 1), 8192);
    assert_eq!(w("post_attention_layernorm", 2), 8192);
    assert_eq!(w("lm_head", 1), 1_050_673_152);
    assert_eq!(w("lm_head", 2), 525_336_576);
    assert_eq!(w("attention", 1), 0);
    assert_eq!(w("sampler", 1), 0);
    assert_eq!(w("moe", 1), 0, "a dense model has no MoE layer");
}

#[test]
fn a_step_is_the_pipeline_of_loads_per_device_and_compute() {
    // Loads (latency + ⌊bytes / bw⌋), each device's FIFO in layer order:
    //   cpu:   embedding 2+40 → done 42, block 0 qkv_proj 2+32 → 76, down_proj 2+32 → 110
    //   cxl:0: block 1 qkv_proj 32/2 → 16, down_proj → 32
    //   cxl:1: lm_head 40/2 → 20
    // Compute, each layer from max(previous done, its load done):
    //   embedding 42+10 = 52; qkv_proj(0) max(52,76)+20 = 96; attention 126;
    //   down_proj(0) max(126,110)+20 = 146; qkv_proj(1) 166; attention 196; down_proj(1) 216;
    //   lm_head max(216,20)+25 = 241.
    let mut b = streaming(&mixed(), 1);
    assert_eq!(step(&mut b), 241);
    // Again: the FIFOs start empty every step.
    assert_eq!(step(&mut b), 241);
    let items = [BatchItem {
        new_tokens: 1,
        context_tokens: 7,
    }];
    let layers = b.breakdown(&BatchDesc::new(&items)).unwrap();
    let last = layers.last().unwrap();
    assert_eq!((last.name, last.time_ns), ("weight_load_wait", 241 - 175));
    assert_eq!(
        layers.iter().map(|l| l.repeats * l.time_ns).sum::<Nanos>(),
        241
    );
}

#[test]
fn the_streamed_bytes_are_every_off_gpu_weight_of_the_step() {
    // Mixed: everything off the GPU: embedding 40 + 2 blocks · (32 + 32) + lm_head 40 = 208 B
    // (halved at TP2); only qkv_proj on cpu: 2 · 32 = 64 B; all on the GPU: nothing.
    let mut b = streaming(&mixed(), 1);
    step(&mut b);
    assert_eq!(b.streamed_weight_bytes(), 208);
    let mut b = streaming(&mixed(), 2);
    step(&mut b);
    assert_eq!(b.streamed_weight_bytes(), 104);
    let qkv = placement(json!({"layers": {"qkv_proj": {"weights": "cpu"}}}));
    let mut b = streaming(&qkv, 1);
    step(&mut b);
    assert_eq!(b.streamed_weight_bytes(), 64);
    // layer_times reuses its buffer and lists the breakdown's entries.
    let items = [BatchItem {
        new_tokens: 1,
        context_tokens: 7,
    }];
    let mut out = Vec::with_capacity(16);
    b.layer_times(&BatchDesc::new(&items), &mut out).unwrap();
    assert_eq!(out, b.breakdown(&BatchDesc::new(&items)).unwrap());
    assert_eq!(out.capacity(), 16);
}

#[test]
fn tp_ranks_queue_behind_each_other_on_the_same_device() {
    // TP2 halves the weights: embedding, lm_head 20 B, qkv_proj and down_proj 16 B.
    // One rank's loads: cpu 22 + 18 + 18 = 58; cxl:0 8 + 8 = 16; cxl:1 10. Rank 1 queues
    // behind rank 0, so its loads finish at:
    //   cpu:   embedding 58+22 = 80, qkv_proj(0) 98, down_proj(0) 116
    //   cxl:0: qkv_proj(1) 16+8 = 24, down_proj(1) 32;  cxl:1: lm_head 10+10 = 20
    // Compute: embedding 90; qkv_proj(0) max(90,98)+20 = 118; attention 148;
    //   down_proj(0) max(148,116)+20 = 168; qkv_proj(1) 188; attention 218; down_proj(1) 238;
    //   lm_head 263.
    assert_eq!(step(&mut streaming(&mixed(), 2)), 263);
}

#[test]
fn weights_on_the_gpu_cost_nothing_extra() {
    let all_npu = placement(json!({
        "blocks": [{"blocks": "0-1", "weights": "npu"}],
        "layers": {"lm_head": {"weights": "npu"}}
    }));
    assert_eq!(step(&mut streaming(&all_npu, 1)), 175);
}

#[test]
fn a_layer_rule_moves_that_layer_in_every_block() {
    // Only qkv_proj on cpu: block 0's load 2+32 → 34, block 1's → 68.
    // embedding 10; qkv_proj(0) max(10,34)+20 = 54; attention 84; down_proj 104;
    // qkv_proj(1) max(104,68)+20 = 124; attention 154; down_proj 174; lm_head 199.
    let p = placement(json!({"layers": {"qkv_proj": {"weights": "cpu"}}}));
    assert_eq!(step(&mut streaming(&p, 1)), 199);
}

#[test]
fn moe_weight_bytes_are_the_router_and_the_ranks_experts() {
    // Qwen3-30B-A3B: hidden 2,048, 128 experts of FFN 768, bf16. Router 2,048 · 128 · 2 =
    // 524,288 B on every rank; experts (128 / ep) · 3 · 2,048 · 768 · 2 = 1,207,959,552 B at
    // EP 1, half at EP 2. The roofline's `router` and `experts` are the two parts.
    let m = ModelArch::resolve("Qwen/Qwen3-30B-A3B-Instruct-2507").unwrap();
    let w = |name, ep| layer_weight_bytes(&m, name, BF16, 2, ep);
    assert_eq!(w("moe", 1), 524_288 + 1_207_959_552);
    assert_eq!(w("moe", 2), 524_288 + 603_979_776);
    assert_eq!(w("router", 2), 524_288);
    assert_eq!(w("experts", 2), 603_979_776);
    assert_eq!(canonical_layer_name("experts"), "moe");
}

#[test]
fn fp8_weight_bytes_are_one_byte_in_the_linear_layers_and_experts_alone() {
    // vLLM's FP8 quantizes the `LinearBase` and `FusedMoE` weights; the embedding, the norms,
    // the router and the LM head stay 16-bit. Llama-3.1-8B at TP 1: qkv_proj 4,096 · 6,144,
    // down_proj 14,336 · 4,096 at 1 B; lm_head 128,256 · 4,096 and a layernorm 4,096 at 2 B.
    let fp8 = Dtype::Fp8.served(Dtype::Bfloat16);
    let m = ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap();
    let w = |name| layer_weight_bytes(&m, name, fp8, 1, 1);
    assert_eq!(w("qkv_proj"), 25_165_824);
    assert_eq!(w("o_proj"), 16_777_216);
    assert_eq!(w("gate_up_proj"), 117_440_512);
    assert_eq!(w("down_proj"), 58_720_256);
    assert_eq!(w("layernorm"), 8192);
    assert_eq!(w("embedding"), 1_050_673_152);
    assert_eq!(w("lm_head"), 1_050_673_152);
    // Qwen3-30B-A3B at EP 2: the router 2,048 · 128 · 2 B, the rank's 64 experts
    // 64 · 3 · 2,048 · 768 · 1 B.
    let m = ModelArch::resolve("Qwen/Qwen3-30B-A3B-Instruct-2507").unwrap();
    let w = |name| layer_weight_bytes(&m, name, fp8, 2, 2);
    assert_eq!(w("router"), 524_288);
    assert_eq!(w("experts"), 301_989_888);
    assert_eq!(w("moe"), 524_288 + 301_989_888);
}
