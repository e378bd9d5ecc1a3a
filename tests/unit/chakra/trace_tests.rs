//! Trace-builder tests on Llama-3.1-8B with both compute backends.

use blis_cosim::Nanos;
use blis_cosim::chakra::attr::{find, integer};
use blis_cosim::chakra::proto::attribute_proto::Value;
use blis_cosim::chakra::{BatchTrace, Dialect, EtNode, NodeKind, encode_et, npu_file, read_et};
use blis_cosim::config::{Dtype, Hardware, ModelArch};
use blis_cosim::latency::{
    BatchDesc, BatchItem, LatencyBackend, LayerTiming, ProfileDb, ProfileSpec, Roofline,
};

/// A 100-token prefill chunk over a 50-token prefix, and three decodes: 103 tokens.
const ITEMS: [BatchItem; 4] = [
    BatchItem {
        new_tokens: 100,
        context_tokens: 50,
    },
    BatchItem {
        new_tokens: 1,
        context_tokens: 300,
    },
    BatchItem {
        new_tokens: 1,
        context_tokens: 20,
    },
    BatchItem {
        new_tokens: 1,
        context_tokens: 4000,
    },
];
const TOTAL_LEN: u64 = 103;

fn llama() -> ModelArch {
    ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap()
}

fn roofline_breakdown(model: &ModelArch, tp: u32) -> Vec<LayerTiming> {
    let hw = Hardware::resolve("H100-SXM").unwrap();
    let mut r = Roofline::new(model, &hw, tp, Dtype::Bfloat16);
    r.breakdown(&BatchDesc::new(&ITEMS)).unwrap()
}

fn profile_breakdown(model: &ModelArch, tp: u32) -> Vec<LayerTiming> {
    let root = crate::shared_data::shared_path("profiler/perf");
    let mut db = ProfileDb::load(&ProfileSpec {
        root: &root,
        hardware: "RTXPRO6000",
        model,
        dtype: Dtype::Bfloat16,
        kv_cache_fp8: false,
        tp,
        architecture: None,
        max_num_batched_tokens: 2048,
        max_num_seqs: Some(256),
        collectives: blis_cosim::latency::Collectives::NONE,
    })
    .unwrap();
    db.breakdown(&BatchDesc::new(&ITEMS)).unwrap()
}

fn build(
    model: &ModelArch,
    tp: u32,
    breakdown: &[LayerTiming],
    dims: Option<&[bool]>,
) -> Vec<EtNode> {
    BatchTrace {
        batch: &BatchDesc::new(&ITEMS),
        model,
        tp,
        ep: 1,
        dtype: Dtype::Bfloat16,
        breakdown,
        involved_dim: dims,
        placement: None,
        ep_involved_dim: dims,
    }
    .nodes()
    .unwrap()
}

fn int_attr(node: &EtNode, name: &str) -> i128 {
    integer(find(&node.attrs, name).unwrap_or_else(|| panic!("{}: no {name}", node.name))).unwrap()
}

/// Bytes of the embedding's all-reduce at any TP: 103 tokens × 4,096 hidden × 2 bytes.
const ACTIVATION_BYTES: u64 = TOTAL_LEN * 4096 * 2;

/// Bytes of one rank's logit shard at TP 2: 4 sequences × (128,256 / 2) vocabulary entries ×
/// 2 bytes.
const TP2_LOGIT_SHARD_BYTES: u64 = 4 * 64_128 * 2;

