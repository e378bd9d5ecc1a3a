//! The LLMServingSim JSONL workload format: flat requests and agentic session lines.

use super::sessions::{PlanBuilder, SessionHeader, SessionSet};
use super::{
    ClassTargets, FieldProblem, Request, RequestClasses, RequestProfile, Workload, WorkloadError,
    jsonl_session,
};
use crate::Nanos;
use crate::config::Bound;
use serde::Deserialize;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// Largest prompt or output length accepted, tokens: far beyond any model's context, so a
/// bigger value is a corrupt file rather than a workload.
pub const MAX_TOKENS: u64 = 16 * 1024 * 1024;

/// Latest time or longest duration a workload may give, ns: 10^18 (about 31 years), so that
/// sums of times stay far below 2^64.
pub const MAX_TIME_NS: u64 = 1_000_000_000_000_000_000;

/// One flat-request line. Unknown keys are ignored so that files carrying extra metadata load
/// unchanged; the typed fields are checked strictly.
#[derive(Deserialize)]
struct Line {
    input_toks: Option<serde_json::Value>,
    output_toks: Option<serde_json::Value>,
    /// `Some(Value::Null)` for a null (a session's is then of the wrong kind).
    #[serde(default, deserialize_with = "jsonl_session::present")]
    arrival_time_ns: Option<serde_json::Value>,
    #[serde(default)]
    input_tok_ids: Option<Vec<u32>>,
    #[serde(default)]
    output_tok_ids: Option<Vec<u32>>,
    #[serde(default)]
    model: Option<serde_json::Value>,
    #[serde(default)]
    sub_requests: Option<jsonl_session::SubRequests>,
    #[serde(default)]
    tenant: Option<serde_json::Value>,
    #[serde(default)]
    slo_class: Option<serde_json::Value>,
    #[serde(default)]
    timeout_us: Option<serde_json::Value>,
    #[serde(default)]
    slo_target_us: Option<serde_json::Value>,
    #[serde(default)]
    rtt_ms: Option<serde_json::Value>,
    #[serde(default)]
    bandwidth_mbps: Option<serde_json::Value>,
    #[serde(default)]
    goodput_slo: Option<serde_json::Value>,
    #[serde(default)]
    image_tokens: Option<serde_json::Value>,
    #[serde(default)]
    audio_tokens: Option<serde_json::Value>,
    #[serde(default)]
    video_tokens: Option<serde_json::Value>,
    #[serde(default)]
    priority: Option<serde_json::Value>,
    #[serde(default)]
    slo_target_ns: Option<serde_json::Value>,
    /// A session line's own fields (read by [`jsonl_session::parse`]).
    #[serde(default)]
    session_id: Option<serde_json::Value>,
    #[serde(default)]
    client: Option<serde_json::Value>,
    #[serde(default)]
    deadline_ns: Option<serde_json::Value>,
}

impl Line {
    /// Its label fields, taken out.
    fn take_labels(&mut self) -> LabelFields {
        LabelFields {
            tenant: self.tenant.take(),
            slo_class: self.slo_class.take(),
            timeout_us: self.timeout_us.take(),
            slo_target_us: self.slo_target_us.take(),
            rtt_ms: self.rtt_ms.take(),
            bandwidth_mbps: self.bandwidth_mbps.take(),
            goodput_slo: self.goodput_slo.take(),
            priority: self.priority.take(),
            slo_target_ns: self.slo_target_ns.take(),
        }
    }
}

/// A line as [`parse_line`] read it: a flat request with its labels, or a session line's
/// fields and label fields (checked once the session is).
enum ParsedLine {
    Request(Request, Labels),
    Session(jsonl_session::SessionFields, LabelFields),
}

