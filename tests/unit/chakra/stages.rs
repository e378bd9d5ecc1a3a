//! Unit tests of `blis_cosim::chakra::stages`.

use blis_cosim::chakra::attr::{find, integer};
use blis_cosim::chakra::stages::{encode_stages, stage_nodes};
use blis_cosim::chakra::{BatchTrace, Dialect, EtNode, NodeKind};
use blis_cosim::config::{Dtype, Hardware, ModelArch};
use blis_cosim::latency::{BatchDesc, BatchItem, LatencyBackend, Roofline};

fn attr(node: &EtNode, name: &str) -> i128 {
    find(&node.attrs, name).and_then(integer).unwrap()
}

/// The block of a node named `layer<L>.…`.
fn block(node: &EtNode) -> Option<u64> {
    let rest = node.name.strip_prefix("layer")?;
    rest.split('.').next()?.parse().ok()
}

/// A 10-token prefill of Llama-3.1-8B (32 blocks) at TP `tp`: the colocated trace and the
/// stage-cut files.
fn cut(tp: u32, stage_blocks: &[u32]) -> (Vec<EtNode>, Vec<Vec<EtNode>>) {
    cut_in(Dtype::Bfloat16, tp, stage_blocks)
}

/// [`cut`] of a model served in `dtype` (the breakdown the same BF16 roofline's).
fn cut_in(dtype: Dtype, tp: u32, stage_blocks: &[u32]) -> (Vec<EtNode>, Vec<Vec<EtNode>>) {
    let model = ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap();
    let hw = Hardware::resolve("H100-SXM").unwrap();
    let items = [BatchItem {
        new_tokens: 10,
        context_tokens: 0,
    }];
    let batch = BatchDesc::new(&items);
    let breakdown = Roofline::new(&model, &hw, tp, Dtype::Bfloat16)
        .breakdown(&batch)
        .unwrap();
    let trace = BatchTrace {
        batch: &batch,
        model: &model,
        tp,
        ep: 1,
        dtype,
        breakdown: &breakdown,
        involved_dim: (tp > 1).then_some(&[true, false][..]),
        placement: None,
        ep_involved_dim: None,
    };
    (
        trace.nodes().unwrap(),
        stage_nodes(&trace, stage_blocks, 0).unwrap(),
    )
}

#[test]
fn tp2_pp2_stages_hold_their_blocks_and_pass_the_activation() {
    let (full, files) = cut(2, &[16, 16]);
    assert_eq!(files.len(), 4, "2 stages × 2 ranks");
    // 10 tokens × 4096 hidden × 2 bytes.
    let activation = 10 * 4096 * 2;
    for r in 0..2usize {
        let (first, second) = (&files[r], &files[2 + r]);
        // Stage 0: the input load and the prologue, blocks 0..16, then the SEND.
        assert_eq!(first[0].kind, NodeKind::MemLoad);
        assert!(first.iter().filter_map(block).all(|b| b < 16));
        assert_eq!(first.iter().filter_map(block).max(), Some(15));
        let send = first.last().unwrap();
        assert_eq!(send.kind, NodeKind::CommSend);
        assert_eq!(send.data_deps, vec![send.id - 1]);
        assert_eq!(
            first[send.id as usize - 1].name,
            "layer15.down_proj.allreduce"
        );
        assert_eq!(attr(send, "comm_size"), activation);
        assert_eq!(attr(send, "comm_src"), r as i128);
        assert_eq!(attr(send, "comm_dst"), r as i128 + 2);
        assert_eq!(attr(send, "comm_tag"), r as i128);
        // Stage 1: the matching RECV, blocks 16..32, the head and the output store.
        let recv = &second[0];
        assert_eq!(recv.kind, NodeKind::CommRecv);
        assert!(recv.data_deps.is_empty());
        assert_eq!(recv.attrs, send.attrs);
        assert_eq!(
            second[1].data_deps,
            vec![0],
            "the first layer waits for the RECV"
        );
        assert_eq!(block(&second[1]), Some(16));
        assert!(second.iter().filter_map(block).all(|b| b >= 16));
        assert_eq!(second.last().unwrap().kind, NodeKind::MemStore);
        assert!(!second.iter().any(|n| n.kind == NodeKind::CommSend));
        // Together: the colocated trace, plus the SEND and the RECV, in the same order.
        assert_eq!(first.len() + second.len(), full.len() + 2);
        let names: Vec<&str> = first[..first.len() - 1]
            .iter()
            .chain(&second[1..])
            .map(|n| n.name.as_str())
            .collect();
        let expected: Vec<&str> = full.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, expected);
        // 16 blocks × 2 all-reduces on each stage, and the roofline's step-level
        // collectives where vLLM's stages run them: the embedding's all-reduce on the
        // first, the logits' all-gather on the last; ids count up from 0.
        for (file, step_level) in [(first, "embedding_allreduce"), (second, "logits_allgather")] {
            let colls: Vec<&str> = file
                .iter()
                .filter(|n| n.kind == NodeKind::CommColl)
                .map(|n| n.name.as_str())
                .collect();
            assert_eq!(colls.len(), 33);
            assert!(colls.contains(&step_level), "{step_level}");
            assert!(file.iter().enumerate().all(|(k, n)| n.id == k as u64));
        }
    }
    // Every compute node lands on exactly one stage.
    let comp = |nodes: &[EtNode]| -> u64 {
        nodes
            .iter()
            .filter(|n| n.kind == NodeKind::Comp)
            .map(|n| n.duration_ns)
            .sum()
    };
    assert_eq!(comp(&files[0]) + comp(&files[2]), comp(&full));
}

