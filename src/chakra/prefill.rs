//! The execution traces of a prefill instance's batch under prefill/decode disaggregation:
//! the KV cache leaves for the decode side inside the batch, as LLMServingSim's `PREFILL`
//! traces do (spec §3c "P/D flow", §4.7 "PREFILL conversion").
//!
//! A prefill instance of `tp` NPUs is simulated with `2·tp` NPUs: the `tp` senders (ids
//! `0..tp`) run the batch's [`BatchTrace`], and each sender `r` has a receiver, NPU `r + tp`,
//! standing for the decode instance's NPU of the same rank (LLMServingSim's phantom "KV
//! receiver" NPUs, `npu + num_npus`). Compared with the colocated trace of the same batch:
//!
//! - after every `qkv_proj` COMP node (the layer whose name contains `v_proj`), when the
//!   batch sends any KV, a COMM_SEND node of that layer's KV to the receiver:
//!   `2 · kv_heads · head_dim · tokens · kv_bytes / tp` bytes (integer division), `tokens`
//!   being the batch's [`BatchDesc::kv_send_tokens`](crate::latency::BatchDesc). The SEND
//!   depends on the COMP only; the next layer depends on the COMP, not on the SEND, so the
//!   KV leaves while later layers compute (ASTRA-Sim serialises an NPU's sends and
//!   collectives on its one communication slot);
//! - the final MEM_STORE of the sampler output is replaced by a COMM_SEND of the same size to
//!   the receiver, after the last node;
//! - the receiver's file holds the matching COMM_RECV nodes, in the same order, without
//!   dependencies.
//!
//! A batch completes when its start NPU (sender 0) and end NPU (the last receiver) have
//! finished, i.e. once the receivers have got everything: the step's time includes the tail
//! of the transfer. Every SEND/RECV pair carries `comm_type` 0, `comm_src`, `comm_dst`,
//! `comm_size` and a `comm_tag` numbered as the converter numbers them (one per
//! `(src, dst, layer)` in conversion order: sender 0's sends first, then sender 1's, ...).

use super::attr::{bool_attr, find, int64_attr, integer};
use super::proto::AttributeProto;
use super::proto::attribute_proto::Value;
use super::{BatchTrace, Dialect, EtNode, NodeKind, TraceError, encode_et};
use crate::config::ModelArch;

/// The layer after which a layer's KV is sent (LLMServingSim: names containing `v_proj`).
const KV_LAYER: &str = "qkv_proj";

/// KV bytes one rank sends per layer for `tokens` tokens:
/// `2 · kv_heads · head_dim · tokens · kv_bytes / tp` (LLMServingSim's `_pd_kv_send_bytes`).
pub fn kv_send_bytes(model: &ModelArch, kv_bytes: u64, tp: u32, tokens: u64) -> u64 {
    2 * model.num_kv_heads * model.head_dim * tokens * kv_bytes / u64::from(tp.max(1))
}

/// The files of one prefill batch: sender `r`'s nodes at index `r`, its receiver's at
/// `tp + r` (see the module documentation). `kv_bytes` is the KV cache's bytes per element.
pub fn prefill_nodes(
    trace: &BatchTrace<'_>,
    kv_bytes: u64,
) -> Result<Vec<Vec<EtNode>>, TraceError> {
    let tp = trace.tp.max(1);
    prefill_nodes_at(
        trace,
        kv_bytes,
        Senders {
            first: 0,
            receiver_offset: tp,
        },
        &mut 0,
    )
}

/// Where a prefill batch's senders and receivers are in a process holding more NPUs (a DP
/// group's): rank `r` is NPU `first + r`, its receiver NPU `first + r + receiver_offset`.
#[derive(Debug, Clone, Copy)]
pub struct Senders {
    /// The NPU of rank 0.
    pub first: u32,
    /// How far above its sender a receiver is.
    pub receiver_offset: u32,
}