/// Checks the structure every trace must have, and returns the compute time it carries. With
/// `step_level`, the trace must also hold the embedding's all-reduce and the logits'
/// all-gather (a roofline breakdown at `tp` 2).
fn check_chain(nodes: &[EtNode], tp: u32, step_level: bool) -> Nanos {
    for (i, n) in nodes.iter().enumerate() {
        assert_eq!(n.id, i as u64, "ids count up from 0");
        let expected: Vec<u64> = (i as u64).checked_sub(1).into_iter().collect();
        assert_eq!(
            n.data_deps, expected,
            "{} depends on its predecessor",
            n.name
        );
        assert!(n.ctrl_deps.is_empty());
        assert_eq!(
            find(&n.attrs, "is_cpu_op"),
            Some(&Value::BoolVal(false)),
            "{}",
            n.name
        );
    }
    let (load, store) = (&nodes[0], nodes.last().unwrap());
    assert_eq!(load.kind, NodeKind::MemLoad);
    assert_eq!(load.name, "embedding.input.load");
    assert_eq!(int_attr(load, "tensor_size"), (TOTAL_LEN * 2 * 2).into());
    assert_eq!(int_attr(load, "tensor_loc"), 2);
    assert_eq!(store.kind, NodeKind::MemStore);
    assert_eq!(store.name, "sampler.output.store");
    assert_eq!(int_attr(store, "tensor_size"), (TOTAL_LEN * 4).into());
    let mut collectives = 0;
    for pair in nodes.windows(2) {
        let (before, coll) = (&pair[0], &pair[1]);
        if coll.kind != NodeKind::CommColl {
            continue;
        }
        collectives += 1;
        assert!(tp > 1);
        assert_eq!(before.kind, NodeKind::Comp);
        assert_eq!(coll.duration_ns, 0, "ASTRA-Sim times collectives");
        let (comm_type, comm_size) = (int_attr(coll, "comm_type"), int_attr(coll, "comm_size"));
        match coll.name.as_str() {
            "embedding_allreduce" => {
                assert!(step_level);
                assert_eq!(before.name, "embedding");
                assert_eq!((comm_type, comm_size), (0, ACTIVATION_BYTES.into()));
            }
            "logits_allgather" => {
                assert!(step_level && tp == 2);
                assert_eq!(before.name, "lm_head");
                // ALL_GATHER of one rank's shard.
                assert_eq!((comm_type, comm_size), (2, TP2_LOGIT_SHARD_BYTES.into()));
            }
            _ => {
                assert!(
                    before.name.ends_with(".o_proj") || before.name.ends_with(".down_proj"),
                    "{}",
                    before.name
                );
                assert_eq!(coll.name, format!("{}.allreduce", before.name));
                assert_eq!((comm_type, comm_size), (0, ACTIVATION_BYTES.into()));
            }
        }
    }
    let step_level_count = if step_level { 2 } else { 0 };
    assert_eq!(collectives, if tp > 1 { 64 + step_level_count } else { 0 });
    nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Comp)
        .map(|n| n.duration_ns)
        .sum()
}

fn compute_sum(breakdown: &[LayerTiming]) -> Nanos {
    breakdown
        .iter()
        .filter(|l| !l.is_comm)
        .map(|l| l.repeats * l.time_ns)
        .sum()
}

#[test]
fn llama_8b_tp2_from_the_roofline_has_one_node_per_layer_and_66_collectives() {
    let model = llama();
    let breakdown = roofline_breakdown(&model, 2);
    // The roofline prices its own collectives (each block's two all-reduces, the embedding's
    // all-reduce and the logits' all-gather); they must not become compute nodes. The trace
    // keeps LLMServingSim's two all-reduces per block and adds the two step-level ones where
    // the breakdown has them.
    assert_eq!(breakdown.iter().filter(|l| l.is_comm).count(), 4);
    let nodes = build(&model, 2, &breakdown, None);
    // load + embedding + 32 blocks x 9 layers + 3 head layers + 64 block all-reduces + the
    // embedding's all-reduce + the logits' all-gather + store
    assert_eq!(nodes.len(), 1 + 1 + 32 * 9 + 3 + 64 + 2 + 1);
    assert_eq!(check_chain(&nodes, 2, true), compute_sum(&breakdown));
    let names = |range: std::ops::Range<usize>| -> Vec<&str> {
        nodes[range].iter().map(|n| n.name.as_str()).collect()
    };
    assert_eq!(
        names(0..4),
        [
            "embedding.input.load",
            "embedding",
            "embedding_allreduce",
            "layer0.input_layernorm"
        ]
    );
    assert_eq!(
        names(nodes.len() - 6..nodes.len()),
        [
            "layer31.down_proj.allreduce",
            "final_layernorm",
            "lm_head",
            "logits_allgather",
            "sampler",
            "sampler.output.store"
        ]
    );
    assert!(
        nodes
            .iter()
            .all(|n| find(&n.attrs, "involved_dim").is_none())
    );
}

