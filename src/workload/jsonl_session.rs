//! Agentic session lines of the JSONL workload.
//!
//! LLMServingSim's form: `session_id` (optional; default `session_<first id>`),
//! `arrival_time_ns` (arrival of the first sub-request) and `sub_requests`, each with
//! `input_toks`, `output_toks`, optional `tool_duration_ns` (default 0) and token ids. The
//! sub-requests run one after the other: each arrives when the previous one has finished plus
//! that one's `tool_duration_ns` (the last one's has no effect). An empty list is skipped.
//!
//! Extensions, for workflows that are not chains (written by `generate`; LLMServingSim reads
//! only chains): `client`, `model` and `deadline_ns` on the session (sub-requests that would
//! arrive at or after the deadline are not sent); per sub-request `model` (overriding the
//! session's), `step` (its label in the outputs),
//! `depends_on` (indices of earlier sub-requests it waits for, all of them; default: the one
//! before), `think: true` (its `tool_duration_ns` is a user's think time, not a tool call),
//! and tool sub-requests `{"tool": NAME, "tool_duration_ns": N}` (a tool call in the
//! workflow, or a think time with `think: true`; no tokens, no request id); `loop_iteration`
//! and `fan_out: true` mark loop iterations and fan-out branches for the session metrics.

use super::jsonl::{model_field, non_negative_int, time_ns, token_count, token_ids};
use super::sessions::{PlanBuilder, SessionHeader, Step};
use super::{FieldProblem, WorkloadError};
use crate::workload::Request;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::Path;

/// Where a session line is.
pub(super) struct At<'a> {
    pub path: &'a Path,
    /// 1-based line.
    pub line: u64,
    /// Id its first LLM sub-request gets.
    pub first_id: u64,
}

impl At<'_> {
    fn invalid(&self, field: impl Into<String>, problem: FieldProblem) -> WorkloadError {
        WorkloadError::invalid(self.path, self.line, field, problem)
    }
}

/// Session ids seen so far, with their lines.
#[derive(Debug, Default)]
pub(super) struct SessionIds(HashMap<String, u64>);

/// One parsed sub-request.
struct Sub {
    label: String,
    /// Indices of the sub-requests it waits for.
    depends_on: Vec<u32>,
    /// Its request, or `None` for a tool sub-request.
    request: Option<Request>,
    /// Delay after it (LLM) or its latency (tool), ns.
    duration_ns: u64,
    think: bool,
    iteration: Option<u32>,
    fan_out: bool,
}

/// Parses a session line; `None` when it has no sub-request.
pub(super) fn parse(
    text: &str,
    at: &At<'_>,
    ids: &mut SessionIds,
) -> Result<Option<(SessionHeader, PlanBuilder)>, WorkloadError> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        let message = crate::serde_messages::in_user_terms(&e.to_string());
        at.invalid("(json)", FieldProblem::Syntax(message))
    })?;
    let Value::Object(mut obj) = value else {
        let problem = FieldProblem::WrongKind {
            expected: "an object",
            got: None,
        };
        return Err(at.invalid("(json)", problem));
    };
    let subs = match obj.remove("sub_requests") {
        Some(Value::Array(subs)) => subs,
        _ => {
            let problem = FieldProblem::WrongKind {
                expected: "a list of sub-requests",
                got: None,
            };
            return Err(at.invalid("sub_requests", problem));
        }
    };
    if subs.is_empty() {
        return Ok(None);
    }
    let arrival_ns = match obj.remove("arrival_time_ns") {
        None => return Err(at.invalid("arrival_time_ns", FieldProblem::Missing)),
        Some(v) => time_ns(&v).map_err(|m| at.invalid("arrival_time_ns", m))?,
    };
    let id = match obj.remove("session_id") {
        None | Some(Value::Null) => format!("session_{}", at.first_id),
        Some(Value::String(s)) => s,
        Some(other) => {
            let problem = FieldProblem::wrong_kind("a string", other);
            return Err(at.invalid("session_id", problem));
        }
    };
    if let Some(first) = ids.0.get(&id) {
        let problem = FieldProblem::DuplicateSession {
            id,
            first_line: *first,
        };
        return Err(at.invalid("session_id", problem));
    }
    ids.0.insert(id.clone(), at.line);
    let model = model_field(obj.remove("model")).map_err(|m| at.invalid("model", m))?;
    let client = model_field(obj.remove("client")).map_err(|m| at.invalid("client", m))?;
    let deadline_ns = match obj.remove("deadline_ns") {
        None | Some(Value::Null) => None,
        Some(v) => Some(time_ns(&v).map_err(|m| at.invalid("deadline_ns", m))?),
    };
    let subs = subs
        .into_iter()
        .enumerate()
        .map(|(k, v)| parse_sub(k as u32, v, &model, at))
        .collect::<Result<Vec<Sub>, _>>()?;
    let header = SessionHeader {
        id,
        client,
        arrival_ns,
        deadline_ns,
        first_id: at.first_id,
        line: at.line,
    };
    Ok(Some((header, build(subs))))
}

