//! Lean traces: every run of consecutive COMP nodes of a chain written as one node.
//!
//! ASTRA-Sim's analytical backends run a COMP node for its duration and start a node when the
//! nodes it depends on are done, so a COMP node whose only dependent is the next COMP node
//! (which depends on nothing else) can be merged with it into one node lasting both durations
//! without changing any time. In the upstream dialect each node lasts what [`WireDurations`]
//! writes for it (the growth of the rounded running total, in whole µs), and the merged node
//! the sum of those, so the lean file's running totals are the detailed file's. A node written
//! with duration 0 is kept on its own: ASTRA-Sim runs it for 1 ns, which a merged node could
//! not carry. A Llama-3.1-8B step at
//! TP 2 on the roofline of 360 nodes (292 COMP, 66 collectives, the load and the store) becomes
//! 135: one COMP node per stretch between collectives; a trace without collectives becomes
//! three.

use super::{Dialect, EtNode, NodeKind, WireDurations};

/// `nodes` (ids `0..n` in file order, as [`super::BatchTrace::nodes`] numbers them) with every
/// run of mergeable COMP nodes written as one, named `<first>..<last>`; ids renumbered from 0
/// and dependencies remapped. COMP durations are the ones [`WireDurations`] writes (whole µs
/// upstream), so writing the result in `dialect` changes none of them.
pub fn lean_nodes(nodes: &[EtNode], dialect: Dialect) -> Vec<EtNode> {
    let dependents = dependent_counts(nodes);
    let runs = written_comp_ns(nodes, dialect);
    let mut new_id = vec![0u64; nodes.len()];
    let mut out: Vec<EtNode> = Vec::with_capacity(nodes.len());
    let mut merged_from: Option<usize> = None;
    for (i, node) in nodes.iter().enumerate() {
        let joins = i > 0
            && runs[i] > 0
            && runs[i - 1] > 0
            && mergeable(&nodes[i - 1], node, dependents[i - 1]);
        match out.last_mut() {
            Some(last) if joins => {
                let first = merged_from.get_or_insert(i - 1);
                last.duration_ns += runs[i];
                last.name = format!("{}..{}", nodes[*first].name, node.name);
            }
            _ => {
                merged_from = None;
                let mut copy = node.clone();
                if copy.kind == NodeKind::Comp {
                    copy.duration_ns = runs[i];
                }
                copy.id = out.len() as u64;
                out.push(copy);
            }
        }
        new_id[i] = out.len() as u64 - 1;
    }
    for node in &mut out {
        for dep in node.data_deps.iter_mut().chain(node.ctrl_deps.iter_mut()) {
            *dep = new_id.get(*dep as usize).copied().unwrap_or(*dep);
        }
    }
    out
}

/// How many nodes depend on each node (by id).
fn dependent_counts(nodes: &[EtNode]) -> Vec<u32> {
    let mut dependents = vec![0u32; nodes.len()];
    for node in nodes {
        for &dep in node.data_deps.iter().chain(&node.ctrl_deps) {
            if let Some(count) = dependents.get_mut(dep as usize) {
                *count += 1;
            }
        }
    }
    dependents
}

/// Each COMP node's duration as `dialect` writes it in file order ([`WireDurations`]), ns;
/// 0 for other nodes.
fn written_comp_ns(nodes: &[EtNode], dialect: Dialect) -> Vec<u64> {
    let mut wire = WireDurations::new(dialect);
    nodes
        .iter()
        .map(|node| match node.kind {
            NodeKind::Comp => dialect.duration_from_wire(wire.next(node.duration_ns)),
            _ => 0,
        })
        .collect()
}

/// Whether `next` can be merged into `prev`: both COMP with the same attributes, `next`
/// depending on `prev` alone and `prev` on nothing but what precedes it in the chain.
fn mergeable(prev: &EtNode, next: &EtNode, prev_dependents: u32) -> bool {
    prev.kind == NodeKind::Comp
        && next.kind == NodeKind::Comp
        && prev.attrs == next.attrs
        && prev_dependents == 1
        && next.data_deps == [prev.id]
        && next.ctrl_deps.is_empty()
}