#[test]
fn llama_8b_tp2_from_the_profile_has_the_same_shape_and_its_step_time() {
    if !crate::shared_data::available() {
        return;
    }
    let model = llama();
    let breakdown = profile_breakdown(&model, 2);
    assert!(breakdown.iter().all(|l| !l.is_comm));
    let nodes = build(&model, 2, &breakdown, None);
    // LLMServingSim's accounting: no step-level collectives in the breakdown, none in the
    // trace.
    assert_eq!(nodes.len(), 1 + 1 + 32 * 9 + 3 + 64 + 1);
    let compute = check_chain(&nodes, 2, false);
    assert_eq!(compute, compute_sum(&breakdown));
    let names: Vec<&str> = nodes[2..11].iter().map(|n| n.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "layer0.layernorm",
            "layer0.qkv_proj",
            "layer0.rotary_emb",
            "layer0.attention",
            "layer0.o_proj",
            "layer0.o_proj.allreduce",
            "layer0.layernorm",
            "layer0.gate_up_proj",
            "layer0.act_fn",
        ]
    );
}

#[test]
fn a_single_gpu_trace_has_no_collectives() {
    if !crate::shared_data::available() {
        return;
    }
    let model = llama();
    let breakdown = profile_breakdown(&model, 1);
    let nodes = build(&model, 1, &breakdown, None);
    assert_eq!(nodes.len(), 1 + 1 + 32 * 9 + 3 + 1);
    check_chain(&nodes, 1, false);
}

#[test]
fn involved_dims_are_attached_to_every_collective() {
    let model = llama();
    let nodes = build(
        &model,
        2,
        &roofline_breakdown(&model, 2),
        Some(&[true, false]),
    );
    let colls: Vec<&EtNode> = nodes
        .iter()
        .filter(|n| n.kind == NodeKind::CommColl)
        .collect();
    assert_eq!(
        colls.len(),
        66,
        "64 per block, the embedding's and the logits'"
    );
    for c in colls {
        let Some(Value::BoolList(dims)) = find(&c.attrs, "involved_dim") else {
            panic!("{}: no involved_dim bool_list", c.name);
        };
        assert_eq!(dims.values, [true, false]);
    }
}

/// The message of a breakdown whose layer `odd` repeats neither once nor once per block.
fn odd_repeats_message(odd: &LayerTiming, model: &ModelArch) -> String {
    format!(
        "latency breakdown: layer `{}` runs {} times per step; expected once, or {} times as \
         a block layer of {}, in one contiguous block",
        odd.name, odd.repeats, model.num_layers, model.name
    )
}

#[test]
fn step_level_collectives_come_only_at_tp_above_1() {
    let model = llama();
    // The roofline prices none at TP 1: the trace has no collective.
    let tp1 = roofline_breakdown(&model, 1);
    assert!(tp1.iter().all(|l| !l.is_comm));
    let nodes = build(&model, 1, &tp1, None);
    assert_eq!(nodes.len(), 1 + 1 + 32 * 9 + 3 + 1);
    assert_eq!(check_chain(&nodes, 1, false), compute_sum(&tp1));
    // A TP-2 breakdown's step-level entries in a trace of one NPU (as a caller could pass)
    // are not collectives over one NPU: they are left out.
    let tp2 = roofline_breakdown(&model, 2);
    let nodes = build(&model, 1, &tp2, None);
    assert!(nodes.iter().all(|n| n.kind != NodeKind::CommColl));
    // At TP 4 the logit shard is a quarter of the vocabulary: 4 × 32,064 × 2 bytes.
    let tp4 = roofline_breakdown(&model, 4);
    let nodes = build(&model, 4, &tp4, None);
    let gather = nodes.iter().find(|n| n.name == "logits_allgather").unwrap();
    assert_eq!(int_attr(gather, "comm_size"), (4 * 32_064 * 2).into());
}