/// [`prefill_nodes`] for the senders at `at`: the senders' files (rank order), then their
/// receivers'. Message tags continue from `tag`, which is left past the last one used.
pub fn prefill_nodes_at(
    trace: &BatchTrace<'_>,
    kv_bytes: u64,
    at: Senders,
    tag: &mut i64,
) -> Result<Vec<Vec<EtNode>>, TraceError> {
    let tp = trace.tp.max(1);
    let base = trace.nodes()?;
    let per_layer = kv_send_bytes(trace.model, kv_bytes, tp, trace.batch.kv_send_tokens);
    let mut files: Vec<Vec<EtNode>> = (0..2 * tp).map(|_| Vec::new()).collect();
    for rank in 0..tp {
        let src = i64::from(at.first + rank);
        let dst = src + i64::from(at.receiver_offset);
        let mut sender: Vec<EtNode> = Vec::with_capacity(base.len() + 64);
        let mut receiver: Vec<EtNode> = Vec::new();
        // The sender's id of each base node (SENDs shift the ids; dependencies are remapped,
        // so a placement's weight loads keep depending on nothing).
        let mut moved: Vec<u64> = Vec::with_capacity(base.len());
        let mut send = |name: String, bytes: u64, after: Option<u64>, sender: &mut Vec<EtNode>| {
            let attrs = p2p_attrs(src, dst, bytes, *tag);
            *tag += 1;
            receiver.push(EtNode {
                id: receiver.len() as u64,
                name: format!("{name}.recv"),
                kind: NodeKind::CommRecv,
                data_deps: Vec::new(),
                ctrl_deps: Vec::new(),
                duration_ns: 0,
                attrs: attrs.clone(),
            });
            sender.push(EtNode {
                id: sender.len() as u64,
                name: format!("{name}.send"),
                kind: NodeKind::CommSend,
                data_deps: after.into_iter().collect(),
                ctrl_deps: Vec::new(),
                duration_ns: 0,
                attrs,
            });
        };
        for node in &base {
            let deps: Vec<u64> = node.data_deps.iter().map(|&d| moved[d as usize]).collect();
            if node.kind == NodeKind::MemStore {
                let bytes = find(&node.attrs, "tensor_size")
                    .and_then(integer)
                    .map_or(0, |v| u64::try_from(v).unwrap_or(0));
                moved.push(sender.len() as u64);
                send(
                    "sampler.output".to_owned(),
                    bytes,
                    deps.first().copied(),
                    &mut sender,
                );
                continue;
            }
            let id = sender.len() as u64;
            moved.push(id);
            let kv_layer = node.kind == NodeKind::Comp
                && node.name.rsplit('.').next() == Some(KV_LAYER)
                && per_layer > 0;
            sender.push(EtNode {
                id,
                data_deps: deps,
                ..node.clone()
            });
            if kv_layer {
                send(
                    format!("{}.kv", node.name),
                    per_layer,
                    Some(id),
                    &mut sender,
                );
            }
        }
        files[rank as usize] = sender;
        files[(rank + tp) as usize] = receiver;
    }
    Ok(files)
}

/// [`prefill_nodes`] encoded in `dialect`, one buffer per NPU.
pub fn encode_prefill(
    trace: &BatchTrace<'_>,
    kv_bytes: u64,
    dialect: Dialect,
) -> Result<Vec<Vec<u8>>, TraceError> {
    prefill_nodes(trace, kv_bytes)?
        .iter()
        .map(|nodes| encode_et(nodes, dialect).map_err(TraceError::from))
        .collect()
}

/// The attributes of a COMM_SEND or COMM_RECV of `bytes` from NPU `src` to `dst`, tag `tag`.
pub(super) fn p2p_attrs(src: i64, dst: i64, bytes: u64, tag: i64) -> Vec<AttributeProto> {
    let int32 = |name: &str, v: i64| AttributeProto {
        name: name.to_owned(),
        doc_string: String::new(),
        value: Some(Value::Int32Val(i32::try_from(v).unwrap_or(i32::MAX))),
    };
    vec![
        bool_attr("is_cpu_op", false),
        int64_attr("comm_type", 0),
        int32("comm_src", src),
        int32("comm_dst", dst),
        int64_attr("comm_size", i64::try_from(bytes).unwrap_or(i64::MAX)),
        int32("comm_tag", tag),
    ]
}