/// What a line says of its requests beyond their tokens (documented extensions; `generate`
/// writes them): tenant, SLO class, and the client's timeout, SLO target, network and class
/// goodput targets.
#[derive(Debug, Default)]
struct LabelFields {
    tenant: Option<serde_json::Value>,
    slo_class: Option<serde_json::Value>,
    timeout_us: Option<serde_json::Value>,
    slo_target_us: Option<serde_json::Value>,
    rtt_ms: Option<serde_json::Value>,
    bandwidth_mbps: Option<serde_json::Value>,
    goodput_slo: Option<serde_json::Value>,
    priority: Option<serde_json::Value>,
    slo_target_ns: Option<serde_json::Value>,
}

/// A line's labels, checked.
#[derive(Debug, Default)]
struct Labels {
    tenant: Option<String>,
    slo_class: Option<String>,
    profile: RequestProfile,
    goodput: Option<ClassTargets>,
}

impl Labels {
    fn of(
        fields: LabelFields,
        invalid: impl Fn(&str, FieldProblem) -> WorkloadError,
    ) -> Result<Labels, WorkloadError> {
        let micros = |field: &str, v| micros_field(v).map_err(|m| invalid(field, m));
        let ms = |field: &str, v, lo| ms_field(v, lo).map_err(|m| invalid(field, m));
        Ok(Labels {
            tenant: model_field(fields.tenant).map_err(|m| invalid("tenant", m))?,
            slo_class: model_field(fields.slo_class).map_err(|m| invalid("slo_class", m))?,
            profile: RequestProfile {
                timeout_us: micros("timeout_us", fields.timeout_us)?,
                slo_target_us: micros("slo_target_us", fields.slo_target_us)?.filter(|&t| t > 0),
                rtt_ms: ms("rtt_ms", fields.rtt_ms, 0.0)?,
                bandwidth_mbps: ms("bandwidth_mbps", fields.bandwidth_mbps, 1e-6)?,
                priority: fields
                    .priority
                    .filter(|v| !v.is_null())
                    .map(|v| priority_field(&v))
                    .transpose()
                    .map_err(|m| invalid("priority", m))?,
                deadline_ns: fields
                    .slo_target_ns
                    .filter(|v| !v.is_null())
                    .map(|v| time_ns(&v))
                    .transpose()
                    .map_err(|m| invalid("slo_target_ns", m))?,
            },
            goodput: goodput_field(fields.goodput_slo).map_err(|(f, m)| invalid(&f, m))?,
        })
    }

    /// Gives `count` ids from `first` these labels in `classes`; whether the line had any.
    /// Fails (the problem of the `goodput_slo` field) when the class already has other
    /// goodput targets.
    fn assign(
        &self,
        classes: &mut RequestClasses,
        first: u64,
        count: u32,
    ) -> Result<bool, FieldProblem> {
        let class = self.slo_class.as_deref().unwrap_or("default");
        classes.assign_profile(
            first,
            count,
            self.tenant.as_deref().unwrap_or("default"),
            class,
            &self.profile,
        );
        if let Some(t) = self.goodput {
            classes.set_targets(class, t)?;
        }
        Ok(self.tenant.is_some()
            || self.slo_class.is_some()
            || !self.profile.is_empty()
            || self.goodput.is_some())
    }
}

/// An optional duration in µs (`timeout_us`, `slo_target_us`): a whole number in
/// `[0, MAX_TIME_NS / 1000]`.
fn micros_field(value: Option<serde_json::Value>) -> Result<Option<u64>, FieldProblem> {
    match value {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(us) if us <= MAX_TIME_NS / 1000 => Ok(Some(us)),
            _ => Err(FieldProblem::NotWithin {
                what: "a whole number of µs",
                value: v.to_string(),
                bound: Bound::closed(0.0, (MAX_TIME_NS / 1000) as f64, ""),
            }),
        },
    }
}