#[test]
fn a_breakdown_that_is_not_prologue_block_head_is_refused() {
    let model = llama();
    let mut breakdown = roofline_breakdown(&model, 1);
    breakdown[3].repeats = 7;
    let err = BatchTrace {
        batch: &BatchDesc::new(&ITEMS),
        model: &model,
        tp: 1,
        ep: 1,
        dtype: Dtype::Bfloat16,
        breakdown: &breakdown,
        involved_dim: None,
        placement: None,
        ep_involved_dim: None,
    }
    .nodes()
    .unwrap_err();
    assert_eq!(err.to_string(), odd_repeats_message(&breakdown[3], &model));
    let only_comm: Vec<LayerTiming> = breakdown.into_iter().filter(|l| l.is_comm).collect();
    let err = BatchTrace {
        batch: &BatchDesc::new(&ITEMS),
        model: &model,
        tp: 1,
        ep: 1,
        dtype: Dtype::Bfloat16,
        breakdown: &only_comm,
        involved_dim: None,
        placement: None,
        ep_involved_dim: None,
    }
    .nodes()
    .unwrap_err();
    assert_eq!(err.to_string(), "latency breakdown: no compute layers");
}

#[test]
fn a_batch_trace_is_written_once_per_tp_rank_and_reads_back() {
    let model = llama();
    let breakdown = roofline_breakdown(&model, 4);
    let trace = BatchTrace {
        batch: &BatchDesc::new(&ITEMS),
        model: &model,
        tp: 4,
        ep: 1,
        dtype: Dtype::Bfloat16,
        breakdown: &breakdown,
        involved_dim: None,
        placement: None,
        ep_involved_dim: None,
    };
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("llm");
    let paths = trace.write(&prefix, Dialect::LlmServingSim).unwrap();
    assert_eq!(paths.len(), 4);
    let nodes = trace.nodes().unwrap();
    for path in &paths {
        let back = read_et(path).unwrap();
        assert_eq!(back.decode_nodes(Dialect::LlmServingSim).unwrap(), nodes);
    }
    assert_eq!(paths[3], npu_file(&prefix, 3));
}

#[test]
fn encode_into_writes_exactly_the_encoded_nodes() {
    if !crate::shared_data::available() {
        return;
    }
    let model = llama();
    let mut out = vec![0xAA; 3];
    for (tp, profiled) in [(1, false), (1, true), (2, false), (2, true), (4, false)] {
        let breakdown = if profiled {
            profile_breakdown(&model, tp)
        } else {
            roofline_breakdown(&model, tp)
        };
        for dims in [None, Some(&[true, false][..])] {
            let trace = BatchTrace {
                batch: &BatchDesc::new(&ITEMS),
                model: &model,
                tp,
                ep: 1,
                dtype: Dtype::Bfloat16,
                breakdown: &breakdown,
                involved_dim: dims,
                placement: None,
                ep_involved_dim: dims,
            };
            for dialect in [Dialect::LlmServingSim, Dialect::Upstream] {
                trace.encode_into(dialect, &mut out).unwrap();
                let expected = encode_et(&trace.nodes().unwrap(), dialect).unwrap();
                assert_eq!(out, expected, "tp {tp}, {dialect:?}, {dims:?}");
            }
        }
    }
    let mut odd = roofline_breakdown(&model, 1);
    odd[3].repeats = 7;
    let err = BatchTrace {
        batch: &BatchDesc::new(&ITEMS),
        model: &model,
        tp: 1,
        ep: 1,
        dtype: Dtype::Bfloat16,
        breakdown: &odd,
        involved_dim: None,
        placement: None,
        ep_involved_dim: None,
    }
    .encode_into(Dialect::LlmServingSim, &mut out)
    .unwrap_err();
    assert_eq!(err.to_string(), odd_repeats_message(&odd[3], &model));
}