/// The plan of a session's sub-requests: an LLM call per request, a tool call per tool
/// sub-request, and a tool call (or think time) after an LLM call with a
/// `tool_duration_ns` that something waits for.
fn build(subs: Vec<Sub>) -> PlanBuilder {
    let mut has_dependents = vec![false; subs.len()];
    for s in &subs {
        for &d in &s.depends_on {
            has_dependents[d as usize] = true;
        }
    }
    let mut plan = PlanBuilder::new();
    // The node the dependents of each sub-request wait for.
    let mut exit: Vec<u32> = Vec::with_capacity(subs.len());
    for (k, sub) in subs.into_iter().enumerate() {
        let parents = sub.depends_on.iter().map(|&d| exit[d as usize]).collect();
        let Some(request) = sub.request else {
            let step = if sub.think {
                Step::Think(sub.duration_ns)
            } else {
                Step::Tool(sub.duration_ns)
            };
            exit.push(plan.push(sub.label, parents, step, sub.iteration, sub.fan_out));
            continue;
        };
        let node = plan.push(
            sub.label.clone(),
            parents,
            Step::Llm(request),
            sub.iteration,
            sub.fan_out,
        );
        exit.push(if sub.duration_ns > 0 && has_dependents[k] {
            let (label, step) = if sub.think {
                (format!("{}+think", sub.label), Step::Think(sub.duration_ns))
            } else {
                (format!("{}+tool", sub.label), Step::Tool(sub.duration_ns))
            };
            plan.push(label, vec![node], step, sub.iteration, false)
        } else {
            node
        });
    }
    plan
}

/// Sub-request `k` of a session line (`model`: the session's).
fn parse_sub(
    k: u32,
    value: Value,
    model: &Option<String>,
    at: &At<'_>,
) -> Result<Sub, WorkloadError> {
    let field = |name: &str| format!("sub_requests[{k}].{name}");
    let invalid = |name: &str, problem| at.invalid(field(name), problem);
    let Value::Object(mut obj) = value else {
        let problem = FieldProblem::WrongKind {
            expected: "an object",
            got: None,
        };
        return Err(at.invalid(format!("sub_requests[{k}]"), problem));
    };
    let duration_ns = match obj.remove("tool_duration_ns") {
        None | Some(Value::Null) => 0,
        Some(v) => time_ns(&v).map_err(|m| invalid("tool_duration_ns", m))?,
    };
    let label = match obj.remove("step") {
        None | Some(Value::Null) => k.to_string(),
        Some(Value::String(s)) => s,
        Some(other) => return Err(invalid("step", FieldProblem::wrong_kind("a string", other))),
    };
    let depends_on =
        depends_on(obj.remove("depends_on"), k).map_err(|m| invalid("depends_on", m))?;
    let iteration =
        loop_iteration(obj.remove("loop_iteration")).map_err(|m| invalid("loop_iteration", m))?;
    let fan_out = flag(obj.remove("fan_out")).map_err(|m| invalid("fan_out", m))?;
    let think = flag(obj.remove("think")).map_err(|m| invalid("think", m))?;
    let request = match obj.remove("tool") {
        Some(tool) => {
            check_tool(tool, &obj).map_err(|(name, m)| invalid(name, m))?;
            None
        }
        None => {
            let request = llm_request(&mut obj, model, &field);
            Some(request.map_err(|(f, m)| at.invalid(f, m))?)
        }
    };
    Ok(Sub {
        label,
        depends_on,
        request,
        duration_ns,
        think,
        iteration,
        fan_out,
    })
}

