//! Unit tests of `blis_cosim::chakra::prefill`.

use blis_cosim::chakra::attr::{find, integer};
use blis_cosim::chakra::prefill::{kv_send_bytes, prefill_nodes};
use blis_cosim::chakra::proto::attribute_proto::Value;
use blis_cosim::chakra::{BatchTrace, Dialect, EtNode, NodeKind, encode_et};
use blis_cosim::config::{Dtype, Hardware, ModelArch};
use blis_cosim::latency::{BatchDesc, BatchItem, LatencyBackend, Roofline};

fn attr(node: &EtNode, name: &str) -> i128 {
    find(&node.attrs, name).and_then(integer).unwrap()
}

/// A TP-2 prefill batch of Llama-3.1-8B: two prompts of 100 and 20 tokens, the first
/// with a 50-token prefix hit (170 KV tokens to send), bf16 KV.
fn files(kv_send_tokens: u64) -> (Vec<EtNode>, Vec<Vec<EtNode>>) {
    let model = ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap();
    let hw = Hardware::resolve("H100-SXM").unwrap();
    let items = [
        BatchItem {
            new_tokens: 100,
            context_tokens: 50,
        },
        BatchItem {
            new_tokens: 20,
            context_tokens: 0,
        },
    ];
    let batch = BatchDesc::new(&items).with_kv_send_tokens(kv_send_tokens);
    let breakdown = Roofline::new(&model, &hw, 2, Dtype::Bfloat16)
        .breakdown(&batch)
        .unwrap();
    let trace = BatchTrace {
        batch: &batch,
        model: &model,
        tp: 2,
        ep: 1,
        dtype: Dtype::Bfloat16,
        breakdown: &breakdown,
        involved_dim: Some(&[true, false]),
        placement: None,
        ep_involved_dim: None,
    };
    (trace.nodes().unwrap(), prefill_nodes(&trace, 2).unwrap())
}

#[test]
fn senders_send_each_layers_kv_and_the_sampler_output_to_their_receivers() {
    let (colocated, files) = files(170);
    assert_eq!(files.len(), 4, "2 senders, 2 receivers");
    // 2 · 8 KV heads · 128 · 170 tokens · 2 bytes / TP 2.
    let per_layer = 2 * 8 * 128 * 170 * 2 / 2;
    let store = colocated.last().unwrap();
    assert_eq!(store.kind, NodeKind::MemStore);
    let sampler_bytes = attr(store, "tensor_size");
    let mut tags = Vec::new();
    for rank in 0..2u32 {
        let sender = &files[rank as usize];
        let receiver = &files[rank as usize + 2];
        // The colocated trace without its store, plus 32 KV sends and the sampler send.
        let sends: Vec<&EtNode> = sender
            .iter()
            .filter(|n| n.kind == NodeKind::CommSend)
            .collect();
        assert_eq!(sends.len(), 33);
        assert_eq!(sender.len(), colocated.len() - 1 + 33);
        assert!(sender.iter().all(|n| n.kind != NodeKind::MemStore));
        let others: Vec<(&str, NodeKind)> = sender
            .iter()
            .filter(|n| n.kind != NodeKind::CommSend)
            .map(|n| (n.name.as_str(), n.kind))
            .collect();
        let expected: Vec<(&str, NodeKind)> = colocated[..colocated.len() - 1]
            .iter()
            .map(|n| (n.name.as_str(), n.kind))
            .collect();
        assert_eq!(others, expected, "the colocated nodes, in order");
        for (k, node) in sender.iter().enumerate() {
            assert_eq!(node.id, k as u64);
            if node.kind == NodeKind::CommSend {
                // A send depends on the node before it, which nothing after it waits for.
                assert_eq!(node.data_deps, vec![k as u64 - 1]);
                assert!(
                    sender[k + 1..]
                        .iter()
                        .all(|n| !n.data_deps.contains(&node.id))
                );
            } else if k > 0 {
                let previous = (0..k)
                    .rev()
                    .find(|&j| sender[j].kind != NodeKind::CommSend)
                    .unwrap();
                assert_eq!(node.data_deps, vec![previous as u64], "{}", node.name);
            }
        }
        for (k, send) in sends.iter().enumerate() {
            let before = &sender[send.id as usize - 1];
            if k < 32 {
                assert_eq!(before.name, format!("layer{k}.qkv_proj"));
                assert_eq!(attr(send, "comm_size"), per_layer);
            } else {
                assert_eq!(before.id, sender.len() as u64 - 2, "after the last node");
                assert_eq!(attr(send, "comm_size"), sampler_bytes);
            }
            assert_eq!(attr(send, "comm_src"), i128::from(rank));
            assert_eq!(attr(send, "comm_dst"), i128::from(rank + 2));
            assert_eq!(attr(send, "comm_type"), 0);
            tags.push(attr(send, "comm_tag"));
        }
        // The receiver: the matching RECVs, in order, without dependencies.
        assert_eq!(receiver.len(), 33);
        for (recv, send) in receiver.iter().zip(&sends) {
            assert_eq!(recv.kind, NodeKind::CommRecv);
            assert!(recv.data_deps.is_empty());
            assert_eq!(recv.attrs, send.attrs);
        }
        // Collectives stay on the TP NPUs.
        for coll in sender.iter().filter(|n| n.kind == NodeKind::CommColl) {
            assert!(matches!(
                find(&coll.attrs, "involved_dim"),
                Some(Value::BoolList(l)) if l.values == [true, false]
            ));
        }
    }
    assert_eq!(tags, (0..66).collect::<Vec<i128>>(), "one tag per message");
    // The files encode, in both dialects.
    for dialect in [Dialect::LlmServingSim, Dialect::Upstream] {
        for nodes in &files {
            encode_et(nodes, dialect).unwrap();
        }
    }
}

#[test]
fn a_batch_sending_no_kv_still_sends_its_sampler_output() {
    let (_, files) = files(0);
    for rank in 0..2 {
        let sends: Vec<&EtNode> = files[rank]
            .iter()
            .filter(|n| n.kind == NodeKind::CommSend)
            .collect();
        assert_eq!(sends.len(), 1);
        assert_eq!(files[rank + 2].len(), 1);
    }
}

#[test]
fn kv_send_bytes_follow_llmservingsim() {
    let model = ModelArch::resolve("meta-llama/Llama-3.1-8B").unwrap();
    assert_eq!(kv_send_bytes(&model, 2, 1, 10), 40_960);
    assert_eq!(kv_send_bytes(&model, 1, 4, 3), 2 * 8 * 128 * 3 / 4);
}
