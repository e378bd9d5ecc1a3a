//! Writing a generated session as a JSONL session line.
//!
//! A tool call or think time that only follows one LLM call, and that only that call leads
//! to, becomes the call's `tool_duration_ns` (LLMServingSim's form), so chains (conversations,
//! ReAct loops) are plain LLMServingSim session lines. Anything else (fan-out, fan-in, a tool
//! call without a following LLM call) uses the extensions the reader documents: `depends_on`
//! and tool sub-requests.

use crate::workload::Request;
use crate::workload::sessions::{NodeKind, PlanBuilder, PlanNode, SessionHeader};
use std::io;

/// Appends `v` formatted.
pub(super) fn int(buf: &mut Vec<u8>, v: impl itoa::Integer) {
    buf.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

fn string(buf: &mut Vec<u8>, s: &str) -> io::Result<()> {
    serde_json::to_writer(&mut *buf, s).map_err(io::Error::other)
}

fn ints(buf: &mut Vec<u8>, values: &[u32]) {
    buf.push(b'[');
    for (k, &v) in values.iter().enumerate() {
        if k > 0 {
            buf.push(b',');
        }
        int(buf, v);
    }
    buf.push(b']');
}

/// How a plan's nodes are written: which are delays folded into the LLM call before them,
/// the delay folded into each LLM call, and the sub-request each node is written as.
struct Layout {
    /// Whether each node is a delay folded into the LLM call before it.
    folded: Vec<bool>,
    /// The delay folded into each LLM call, if any (the first, as nodes go).
    folded_into: Vec<Option<u32>>,
    /// The sub-request each node is written as (a folded node: its LLM call's).
    entry: Vec<u32>,
}

impl Layout {
    /// The layout of `plan`'s nodes.
    fn of(plan: &PlanBuilder) -> Layout {
        let n = plan.len() as u32;
        let children = child_counts(plan);
        let folded: Vec<bool> = (0..n).map(|i| folds(plan, &children, i)).collect();
        let mut folded_into = vec![None; n as usize];
        for c in (0..n).filter(|&c| folded[c as usize]) {
            folded_into[plan.node(c).parents[0] as usize].get_or_insert(c);
        }
        let mut entry = vec![0u32; n as usize];
        let mut written = 0u32;
        for i in 0..n {
            entry[i as usize] = if folded[i as usize] {
                entry[plan.node(i).parents[0] as usize]
            } else {
                written += 1;
                written - 1
            };
        }
        Layout {
            folded,
            folded_into,
            entry,
        }
    }
}

/// How many nodes wait for each node of `plan`.
fn child_counts(plan: &PlanBuilder) -> Vec<u32> {
    let n = plan.len() as u32;
    let mut children = vec![0u32; n as usize];
    for i in 0..n {
        for &p in &plan.node(i).parents {
            children[p as usize] += 1;
        }
    }
    children
}

/// Whether node `i` is a delay folded into the LLM call before it: a tool call or think time
/// that only follows that call, that only that call leads to, and that something waits for.
fn folds(plan: &PlanBuilder, children: &[u32], i: u32) -> bool {
    let node = plan.node(i);
    matches!(node.kind, NodeKind::Tool { .. } | NodeKind::Think { .. })
        && node.parents.len() == 1
        && plan.request(node.parents[0]).is_some()
        && children[node.parents[0] as usize] == 1
        && children[i as usize] > 0
}

/// Appends the session line of `plan` (with `model`, the client's) to `buf`.
pub(super) fn write_session(
    buf: &mut Vec<u8>,
    header: &SessionHeader,
    plan: &PlanBuilder,
    client_fields: &[u8],
) -> io::Result<()> {
    let layout = Layout::of(plan);
    write_header(buf, header, client_fields)?;
    buf.extend_from_slice(b",\"sub_requests\":[");
    for i in (0..plan.len() as u32).filter(|&i| !layout.folded[i as usize]) {
        write_sub_request(buf, plan, &layout, i)?;
    }
    buf.extend_from_slice(b"]}\n");
    Ok(())
}

/// The session's fields before its sub-requests: id, arrival, client, the client's fields,
/// deadline.
fn write_header(buf: &mut Vec<u8>, header: &SessionHeader, client_fields: &[u8]) -> io::Result<()> {
    buf.extend_from_slice(b"{\"session_id\":");
    string(buf, &header.id)?;
    buf.extend_from_slice(b",\"arrival_time_ns\":");
    int(buf, header.arrival_ns);
    if let Some(client) = &header.client {
        buf.extend_from_slice(b",\"client\":");
        string(buf, client)?;
    }
    // The client's model, tenant and SLO class, formatted once per client.
    buf.extend_from_slice(client_fields);
    if let Some(d) = header.deadline_ns {
        buf.extend_from_slice(b",\"deadline_ns\":");
        int(buf, d);
    }
    Ok(())
}

/// Node `i` (not folded) as a sub-request: an LLM call (with the delay folded into it) or a
/// tool call, then its place in the workflow.
fn write_sub_request(
    buf: &mut Vec<u8>,
    plan: &PlanBuilder,
    layout: &Layout,
    i: u32,
) -> io::Result<()> {
    let k = layout.entry[i as usize];
    let node = plan.node(i);
    if k > 0 {
        buf.push(b',');
    }
    buf.push(b'{');
    match (plan.request(i), node.kind) {
        (Some(r), _) => {
            let folded = layout.folded_into[i as usize].map(|c| plan.node(c).kind);
            write_llm_call(buf, r, folded);
        }
        (None, delay @ (NodeKind::Tool { .. } | NodeKind::Think { .. })) => {
            buf.extend_from_slice(b"\"tool\":");
            string(buf, &node.label)?;
            write_delay(buf, delay);
        }
        (None, NodeKind::Llm { .. }) => unreachable!("an LLM node has a request"),
    }
    write_place(buf, node, k, &layout.entry)?;
    buf.push(b'}');
    Ok(())
}

/// An LLM call's tokens, the delay `folded` into it, and its token ids.
fn write_llm_call(buf: &mut Vec<u8>, r: &Request, folded: Option<NodeKind>) {
    buf.extend_from_slice(b"\"input_toks\":");
    int(buf, r.input_toks);
    buf.extend_from_slice(b",\"output_toks\":");
    int(buf, r.output_toks);
    if let Some(delay) = folded {
        write_delay(buf, delay);
    }
    if !r.token_ids.is_empty() {
        let (prompt, output) = r.token_ids.split_at(r.input_toks as usize);
        buf.extend_from_slice(b",\"input_tok_ids\":");
        ints(buf, prompt);
        buf.extend_from_slice(b",\"output_tok_ids\":");
        ints(buf, output);
    }
}

/// A delay's `tool_duration_ns`, and `think` for a think time.
fn write_delay(buf: &mut Vec<u8>, delay: NodeKind) {
    let (NodeKind::Tool { latency_ns: d } | NodeKind::Think { ns: d }) = delay else {
        unreachable!("a folded node is a delay");
    };
    buf.extend_from_slice(b",\"tool_duration_ns\":");
    int(buf, d);
    if matches!(delay, NodeKind::Think { .. }) {
        buf.extend_from_slice(b",\"think\":true");
    }
}

/// A sub-request's place in the workflow, where it is not the default: its step label (default:
/// its index `k`), the sub-requests it waits for (default: the one before), its loop
/// iteration, whether it is a fan-out branch.
fn write_place(buf: &mut Vec<u8>, node: &PlanNode, k: u32, entry: &[u32]) -> io::Result<()> {
    if node.label != k.to_string() {
        buf.extend_from_slice(b",\"step\":");
        string(buf, &node.label)?;
    }
    let deps: Vec<u32> = node.parents.iter().map(|&p| entry[p as usize]).collect();
    let default: Vec<u32> = k.checked_sub(1).into_iter().collect();
    if deps != default {
        buf.extend_from_slice(b",\"depends_on\":");
        ints(buf, &deps);
    }
    if let Some(it) = node.iteration {
        buf.extend_from_slice(b",\"loop_iteration\":");
        int(buf, it);
    }
    if node.fan_out {
        buf.extend_from_slice(b",\"fan_out\":true");
    }
    Ok(())
}