/// Qwen3-30B-A3B at TP 2 with EP 2 from the RTXPRO6000 profile, with the EP collectives
/// priced as rows (as both network backends set them up).
fn moe_ep2_breakdown(model: &ModelArch) -> Vec<LayerTiming> {
    use blis_cosim::latency::{Collectives, CommLink, EpNetwork, ExpertParallel, ExpertRouting};
    let root = crate::shared_data::shared_path("profiler/perf");
    let link = CommLink {
        bandwidth_gbps: 16.0,
        latency_ns: 20_000.0,
        local_mem_gbps: 1597.0,
        through_host: false,
    };
    let mut db = ProfileDb::load(&ProfileSpec {
        root: &root,
        hardware: "RTXPRO6000",
        model,
        dtype: Dtype::Bfloat16,
        kv_cache_fp8: false,
        tp: 2,
        architecture: None,
        max_num_batched_tokens: 2048,
        max_num_seqs: None,
        collectives: Collectives {
            tp: 2,
            tp_link: None,
            tp_dispatch: None,
            ep: ExpertParallel {
                total: 2,
                local: 2,
                first_rank: 0,
                routing: ExpertRouting::Balanced,
                link: Some(EpNetwork {
                    inner: (2, link),
                    outer: (1, link),
                }),
            },
        },
    })
    .unwrap();
    db.breakdown(&BatchDesc::new(&ITEMS)).unwrap()
}

#[test]
fn expert_parallel_dispatch_and_combine_become_collectives_around_every_moe_layer() {
    if !crate::shared_data::available() {
        return;
    }
    let model = ModelArch::resolve("Qwen/Qwen3-30B-A3B-Instruct-2507").unwrap();
    let breakdown = moe_ep2_breakdown(&model);
    let nodes = BatchTrace {
        batch: &BatchDesc::new(&ITEMS),
        model: &model,
        tp: 2,
        ep: 2,
        dtype: Dtype::Bfloat16,
        breakdown: &breakdown,
        involved_dim: None,
        placement: None,
        ep_involved_dim: None,
    }
    .nodes()
    .unwrap();
    let (hidden, experts, layers) = (2048u64, 128u64, 48usize);
    assert_eq!(model.hidden_size, hidden);
    assert_eq!(model.num_layers, layers as u64);
    let colls: Vec<&EtNode> = nodes
        .iter()
        .filter(|n| n.kind == NodeKind::CommColl)
        .collect();
    let named = |suffix: &str| -> Vec<&&EtNode> {
        colls.iter().filter(|n| n.name.ends_with(suffix)).collect()
    };
    // Every block: one dispatch, one combine, and the TP all-reduce after `o_proj` (the
    // experts' down projection is inside `moe`: no all-reduce after it).
    let (dispatch, combine) = (named(".ep_dispatch"), named(".ep_combine"));
    assert_eq!(named(".o_proj.allreduce").len(), layers);
    assert_eq!(colls.len(), 3 * layers);
    assert_eq!(dispatch.len(), layers);
    assert_eq!(combine.len(), layers);
    for n in &dispatch {
        assert_eq!(int_attr(n, "comm_type"), 2, "{}: ALL_GATHER", n.name);
        // ⌊103 tokens / 2 ranks⌋ = 51 rows of hidden + router logits, bf16.
        assert_eq!(
            int_attr(n, "comm_size"),
            (51 * (hidden + experts) * 2).into()
        );
        assert_eq!(n.duration_ns, 0);
    }
    for n in &combine {
        assert_eq!(int_attr(n, "comm_type"), 7, "{}: REDUCE_SCATTER", n.name);
        assert_eq!(int_attr(n, "comm_size"), (TOTAL_LEN * hidden * 2).into());
    }
    // Dispatch, the MoE layer, combine, in that order, in every block.
    for block in 0..layers {
        let at = |name: &str| {
            nodes
                .iter()
                .position(|n| n.name == format!("layer{block}.{name}"))
                .unwrap_or_else(|| panic!("layer{block}.{name}"))
        };
        assert_eq!(at("ep_dispatch") + 1, at("moe"));
        assert_eq!(at("moe") + 1, at("ep_combine"));
    }
    // The breakdown's own communication times are not compute.
    let compute: Nanos = nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Comp)
        .map(|n| n.duration_ns)
        .sum();
    assert_eq!(compute, compute_sum(&breakdown));
    // The reused-buffer encoder agrees with the node list.
    for dialect in [Dialect::LlmServingSim, Dialect::Upstream] {
        let trace = BatchTrace {
            batch: &BatchDesc::new(&ITEMS),
            model: &model,
            tp: 2,
            ep: 2,
            dtype: Dtype::Bfloat16,
            breakdown: &breakdown,
            involved_dim: Some(&[true, false]),
            placement: None,
            ep_involved_dim: Some(&[true, false]),
        };
        let mut out = Vec::new();
        trace.encode_into(dialect, &mut out).unwrap();
        assert_eq!(out, encode_et(&trace.nodes().unwrap(), dialect).unwrap());
    }
}

