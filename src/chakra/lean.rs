//! Lean traces: every run of consecutive COMP nodes of a chain written as one node.
//!
//! ASTRA-Sim's analytical backends run a COMP node for its duration and start a node when the
//! nodes it depends on are done, so a COMP node whose only dependent is the next COMP node
//! (which depends on nothing else) can be merged with it into one node lasting both durations
//! without changing any time. In the upstream dialect, where each duration is rounded to
//! whole µs, the merged node lasts the sum of the rounded durations. A node written with
//! duration 0 (under 500 ns upstream) is kept on its own: ASTRA-Sim runs it for 1 ns, which
//! a merged node could not carry. A Llama-3.1-8B step at
//! TP 2 of 358 nodes (292 COMP, 64 all-reduces, the load and the store) becomes 131: one COMP
//! node per stretch between collectives; a trace without collectives becomes three.

use super::{Dialect, EtNode, NodeKind};

/// `nodes` (ids `0..n` in file order, as [`super::BatchTrace::nodes`] numbers them) with every
/// run of mergeable COMP nodes written as one, named `<first>..<last>`; ids renumbered from 0
/// and dependencies remapped.
pub fn lean_nodes(nodes: &[EtNode], dialect: Dialect) -> Vec<EtNode> {
    let mut dependents = vec![0u32; nodes.len()];
    for node in nodes {
        for &dep in node.data_deps.iter().chain(&node.ctrl_deps) {
            if let Some(count) = dependents.get_mut(dep as usize) {
                *count += 1;
            }
        }
    }
    let mut new_id = vec![0u64; nodes.len()];
    let mut out: Vec<EtNode> = Vec::with_capacity(nodes.len());
    let mut merged_from: Option<usize> = None;
    for (i, node) in nodes.iter().enumerate() {
        let wire = dialect.duration_from_wire(dialect.duration_to_wire(node.duration_ns));
        let joins = i > 0
            && wire > 0
            && mergeable(&nodes[i - 1], node, dependents[i - 1])
            && dialect.duration_to_wire(nodes[i - 1].duration_ns) > 0;
        match out.last_mut() {
            Some(last) if joins => {
                let first = merged_from.get_or_insert(i - 1);
                last.duration_ns += wire;
                last.name = format!("{}..{}", nodes[*first].name, node.name);
            }
            _ => {
                merged_from = None;
                let mut copy = node.clone();
                if copy.kind == NodeKind::Comp {
                    copy.duration_ns = wire;
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