/// An optional number in `[lo, 1e9]` (`rtt_ms`, `bandwidth_mbps`); 0 is read as none for a
/// positive `lo` (no bandwidth: no transfer time).
fn ms_field(value: Option<serde_json::Value>, lo: f64) -> Result<Option<f64>, FieldProblem> {
    let bound = Bound::closed(lo, 1e9, "");
    match value {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(0.0) if lo > 0.0 => Ok(None),
            Some(x) if bound.holds(x) => Ok(Some(x)),
            _ => Err(FieldProblem::NotWithin {
                what: "a number",
                value: v.to_string(),
                bound,
            }),
        },
    }
}

/// The optional `goodput_slo` object: `ttft_ms`, `itl_ms`, `e2e_ms`, each a positive number.
/// The error names the field (`goodput_slo`, or one of its keys).
fn goodput_field(
    value: Option<serde_json::Value>,
) -> Result<Option<ClassTargets>, (String, FieldProblem)> {
    const FIELD: &str = "goodput_slo";
    const KEYS: &[&str] = &["ttft_ms", "itl_ms", "e2e_ms"];
    let map = match value {
        None | Some(serde_json::Value::Null) => return Ok(None),
        Some(serde_json::Value::Object(map)) => map,
        Some(other) => return Err((FIELD.into(), FieldProblem::wrong_kind("an object", other))),
    };
    let mut t = ClassTargets::default();
    for (key, v) in map {
        let x = v
            .as_f64()
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or_else(|| {
                let problem = FieldProblem::wrong_kind("a positive number of ms", &v);
                (format!("{FIELD}.{key}"), problem)
            })?;
        match key.as_str() {
            "ttft_ms" => t.ttft_ms = Some(x),
            "itl_ms" => t.itl_ms = Some(x),
            "e2e_ms" => t.e2e_ms = Some(x),
            _ => {
                let problem = FieldProblem::UnknownKey { key, known: KEYS };
                return Err((FIELD.into(), problem));
            }
        }
    }
    Ok(Some(t))
}

/// The image, audio and video tokens of a multimodal request: whole numbers whose sum is at
/// most the prompt's length (they are counted in `input_toks`; only checked, not kept).
fn check_media(
    fields: [(&str, Option<serde_json::Value>); 3],
    input: u32,
) -> Result<(), (String, FieldProblem)> {
    let mut sum = 0u64;
    for (name, v) in fields {
        match v {
            None | Some(serde_json::Value::Null) => {}
            Some(v) => match v.as_u64() {
                Some(n) => sum += n,
                None => return Err((name.into(), FieldProblem::wrong_kind("a token count", v))),
            },
        }
    }
    if sum > u64::from(input) {
        let problem = FieldProblem::MediaExceedsPrompt { sum, input };
        return Err(("image_tokens".into(), problem));
    }
    Ok(())
}

/// Reads the first `limit` requests (all when `None`) of a JSONL workload of flat requests,
/// streaming the file line by line. Blank lines are skipped and do not count. The result is
/// sorted by arrival. A session line is an error: read such files with [`read_workload`].
pub fn read_jsonl(path: &Path, limit: Option<usize>) -> Result<Vec<Request>, WorkloadError> {
    let workload = read_workload(path, limit)?;
    if let Some(s) = workload.sessions.sessions().first() {
        let problem = FieldProblem::SessionInFlatReader { id: s.id.clone() };
        return Err(WorkloadError::invalid(
            path,
            s.line,
            "sub_requests",
            problem,
        ));
    }
    Ok(workload.requests)
}

/// Reads the first `limit` entries (all when `None`) of a JSONL workload: flat requests and
/// agentic session lines (a line with `sub_requests`; see docs/src/inputs.md). Entries get
/// ids in file order: a flat request one, a session one per LLM sub-request, consecutively.
/// Blank lines and sessions with no sub-request are skipped and do not count. The flat
/// requests come sorted by arrival (stable).
pub fn read_workload(path: &Path, limit: Option<usize>) -> Result<Workload, WorkloadError> {
    let mut rows = JsonlRows::open(path, true)?;
    let mut requests = Vec::new();
    let mut sessions = SessionSet::new();
    let mut entries = 0usize;
    while limit.is_none_or(|n| entries < n) {
        match rows.next_line()? {
            Some(JsonlLine::Request(request)) => requests.push(request),
            Some(JsonlLine::Session(s)) => sessions.add(s.header, s.plan),
            None => break,
        }
        entries += 1;
    }
    if requests.is_empty() && sessions.is_empty() {
        return Err(WorkloadError::Empty {
            path: path.to_owned(),
        });
    }
    requests.sort_by_key(|r| r.arrival_ns);
    Ok(Workload {
        requests,
        sessions,
        classes: rows.classes(),
    })
}