/// A sub-request's `depends_on` (of sub-request `k`): distinct indices of earlier
/// sub-requests; by default the one before.
fn depends_on(value: Option<Value>, k: u32) -> Result<Vec<u32>, FieldProblem> {
    let list = match value {
        None | Some(Value::Null) => return Ok(k.checked_sub(1).into_iter().collect()),
        Some(Value::Array(list)) => list,
        Some(other) => {
            return Err(FieldProblem::wrong_kind(
                "a list of sub-request indices",
                other,
            ));
        }
    };
    let mut deps: Vec<u32> = Vec::with_capacity(list.len());
    for v in &list {
        let d = non_negative_int(v)?;
        if d >= u64::from(k) {
            return Err(FieldProblem::NotEarlier { index: d, this: k });
        }
        if deps.contains(&(d as u32)) {
            return Err(FieldProblem::ListedTwice { index: d });
        }
        deps.push(d as u32);
    }
    Ok(deps)
}

/// A sub-request's `loop_iteration`, if it has one.
fn loop_iteration(value: Option<Value>) -> Result<Option<u32>, FieldProblem> {
    let Some(v) = value.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let k = non_negative_int(&v)?;
    let too_large = FieldProblem::TooLarge {
        value: k,
        max: u32::MAX.into(),
    };
    u32::try_from(k).map(Some).map_err(|_| too_large)
}

/// A true-or-false field (`fan_out`, `think`); false when absent.
fn flag(value: Option<Value>) -> Result<bool, FieldProblem> {
    match value {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(b),
        Some(other) => Err(FieldProblem::wrong_kind("true or false", other)),
    }
}

/// A tool sub-request's `tool` is a name, and the rest of it (`obj`) has no tokens; the error
/// names the field at fault.
fn check_tool(tool: Value, obj: &Map<String, Value>) -> Result<(), (&'static str, FieldProblem)> {
    if !tool.is_string() {
        return Err(("tool", FieldProblem::wrong_kind("a tool name", tool)));
    }
    let tokens = [
        "input_toks",
        "output_toks",
        "input_tok_ids",
        "output_tok_ids",
    ];
    match tokens.into_iter().find(|key| obj.contains_key(*key)) {
        Some(key) => Err((key, FieldProblem::ToolHasTokens)),
        None => Ok(()),
    }
}

/// The request of an LLM sub-request (id, line and arrival set later).
fn llm_request(
    obj: &mut Map<String, Value>,
    model: &Option<String>,
    field: &dyn Fn(&str) -> String,
) -> Result<Request, (String, FieldProblem)> {
    let model = match model_field(obj.remove("model")).map_err(|m| (field("model"), m))? {
        Some(own) => Some(own),
        None => model.clone(),
    };
    let input = token_count(obj.remove("input_toks"), "input_toks", 1)
        .map_err(|m| (field("input_toks"), m))?;
    let output = token_count(obj.remove("output_toks"), "output_toks", 1)
        .map_err(|m| (field("output_toks"), m))?;
    let mut id_list = |name: &str| -> Result<Option<Vec<u32>>, (String, FieldProblem)> {
        match obj.remove(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => serde_json::from_value(v).map(Some).map_err(|e| {
                let message = crate::serde_messages::in_user_terms(&e.to_string());
                (field(name), FieldProblem::Syntax(message))
            }),
        }
    };
    let input_ids = id_list("input_tok_ids")?;
    let output_ids = id_list("output_tok_ids")?;
    let token_ids =
        token_ids(input_ids, output_ids, input, output).map_err(|(f, m)| (field(f), m))?;
    Ok(Request {
        id: 0,
        line: 0,
        model,
        arrival_ns: 0,
        input_toks: input,
        output_toks: output,
        token_ids,
        prompt_blocks: None,
    })
}