#[test]
fn weights_a_placement_keeps_off_the_gpu_are_loaded_before_their_layers() {
    if !crate::shared_data::available() {
        return;
    }
    use blis_cosim::config::{Placement, PlacementContext};
    let model = llama();
    let placement = Placement::parse(
        &serde_json::json!({
            "default": {"weights": "cxl:0"},
            "blocks": [{"blocks": "1", "weights": "cpu"}],
            "layers": {"lm_head": {"weights": "npu"}}
        }),
        &PlacementContext {
            source: "test",
            at: "placement",
            num_blocks: 32,
            cxl_devices: Some(2),
        },
    )
    .unwrap();
    let breakdown = profile_breakdown(&model, 1);
    let trace = BatchTrace {
        batch: &BatchDesc::new(&ITEMS),
        model: &model,
        tp: 1,
        ep: 1,
        dtype: Dtype::Bfloat16,
        breakdown: &breakdown,
        involved_dim: None,
        placement: Some(&placement),
        ep_involved_dim: None,
    };
    let nodes = trace.nodes().unwrap();
    let loads: Vec<&EtNode> = nodes
        .iter()
        .filter(|n| n.name.ends_with(".weight.load"))
        .collect();
    // Layers with weights: embedding; per block two layernorms, qkv_proj, o_proj,
    // gate_up_proj, down_proj; final_layernorm. lm_head stays on the GPU.
    assert_eq!(loads.len(), 1 + 32 * 6 + 1);
    let load = |name: &str| {
        *loads
            .iter()
            .find(|n| n.name == format!("{name}.weight.load"))
            .unwrap_or_else(|| panic!("{name}"))
    };
    let at = |name: &str| nodes.iter().position(|n| n.name == name).unwrap();
    // (tensor_loc, tensor_device, tensor_size): CXL = 3, host memory = 2.
    let where_ = |n: &EtNode| {
        (
            int_attr(n, "tensor_loc"),
            int_attr(n, "tensor_device"),
            int_attr(n, "tensor_size"),
        )
    };
    // vocab × hidden × 2 B; hidden × (q + 2 kv) × 2 B.
    assert_eq!(
        where_(load("embedding")),
        (3, 0, (128_256 * 4096 * 2).into())
    );
    assert_eq!(
        where_(load("layer0.qkv_proj")),
        (3, 0, (4096 * 6144 * 2).into())
    );
    assert_eq!(
        where_(load("layer1.qkv_proj")),
        (2, 0, (4096 * 6144 * 2).into())
    );
    assert!(!nodes.iter().any(|n| n.name == "lm_head.weight.load"));
    assert!(
        !nodes
            .iter()
            .any(|n| n.name == "layer0.attention.weight.load")
    );
    for l in &loads {
        assert_eq!(l.kind, NodeKind::MemLoad);
        assert!(l.data_deps.is_empty(), "{} is issued at the start", l.name);
        // The next node is the layer's COMP, after its predecessor and its weights.
        let comp = &nodes[l.id as usize + 1];
        assert_eq!(comp.kind, NodeKind::Comp);
        assert_eq!(format!("{}.weight.load", comp.name), l.name);
        assert_eq!(comp.data_deps, [l.id - 1, l.id], "{}", comp.name);
    }
    // Nodes after a load skip it in the chain; the others follow their predecessor.
    let after = &nodes[at("layer0.qkv_proj") + 1];
    assert_eq!(after.data_deps, [at("layer0.qkv_proj") as u64]);
    assert_eq!(nodes[1].name, "embedding.weight.load");
    assert_eq!(
        nodes[2].data_deps,
        [0, 1],
        "embedding: input load and weights"
    );
    // The compute is the backend's, and the reused-buffer encoder agrees.
    let compute: Nanos = nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Comp)
        .map(|n| n.duration_ns)
        .sum();
    assert_eq!(compute, compute_sum(&breakdown));
    for dialect in [Dialect::LlmServingSim, Dialect::Upstream] {
        let mut out = Vec::new();
        trace.encode_into(dialect, &mut out).unwrap();
        assert_eq!(out, encode_et(&nodes, dialect).unwrap());
    }
}

