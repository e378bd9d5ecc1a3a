//! Writing a generated session as a JSONL session line.
//!
//! A tool call or think time that only follows one LLM call, and that only that call leads
//! to, becomes the call's `tool_duration_ns` (LLMServingSim's form), so chains (conversations,
//! ReAct loops) are plain LLMServingSim session lines. Anything else (fan-out, fan-in, a tool
//! call without a following LLM call) uses the extensions the reader documents: `depends_on`
//! and tool sub-requests.

use crate::workload::sessions::{NodeKind, PlanBuilder, SessionHeader};
use std::io;

/// Appends `v` formatted.
fn int(buf: &mut Vec<u8>, v: impl itoa::Integer) {
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

/// Appends the session line of `plan` (with `model`, the client's) to `buf`.
pub(super) fn write_session(
    buf: &mut Vec<u8>,
    header: &SessionHeader,
    plan: &PlanBuilder,
    client_fields: &[u8],
) -> io::Result<()> {
    let n = plan.len() as u32;
    let mut children = vec![0u32; n as usize];
    for i in 0..n {
        for &p in &plan.node(i).parents {
            children[p as usize] += 1;
        }
    }
    // A delay node folded into the LLM call before it.
    let folded = |i: u32| {
        let node = plan.node(i);
        matches!(node.kind, NodeKind::Tool { .. } | NodeKind::Think { .. })
            && node.parents.len() == 1
            && plan.request(node.parents[0]).is_some()
            && children[node.parents[0] as usize] == 1
            && children[i as usize] > 0
    };
    // The delay folded into each LLM call, if any (the first, as nodes go).
    let mut folded_into = vec![None; n as usize];
    for c in (0..n).filter(|&c| folded(c)) {
        folded_into[plan.node(c).parents[0] as usize].get_or_insert(c);
    }
    // The sub-request each node is written as (a folded node: its LLM call's).
    let mut entry = vec![0u32; n as usize];
    let mut written = 0u32;
    for i in 0..n {
        entry[i as usize] = if folded(i) {
            entry[plan.node(i).parents[0] as usize]
        } else {
            written += 1;
            written - 1
        };
    }
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
    buf.extend_from_slice(b",\"sub_requests\":[");
    for i in (0..n).filter(|&i| !folded(i)) {
        let k = entry[i as usize];
        let node = plan.node(i);
        if k > 0 {
            buf.push(b',');
        }
        buf.push(b'{');
        match (plan.request(i), node.kind) {
            (Some(r), _) => {
                buf.extend_from_slice(b"\"input_toks\":");
                int(buf, r.input_toks);
                buf.extend_from_slice(b",\"output_toks\":");
                int(buf, r.output_toks);
                if let Some(c) = folded_into[i as usize] {
                    let (NodeKind::Tool { latency_ns: d } | NodeKind::Think { ns: d }) =
                        plan.node(c).kind
                    else {
                        unreachable!("a folded node is a delay");
                    };
                    buf.extend_from_slice(b",\"tool_duration_ns\":");
                    int(buf, d);
                    if matches!(plan.node(c).kind, NodeKind::Think { .. }) {
                        buf.extend_from_slice(b",\"think\":true");
                    }
                }
                if !r.token_ids.is_empty() {
                    let (prompt, output) = r.token_ids.split_at(r.input_toks as usize);
                    buf.extend_from_slice(b",\"input_tok_ids\":");
                    ints(buf, prompt);
                    buf.extend_from_slice(b",\"output_tok_ids\":");
                    ints(buf, output);
                }
            }
            (None, NodeKind::Tool { latency_ns: d } | NodeKind::Think { ns: d }) => {
                buf.extend_from_slice(b"\"tool\":");
                string(buf, &node.label)?;
                buf.extend_from_slice(b",\"tool_duration_ns\":");
                int(buf, d);
                if matches!(node.kind, NodeKind::Think { .. }) {
                    buf.extend_from_slice(b",\"think\":true");
                }
            }
            (None, NodeKind::Llm { .. }) => unreachable!("an LLM node has a request"),
        }
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
        buf.push(b'}');
    }
    buf.extend_from_slice(b"]}\n");
    Ok(())
}
