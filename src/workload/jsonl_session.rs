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
use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, de};
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;
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

/// A line's `sub_requests`, read with the line: a list of sub-requests, or `Wrong` (not a
/// list).
pub(super) enum SubRequests {
    List(Vec<SubEntry>),
    Wrong,
}

/// One entry of `sub_requests`: an object's fields, or `Wrong` (not an object).
pub(super) enum SubEntry {
    Object(Box<SubFields>),
    Wrong,
}

/// The fields of a sub-request, each `Some` when the key is there (`Some(Value::Null)` for a
/// null); unknown keys are ignored. Token ids are read straight into lists, not as values.
#[derive(Deserialize)]
pub(super) struct SubFields {
    #[serde(default, deserialize_with = "present")]
    tool_duration_ns: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    step: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    depends_on: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    loop_iteration: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    fan_out: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    think: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    tool: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    model: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    input_toks: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    output_toks: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    input_tok_ids: Option<IdList>,
    #[serde(default, deserialize_with = "present")]
    output_tok_ids: Option<IdList>,
}

/// A key that is there, whatever its value (null included).
pub(super) fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// A sub-request's token ids: null, a list of ids, or anything else (kept as a value, so that
/// its error reads as a list of ids read from a value does).
pub(super) enum IdList {
    Null,
    Ids(Vec<u32>),
    Other(Value),
}

impl IdList {
    /// The ids, or the problem of reading `self` as a list of them.
    fn into_ids(self) -> Result<Option<Vec<u32>>, FieldProblem> {
        match self {
            IdList::Null => Ok(None),
            IdList::Ids(ids) => Ok(Some(ids)),
            IdList::Other(v) => serde_json::from_value(v).map(Some).map_err(|e| {
                FieldProblem::Syntax(crate::serde_messages::in_user_terms(&e.to_string()))
            }),
        }
    }
}

/// A visitor's methods for booleans, numbers and strings: each gives `$e` of the value `$v`.
macro_rules! scalars {
    ($ty:ty, $v:ident => $e:expr) => {
        fn visit_bool<E: de::Error>(self, $v: bool) -> Result<$ty, E> {
            Ok($e)
        }
        fn visit_i64<E: de::Error>(self, $v: i64) -> Result<$ty, E> {
            Ok($e)
        }
        fn visit_u64<E: de::Error>(self, $v: u64) -> Result<$ty, E> {
            Ok($e)
        }
        fn visit_f64<E: de::Error>(self, $v: f64) -> Result<$ty, E> {
            Ok($e)
        }
        fn visit_str<E: de::Error>(self, $v: &str) -> Result<$ty, E> {
            Ok($e)
        }
    };
}

impl<'de> Deserialize<'de> for IdList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<IdList, D::Error> {
        struct Ids;
        impl<'de> Visitor<'de> for Ids {
            type Value = IdList;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of token ids")
            }
            fn visit_unit<E: de::Error>(self) -> Result<IdList, E> {
                Ok(IdList::Null)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<IdList, A::Error> {
                let mut ids = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(v) = seq.next_element::<Value>()? {
                    match v.as_u64().and_then(|n| u32::try_from(n).ok()) {
                        Some(id) => ids.push(id),
                        None => {
                            // Not an id: the whole list kept as values, for its error.
                            let mut all: Vec<Value> = ids.into_iter().map(Value::from).collect();
                            all.push(v);
                            while let Some(v) = seq.next_element::<Value>()? {
                                all.push(v);
                            }
                            return Ok(IdList::Other(Value::Array(all)));
                        }
                    }
                }
                Ok(IdList::Ids(ids))
            }
            scalars!(IdList, v => IdList::Other(Value::from(v)));
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<IdList, A::Error> {
                Value::deserialize(MapAccessDeserializer::new(map)).map(IdList::Other)
            }
        }
        d.deserialize_any(Ids)
    }
}

impl<'de> Deserialize<'de> for SubRequests {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SubRequests, D::Error> {
        struct List;
        impl<'de> Visitor<'de> for List {
            type Value = SubRequests;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of sub-requests")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SubRequests, A::Error> {
                let mut subs = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(sub) = seq.next_element::<SubEntry>()? {
                    subs.push(sub);
                }
                Ok(SubRequests::List(subs))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SubRequests, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(SubRequests::Wrong)
            }
            scalars!(SubRequests, _v => SubRequests::Wrong);
        }
        d.deserialize_any(List)
    }
}

impl<'de> Deserialize<'de> for SubEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SubEntry, D::Error> {
        struct Entry;
        impl<'de> Visitor<'de> for Entry {
            type Value = SubEntry;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a sub-request")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<SubEntry, A::Error> {
                let fields = SubFields::deserialize(MapAccessDeserializer::new(map))?;
                Ok(SubEntry::Object(Box::new(fields)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SubEntry, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(SubEntry::Wrong)
            }
            fn visit_unit<E: de::Error>(self) -> Result<SubEntry, E> {
                Ok(SubEntry::Wrong)
            }
            scalars!(SubEntry, _v => SubEntry::Wrong);
        }
        d.deserialize_any(Entry)
    }
}