/// `comm_size` of a collective or `tensor_size` of a load or store; `None` for compute.
fn moved_bytes(node: &EtNode) -> Option<i128> {
    find(&node.attrs, "comm_size")
        .or_else(|| find(&node.attrs, "tensor_size"))
        .map(|a| integer(a).unwrap())
}

#[test]
fn an_fp8_trace_moves_16_bit_activations_and_one_byte_linear_weights() {
    use blis_cosim::config::{Placement, PlacementContext};
    // vLLM's FP8 quantizes the linear layers' weights alone: against the BF16 trace of the
    // same breakdown, every collective and activation load or store is the same, the linear
    // layers' weight loads are half, the embedding's and the norms' the same.
    let model = llama();
    let placement = Placement::parse(
        &serde_json::json!({"default": {"weights": "cpu"}}),
        &PlacementContext {
            source: "test",
            at: "placement",
            num_blocks: 32,
            cxl_devices: None,
        },
    )
    .unwrap();
    let breakdown = roofline_breakdown(&model, 2);
    let nodes = |dtype| {
        BatchTrace {
            batch: &BatchDesc::new(&ITEMS),
            model: &model,
            tp: 2,
            ep: 1,
            dtype,
            breakdown: &breakdown,
            involved_dim: None,
            placement: Some(&placement),
            ep_involved_dim: None,
        }
        .nodes()
        .unwrap()
    };
    let (bf16, fp8) = (nodes(Dtype::Bfloat16), nodes(Dtype::Fp8));
    assert_eq!(bf16.len(), fp8.len());
    let linear = ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"];
    let mut halved = 0;
    for (b, f) in bf16.iter().zip(&fp8) {
        assert_eq!(b.name, f.name);
        let is_linear_load = f.name.ends_with(".weight.load")
            && linear
                .iter()
                .any(|l| f.name.ends_with(&format!(".{l}.weight.load")));
        let (b_bytes, f_bytes) = (moved_bytes(b), moved_bytes(f));
        if is_linear_load {
            halved += 1;
            assert_eq!(f_bytes.map(|x| 2 * x), b_bytes, "{}", f.name);
        } else {
            assert_eq!(f_bytes, b_bytes, "{}", f.name);
        }
    }
    assert_eq!(halved, 32 * linear.len());
    // By hand, one rank of TP 2: 103 tokens × 4,096 × 2 B per all-reduce; the qkv_proj
    // shard 4,096 × (6,144 / 2) × 1 B; the embedding shard (128,256 / 2) × 4,096 × 2 B.
    let size = |name: &str| moved_bytes(fp8.iter().find(|n| n.name == name).unwrap());
    assert_eq!(
        size("layer0.o_proj.allreduce"),
        Some(ACTIVATION_BYTES.into())
    );
    assert_eq!(size("embedding_allreduce"), Some(ACTIVATION_BYTES.into()));
    assert_eq!(size("logits_allgather"), Some(TP2_LOGIT_SHARD_BYTES.into()));
    assert_eq!(
        size("embedding.input.load"),
        Some((TOTAL_LEN * 2 * 2).into())
    );
    assert_eq!(
        size("layer0.qkv_proj.weight.load"),
        Some((4096 * 3072).into())
    );
    assert_eq!(
        size("embedding.weight.load"),
        Some((64_128 * 4096 * 2).into())
    );
    assert_eq!(
        size("layer0.input_layernorm.weight.load"),
        Some((4096 * 2).into())
    );
}