/// An LLMServingSim JSONL file read an entry at a time, in file order: its flat requests and
/// sessions, with the ids [`read_workload`] gives them, their labels put into classes when
/// asked.
pub(super) struct JsonlRows {
    path: PathBuf,
    reader: BufReader<File>,
    raw: Vec<u8>,
    line_no: u64,
    next_id: u64,
    session_ids: jsonl_session::SessionIds,
    /// The requests' labels, when kept.
    classes: Option<RequestClasses>,
    labelled: bool,
}

/// An entry of a JSONL file read by [`JsonlRows`].
pub(super) enum JsonlLine {
    Request(Request),
    Session(SessionLine),
}

/// A session line: the session's start and its plan (its requests numbered from its first
/// id when it is added or started).
#[derive(Debug)]
pub struct SessionLine {
    pub(super) header: SessionHeader,
    pub(super) plan: PlanBuilder,
}

impl SessionLine {
    /// The session's start.
    pub fn arrival_ns(&self) -> Nanos {
        self.header.arrival_ns
    }

    /// The id of its first request.
    pub fn first_id(&self) -> u64 {
        self.header.first_id
    }

    /// How many requests it has.
    pub fn num_requests(&self) -> u64 {
        self.plan.num_requests()
    }

    /// About what holding it takes: its requests and plan nodes.
    pub fn held_bytes(&self) -> usize {
        self.plan.held_bytes()
    }

    /// The file line it came from.
    pub fn line(&self) -> u64 {
        self.header.line
    }

    /// Its start moved through `f`.
    pub fn retime(&mut self, f: impl FnOnce(Nanos) -> Nanos) {
        self.header.arrival_ns = f(self.header.arrival_ns);
    }

    /// Its start and plan, to start or add it.
    pub fn into_parts(self) -> (SessionHeader, PlanBuilder) {
        (self.header, self.plan)
    }
}

impl JsonlRows {
    /// Reads `path`, keeping the requests' labels when `labels`.
    pub(super) fn open(path: &Path, labels: bool) -> Result<JsonlRows, WorkloadError> {
        let file = File::open(path).map_err(|source| WorkloadError::Io {
            path: path.to_owned(),
            source,
        })?;
        Ok(JsonlRows {
            path: path.to_owned(),
            reader: BufReader::new(file),
            raw: Vec::new(),
            line_no: 0,
            next_id: 0,
            session_ids: jsonl_session::SessionIds::default(),
            classes: labels.then(RequestClasses::default),
            labelled: false,
        })
    }