#[test]
fn a_middle_stage_receives_then_sends() {
    // 32 blocks over 3 stages: 11, 11, 10; TP 1 (no collectives).
    let (full, files) = cut(1, &[11, 11, 10]);
    assert_eq!(files.len(), 3);
    let blocks = |f: &[EtNode]| {
        let b: Vec<u64> = f.iter().filter_map(block).collect();
        (b.first().copied(), b.last().copied())
    };
    assert_eq!(blocks(&files[0]), (Some(0), Some(10)));
    assert_eq!(blocks(&files[1]), (Some(11), Some(21)));
    assert_eq!(blocks(&files[2]), (Some(22), Some(31)));
    let middle = &files[1];
    assert_eq!(middle[0].kind, NodeKind::CommRecv);
    let send = middle.last().unwrap();
    assert_eq!(send.kind, NodeKind::CommSend);
    // From stage 0 (NPU 0, tag 0) in, to stage 2 (NPU 2, tag 1) out.
    assert_eq!(
        (attr(&middle[0], "comm_src"), attr(&middle[0], "comm_dst")),
        (0, 1)
    );
    assert_eq!(attr(&middle[0], "comm_tag"), 0);
    assert_eq!((attr(send, "comm_src"), attr(send, "comm_dst")), (1, 2));
    assert_eq!(attr(send, "comm_tag"), 1);
    assert_eq!(files[2][0].attrs, send.attrs);
    assert_eq!(attr(send, "comm_size"), 10 * 4096 * 2);
    // 2 SENDs and 2 RECVs more than the colocated trace, no collective.
    assert_eq!(files.iter().map(Vec::len).sum::<usize>(), full.len() + 4);
    assert!(files.iter().flatten().all(|n| n.kind != NodeKind::CommColl));
}

#[test]
fn stages_must_split_the_blocks() {
    let model = ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap();
    let items = [BatchItem {
        new_tokens: 1,
        context_tokens: 0,
    }];
    let batch = BatchDesc::new(&items);
    let breakdown = Roofline::new(
        &model,
        &Hardware::resolve("H100-SXM").unwrap(),
        1,
        Dtype::Bfloat16,
    )
    .breakdown(&batch)
    .unwrap();
    let trace = BatchTrace {
        batch: &batch,
        model: &model,
        tp: 1,
        ep: 1,
        dtype: Dtype::Bfloat16,
        breakdown: &breakdown,
        involved_dim: None,
        placement: None,
        ep_involved_dim: None,
    };
    let err = stage_nodes(&trace, &[16, 15], 0).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "latency breakdown: pipeline stages of [16, 15] blocks do not split the 32 \
                 blocks of {}",
            model.name
        )
    );
    for dialect in [Dialect::LlmServingSim, Dialect::Upstream] {
        assert_eq!(
            encode_stages(&trace, &[16, 16], 0, dialect).unwrap().len(),
            2
        );
    }
    // A member whose NPUs start at 4 (in a DP group's process): from NPU 4 to NPU 5.
    let files = stage_nodes(&trace, &[16, 16], 4).unwrap();
    let send = files[0].last().unwrap();
    assert_eq!((attr(send, "comm_src"), attr(send, "comm_dst")), (4, 5));
    assert_eq!(files[1][0].attrs, send.attrs);
}

#[test]
fn fp8_stages_pass_the_16_bit_activation() {
    // vLLM's FP8 keeps activations 16-bit: every stage file of an FP8 model sends, receives
    // and reduces the BF16 model's bytes, 10 tokens × 4,096 hidden × 2 bytes a SEND.
    let (_, bf16) = cut(2, &[11, 11, 10]);
    let (_, fp8) = cut_in(Dtype::Fp8, 2, &[11, 11, 10]);
    assert_eq!(fp8, bf16);
    let send = fp8[0].last().unwrap();
    assert_eq!(send.kind, NodeKind::CommSend);
    assert_eq!(attr(send, "comm_size"), 10 * 4096 * 2);
}