/// The fields of a session line, as the line's parser read them (absent ones `None`).
pub(super) struct SessionFields {
    pub sub_requests: SubRequests,
    pub arrival_time_ns: Option<Value>,
    pub session_id: Option<Value>,
    pub model: Option<Value>,
    pub client: Option<Value>,
    pub deadline_ns: Option<Value>,
}

/// Parses a session line's fields; `None` when it has no sub-request.
pub(super) fn parse(
    fields: SessionFields,
    at: &At<'_>,
    ids: &mut SessionIds,
) -> Result<Option<(SessionHeader, PlanBuilder)>, WorkloadError> {
    let subs = match fields.sub_requests {
        SubRequests::List(subs) => subs,
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
    let arrival_ns = match fields.arrival_time_ns {
        None => return Err(at.invalid("arrival_time_ns", FieldProblem::Missing)),
        Some(v) => time_ns(&v).map_err(|m| at.invalid("arrival_time_ns", m))?,
    };
    let id = match fields.session_id {
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
    let model = model_field(fields.model).map_err(|m| at.invalid("model", m))?;
    let client = model_field(fields.client).map_err(|m| at.invalid("client", m))?;
    let deadline_ns = match fields.deadline_ns {
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
    entry: SubEntry,
    model: &Option<String>,
    at: &At<'_>,
) -> Result<Sub, WorkloadError> {
    let field = |name: &str| format!("sub_requests[{k}].{name}");
    let invalid = |name: &str, problem| at.invalid(field(name), problem);
    let SubEntry::Object(sub) = entry else {
        let problem = FieldProblem::WrongKind {
            expected: "an object",
            got: None,
        };
        return Err(at.invalid(format!("sub_requests[{k}]"), problem));
    };
    let mut sub = *sub;
    let duration_ns = match sub.tool_duration_ns.take() {
        None | Some(Value::Null) => 0,
        Some(v) => time_ns(&v).map_err(|m| invalid("tool_duration_ns", m))?,
    };
    let label = match sub.step.take() {
        None | Some(Value::Null) => k.to_string(),
        Some(Value::String(s)) => s,
        Some(other) => return Err(invalid("step", FieldProblem::wrong_kind("a string", other))),
    };
    let depends_on = depends_on(sub.depends_on.take(), k).map_err(|m| invalid("depends_on", m))?;
    let iteration =
        loop_iteration(sub.loop_iteration.take()).map_err(|m| invalid("loop_iteration", m))?;
    let fan_out = flag(sub.fan_out.take()).map_err(|m| invalid("fan_out", m))?;
    let think = flag(sub.think.take()).map_err(|m| invalid("think", m))?;
    let tokens = [
        ("input_toks", sub.input_toks.is_some()),
        ("output_toks", sub.output_toks.is_some()),
        ("input_tok_ids", sub.input_tok_ids.is_some()),
        ("output_tok_ids", sub.output_tok_ids.is_some()),
    ];
    let request = match sub.tool.take() {
        Some(tool) => {
            check_tool(tool, tokens).map_err(|(name, m)| invalid(name, m))?;
            None
        }
        None => {
            let request = llm_request(sub, model, &field);
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

/// A tool sub-request's `tool` is a name, and it has no tokens (`tokens`: the token keys
/// and whether each is there); the error names the field at fault.
fn check_tool(
    tool: Value,
    tokens: [(&'static str, bool); 4],
) -> Result<(), (&'static str, FieldProblem)> {
    if !tool.is_string() {
        return Err(("tool", FieldProblem::wrong_kind("a tool name", tool)));
    }
    match tokens.into_iter().find(|&(_, there)| there) {
        Some((key, _)) => Err((key, FieldProblem::ToolHasTokens)),
        None => Ok(()),
    }
}

/// The request of an LLM sub-request (its fields `sub`; id, line and arrival set later).
fn llm_request(
    sub: SubFields,
    model: &Option<String>,
    field: &dyn Fn(&str) -> String,
) -> Result<Request, (String, FieldProblem)> {
    let model = match model_field(sub.model).map_err(|m| (field("model"), m))? {
        Some(own) => Some(own),
        None => model.clone(),
    };
    let input =
        token_count(sub.input_toks, "input_toks", 1).map_err(|m| (field("input_toks"), m))?;
    let output =
        token_count(sub.output_toks, "output_toks", 1).map_err(|m| (field("output_toks"), m))?;
    let id_list = |ids: Option<IdList>, name: &str| {
        (ids.map_or(Ok(None), IdList::into_ids)).map_err(|m| (field(name), m))
    };
    let input_ids = id_list(sub.input_tok_ids, "input_tok_ids")?;
    let output_ids = id_list(sub.output_tok_ids, "output_tok_ids")?;
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
        known_hashes: None,
    })
}