    /// The next entry (blank lines and sessions without a sub-request skipped), or `None` at
    /// the end of the file.
    pub(super) fn next_line(&mut self) -> Result<Option<JsonlLine>, WorkloadError> {
        loop {
            self.line_no += 1;
            let (path, line) = (&self.path, self.line_no);
            let Some(text) = next_line(&mut self.reader, &mut self.raw, path, line)? else {
                return Ok(None);
            };
            if text.trim().is_empty() {
                continue;
            }
            let id = self.next_id;
            let (entry, labels, count) = match parse_line(text, path, line, id)? {
                ParsedLine::Request(request, labels) => (JsonlLine::Request(request), labels, 1),
                ParsedLine::Session(fields, label_fields) => {
                    let at = jsonl_session::At {
                        path,
                        line,
                        first_id: id,
                    };
                    let Some((header, plan)) =
                        jsonl_session::parse(fields, &at, &mut self.session_ids)?
                    else {
                        continue;
                    };
                    let invalid =
                        |field: &str, problem| WorkloadError::invalid(path, line, field, problem);
                    let labels = Labels::of(label_fields, invalid)?;
                    let count = plan.num_requests();
                    (
                        JsonlLine::Session(SessionLine { header, plan }),
                        labels,
                        count,
                    )
                }
            };
            if let Some(classes) = &mut self.classes {
                let n = u32::try_from(count).unwrap_or(u32::MAX);
                self.labelled |= (labels.assign(classes, id, n))
                    .map_err(|m| WorkloadError::invalid(path, line, "goodput_slo", m))?;
            }
            self.next_id += count;
            return Ok(Some(entry));
        }
    }

    /// The labels of the requests read, when kept and any line had one.
    pub(super) fn classes(self) -> Option<RequestClasses> {
        self.classes.filter(|_| self.labelled)
    }
}

/// Reads line `line_no` into `raw` and returns it as text (without a UTF-8 byte-order mark on
/// line 1), or `None` at the end of the file. Bytes that are not UTF-8 are refused naming the
/// line.
fn next_line<'a>(
    reader: &mut impl BufRead,
    raw: &'a mut Vec<u8>,
    path: &Path,
    line_no: u64,
) -> Result<Option<&'a str>, WorkloadError> {
    raw.clear();
    let read = super::lines::read_bounded_line(reader, raw, path, line_no)?;
    if read == 0 {
        return Ok(None);
    }
    let text = std::str::from_utf8(raw).map_err(|e| {
        let problem = FieldProblem::NotUtf8 {
            column: e.valid_up_to() + 1,
        };
        WorkloadError::invalid(path, line_no, "(text)", problem)
    })?;
    let text = match line_no {
        1 => text.strip_prefix('\u{feff}').unwrap_or(text),
        _ => text,
    };
    Ok(Some(text))
}

/// Parses line `line` of `path`: a flat request with id `id` and its labels, or a session
/// line's fields.
fn parse_line(text: &str, path: &Path, line: u64, id: u64) -> Result<ParsedLine, WorkloadError> {
    let invalid = |field: &str, problem| WorkloadError::invalid(path, line, field, problem);
    let mut parsed: Line = super::lines::parse_object(text, path, line)?;
    if let Some(sub_requests) = parsed.sub_requests.take() {
        let labels = parsed.take_labels();
        let fields = jsonl_session::SessionFields {
            sub_requests,
            arrival_time_ns: parsed.arrival_time_ns,
            session_id: parsed.session_id,
            model: parsed.model,
            client: parsed.client,
            deadline_ns: parsed.deadline_ns,
        };
        return Ok(ParsedLine::Session(fields, labels));
    }
    let label_fields = parsed.take_labels();
    let input =
        token_count(parsed.input_toks, "input_toks", 1).map_err(|m| invalid("input_toks", m))?;
    let output =
        token_count(parsed.output_toks, "output_toks", 1).map_err(|m| invalid("output_toks", m))?;
    let arrival = match parsed.arrival_time_ns {
        None | Some(serde_json::Value::Null) => {
            return Err(invalid("arrival_time_ns", FieldProblem::Missing));
        }
        Some(v) => time_ns(&v).map_err(|m| invalid("arrival_time_ns", m))?,
    };
    let model = model_field(parsed.model).map_err(|m| invalid("model", m))?;
    let token_ids = token_ids(parsed.input_tok_ids, parsed.output_tok_ids, input, output)
        .map_err(|(field, m)| invalid(field, m))?;
    check_media(
        [
            ("image_tokens", parsed.image_tokens),
            ("audio_tokens", parsed.audio_tokens),
            ("video_tokens", parsed.video_tokens),
        ],
        input,
    )
    .map_err(|(field, m)| invalid(&field, m))?;
    let labels = Labels::of(label_fields, invalid)?;
    let request = Request {
        id,
        line,
        model,
        arrival_ns: arrival,
        input_toks: input,
        output_toks: output,
        token_ids,
        prompt_blocks: None,
        known_hashes: None,
    };
    Ok(ParsedLine::Request(request, labels))
}

