//! The execution traces of one batch on a pipelined instance (`pp > 1`), cut into stages as
//! LLMServingSim's Chakra converter cuts them (spec §4.7, `pp_stage_boundaries`).
//!
//! The instance has `pp · tp` NPUs: stage `s`, rank `r` is NPU `s·tp + r`. Every NPU of stage
//! `s` runs the nodes of the batch's [`BatchTrace`] that belong to the stage's transformer
//! blocks (`stage_blocks[s]` of them, in order), stage 0 also the input load and the prologue,
//! the last stage also the head and the output store; a block's TP all-reduces and EP
//! collectives stay in its stage. Between stages the activation moves point to point:
//!
//! - every NPU of a stage but the last ends with a COMM_SEND of `total_len · hidden · fp`
//!   bytes (LLMServingSim: the stage's last row's output) to the same rank of the next stage,
//!   depending on the stage's last node;
//! - every NPU of a stage but the first starts with the matching COMM_RECV (LLMServingSim: the
//!   stage's first row's input, the same size), on which the stage's first node depends in
//!   place of the previous stage's last node; a placement's weight loads keep depending on
//!   nothing.
//!
//! Node ids are renumbered from 0 in each file. The message between rank `r` of stages `s` and
//! `s + 1` carries `comm_tag` `s·tp + r` (one tag per message of the batch). An instance whose
//! NPUs start at `first_npu` (a DP group member in its group's process) numbers its NPUs, in
//! `comm_src` and `comm_dst`, from there.

use super::prefill::p2p_attrs;
use super::{BatchTrace, BreakdownError, Dialect, EtNode, NodeKind, TraceError, encode_et};

/// The files of one batch on a pipelined instance whose NPUs start at `first_npu`, NPU
/// `first_npu + s·tp + r` at index `s·tp + r` (see the module documentation). `stage_blocks`
/// must split the model's blocks (their sum is its layer count).
pub fn stage_nodes(
    trace: &BatchTrace<'_>,
    stage_blocks: &[u32],
    first_npu: u32,
) -> Result<Vec<Vec<EtNode>>, TraceError> {
    let pp = stage_blocks.len();
    let base = trace.block_nodes()?;
    let stage_of = stages_of_nodes(trace, stage_blocks, &base)?;
    let tp = trace.tp.max(1);
    let bytes = trace.batch.total_tokens() * trace.model.hidden_size * trace.bytes().activations;
    let mut files = Vec::with_capacity(pp * tp as usize);
    // The new id of each base node in the file being built (`None`: another stage's).
    let mut moved: Vec<Option<u64>> = vec![None; base.len()];
    for s in 0..pp {
        for r in 0..tp {
            let rank = StageRank {
                stage: s,
                last_stage: s + 1 == pp,
                tp,
                npu: i64::from(first_npu) + i64::from(s as u32 * tp + r),
                tag: i64::from(s as u32 * tp + r),
                bytes,
            };
            moved.fill(None);
            files.push(stage_file(&base, &stage_of, &rank, &mut moved)?);
        }
    }
    Ok(files)
}

/// The pipeline stage of each base node: its block's stage; nodes before the first block on
/// the first stage, after it on the last.
fn stages_of_nodes(
    trace: &BatchTrace<'_>,
    stage_blocks: &[u32],
    base: &[(EtNode, Option<u64>)],
) -> Result<Vec<usize>, TraceError> {
    let pp = stage_blocks.len();
    let total: u64 = stage_blocks.iter().map(|&b| u64::from(b)).sum();
    if pp == 0 || total != trace.model.num_layers {
        return Err(TraceError::Breakdown(BreakdownError::Stages {
            stages: stage_blocks.to_vec(),
            blocks: trace.model.num_layers,
            model: trace.model.name.clone(),
        }));
    }
    let mut block_stage = Vec::with_capacity(total as usize);
    for (s, &blocks) in stage_blocks.iter().enumerate() {
        block_stage.extend(std::iter::repeat_n(s, blocks as usize));
    }
    let mut seen_block = false;
    Ok(base
        .iter()
        .map(|(_, block)| match block {
            Some(b) => {
                seen_block = true;
                block_stage[*b as usize]
            }
            None if seen_block => pp - 1,
            None => 0,
        })
        .collect())
}

/// One NPU of a pipelined instance: its stage and place in it.
struct StageRank {
    stage: usize,
    last_stage: bool,
    tp: u32,
    /// Its NPU number.
    npu: i64,
    /// The tag of the activation it sends to the next stage (`s·tp + r`).
    tag: i64,
    /// Bytes of the activation passed between stages.
    bytes: u64,
}

/// The file of one NPU: the activation's arrival from the previous stage, its stage's nodes
/// (renumbered; a dependency on an earlier stage becomes one on the arrival), the send to the
/// next stage. `moved` must be all `None`.
fn stage_file(
    base: &[(EtNode, Option<u64>)],
    stage_of: &[usize],
    rank: &StageRank,
    moved: &mut [Option<u64>],
) -> Result<Vec<EtNode>, TraceError> {
    let (s, tp, npu) = (rank.stage, i64::from(rank.tp), rank.npu);
    let mut file: Vec<EtNode> = Vec::new();
    let recv = (s > 0).then(|| {
        file.push(EtNode {
            id: 0,
            name: format!("stage{}.activation.recv", s - 1),
            kind: NodeKind::CommRecv,
            data_deps: Vec::new(),
            ctrl_deps: Vec::new(),
            duration_ns: 0,
            attrs: p2p_attrs(npu - tp, npu, rank.bytes, rank.tag - tp),
        });
        0
    });
    for (i, (node, _)) in base.iter().enumerate() {
        if stage_of[i] != s {
            continue;
        }
        let id = file.len() as u64;
        moved[i] = Some(id);
        let mut deps: Vec<u64> = Vec::with_capacity(node.data_deps.len());
        for &d in &node.data_deps {
            let dep = moved[d as usize].or(recv).ok_or_else(|| {
                TraceError::Breakdown(BreakdownError::LaterStage {
                    node: node.name.clone(),
                })
            })?;
            if !deps.contains(&dep) {
                deps.push(dep);
            }
        }
        file.push(EtNode {
            id,
            data_deps: deps,
            ..node.clone()
        });
    }
    if !rank.last_stage {
        let id = file.len() as u64;
        let last = id.checked_sub(1).into_iter().collect();
        file.push(EtNode {
            id,
            name: format!("stage{s}.activation.send"),
            kind: NodeKind::CommSend,
            data_deps: last,
            ctrl_deps: Vec::new(),
            duration_ns: 0,
            attrs: p2p_attrs(npu, npu + tp, rank.bytes, rank.tag),
        });
    }
    Ok(file)
}

/// [`stage_nodes`] encoded in `dialect`, one buffer per NPU.
pub fn encode_stages(
    trace: &BatchTrace<'_>,
    stage_blocks: &[u32],
    first_npu: u32,
    dialect: Dialect,
) -> Result<Vec<Vec<u8>>, TraceError> {
    stage_nodes(trace, stage_blocks, first_npu)?
        .iter()
        .map(|nodes| encode_et(nodes, dialect).map_err(TraceError::from))
        .collect()
}