/// The optional `model` field.
pub(super) fn model_field(
    value: Option<serde_json::Value>,
) -> Result<Option<String>, FieldProblem> {
    match value {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(FieldProblem::wrong_kind("a string", other)),
    }
}

/// Prompt ids followed by output ids, checked against the token counts; the error names the
/// field.
pub(super) fn token_ids(
    input_ids: Option<Vec<u32>>,
    output_ids: Option<Vec<u32>>,
    input: u32,
    output: u32,
) -> Result<Vec<u32>, (&'static str, FieldProblem)> {
    let mut token_ids = Vec::new();
    if let Some(ids) = input_ids {
        if ids.len() as u64 != u64::from(input) {
            let problem = FieldProblem::IdCount {
                ids: ids.len(),
                count_field: "input_toks",
                count: input,
            };
            return Err(("input_tok_ids", problem));
        }
        token_ids.reserve(ids.len() + output_ids.as_ref().map_or(0, Vec::len));
        token_ids.extend_from_slice(&ids);
        if let Some(out_ids) = output_ids {
            if out_ids.len() as u64 != u64::from(output) {
                let problem = FieldProblem::IdCount {
                    ids: out_ids.len(),
                    count_field: "output_toks",
                    count: output,
                };
                return Err(("output_tok_ids", problem));
            }
            token_ids.extend_from_slice(&out_ids);
        }
    } else if output_ids.is_some() {
        let problem = FieldProblem::GivenWithout {
            other: "input_tok_ids",
        };
        return Err(("output_tok_ids", problem));
    }
    Ok(token_ids)
}

/// A priority: an integer that fits 32 bits (higher is more urgent).
fn priority_field(value: &serde_json::Value) -> Result<i32, FieldProblem> {
    value
        .as_i64()
        .and_then(|v| i32::try_from(v).ok())
        .ok_or_else(|| FieldProblem::wrong_kind("an integer between -2^31 and 2^31-1", value))
}

/// A non-negative integer.
pub(super) fn non_negative_int(value: &serde_json::Value) -> Result<u64, FieldProblem> {
    match value {
        serde_json::Value::Number(n) => {
            if let Some(v) = n.as_u64() {
                Ok(v)
            } else if n.as_i64().is_some() {
                Err(FieldProblem::Negative {
                    value: n.to_string(),
                })
            } else {
                Err(FieldProblem::NotInteger {
                    value: n.to_string(),
                })
            }
        }
        other => Err(FieldProblem::wrong_kind("an integer", other)),
    }
}

/// A time or duration in `[0, MAX_TIME_NS]`, ns.
pub(super) fn time_ns(value: &serde_json::Value) -> Result<u64, FieldProblem> {
    let v = non_negative_int(value)?;
    if v > MAX_TIME_NS {
        return Err(FieldProblem::BeyondTime { ns: v });
    }
    Ok(v)
}

/// A token count in `[min, MAX_TOKENS]`; `name` labels the error.
pub(super) fn token_count(
    value: Option<serde_json::Value>,
    name: &'static str,
    min: u64,
) -> Result<u32, FieldProblem> {
    let value = value.ok_or(FieldProblem::Missing)?;
    let n = non_negative_int(&value)?;
    if n < min {
        return Err(FieldProblem::OutOfRange {
            value: n.to_string(),
            bound: Bound::AtLeast(min),
        });
    }
    if n > MAX_TOKENS {
        return Err(FieldProblem::BeyondContext {
            name: Some(name),
            value: n,
            limit: MAX_TOKENS,
        });
    }
    Ok(n as u32)
}
