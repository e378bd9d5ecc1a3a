//! The LLMServingSim JSONL workload format: flat requests and agentic session lines.

use super::sessions::SessionSet;
use super::{Request, RequestClasses, RequestExtras, Workload, jsonl_session};
use serde::Deserialize;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// Largest prompt or output length accepted, tokens: far beyond any model's context, so a
/// bigger value is a corrupt file rather than a workload.
pub(crate) const MAX_TOKENS: u64 = 16 * 1024 * 1024;

/// Latest time or longest duration a workload may give, ns: 10^18 (about 31 years), so that
/// sums of times stay far below 2^64.
pub const MAX_TIME_NS: u64 = 1_000_000_000_000_000_000;

/// A workload file that cannot be used. Names the file, the 1-based line and the field.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The file could not be opened or read.
    #[error("cannot read workload {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A line is not a valid request.
    #[error("{path}:{line}: {field}: {message}")]
    Invalid {
        path: PathBuf,
        line: u64,
        field: String,
        message: String,
    },
    /// The file holds no request.
    #[error("{path}: the workload holds no request")]
    Empty { path: PathBuf },
}

/// One flat-request line. Unknown keys are ignored so that files carrying extra metadata load
/// unchanged; the typed fields are checked strictly.
#[derive(Deserialize)]
struct Line {
    input_toks: Option<serde_json::Value>,
    output_toks: Option<serde_json::Value>,
    arrival_time_ns: Option<serde_json::Value>,
    #[serde(default)]
    input_tok_ids: Option<Vec<u32>>,
    #[serde(default)]
    output_tok_ids: Option<Vec<u32>>,
    #[serde(default)]
    model: Option<serde_json::Value>,
    #[serde(default)]
    sub_requests: Option<serde_json::Value>,
    #[serde(default)]
    tenant: Option<serde_json::Value>,
    #[serde(default)]
    slo_class: Option<serde_json::Value>,
    #[serde(default)]
    priority: Option<serde_json::Value>,
    #[serde(default)]
    slo_target_ns: Option<serde_json::Value>,
}

/// The tenant and SLO class a line names (documented extensions; `generate` writes them).
#[derive(Debug, Default, serde::Deserialize)]
struct LabelFields {
    #[serde(default)]
    tenant: Option<serde_json::Value>,
    #[serde(default)]
    slo_class: Option<serde_json::Value>,
    #[serde(default)]
    priority: Option<serde_json::Value>,
    #[serde(default)]
    slo_target_ns: Option<serde_json::Value>,
}

/// A line's tenant, SLO class, priority and SLO target, checked.
#[derive(Debug, Default)]
struct Labels {
    tenant: Option<String>,
    slo_class: Option<String>,
    extras: RequestExtras,
}

impl Labels {
    fn of(
        fields: LabelFields,
        invalid: impl Fn(&str, String) -> WorkloadError,
    ) -> Result<Labels, WorkloadError> {
        Ok(Labels {
            tenant: model_field(fields.tenant).map_err(|m| invalid("tenant", m))?,
            slo_class: model_field(fields.slo_class).map_err(|m| invalid("slo_class", m))?,
            extras: RequestExtras {
                priority: fields
                    .priority
                    .filter(|v| !v.is_null())
                    .map(|v| priority_field(&v))
                    .transpose()
                    .map_err(|m| invalid("priority", m))?,
                slo_target_ns: fields
                    .slo_target_ns
                    .filter(|v| !v.is_null())
                    .map(|v| time_ns(&v))
                    .transpose()
                    .map_err(|m| invalid("slo_target_ns", m))?,
            },
        })
    }

    /// Gives `count` ids from `first` these labels in `classes`; whether the line had any.
    fn assign(&self, classes: &mut RequestClasses, first: u64, count: u32) -> bool {
        classes.assign_with(
            first,
            count,
            self.tenant.as_deref().unwrap_or("default"),
            self.slo_class.as_deref().unwrap_or("default"),
            self.extras,
        );
        self.tenant.is_some() || self.slo_class.is_some() || self.extras != RequestExtras::default()
    }
}

/// Reads the first `limit` requests (all when `None`) of a JSONL workload of flat requests,
/// streaming the file line by line. Blank lines are skipped and do not count. The result is
/// sorted by arrival. A session line is an error: read such files with [`read_workload`].
pub fn read_jsonl(path: &Path, limit: Option<usize>) -> Result<Vec<Request>, WorkloadError> {
    let workload = read_workload(path, limit)?;
    if let Some(s) = workload.sessions.sessions().first() {
        return Err(WorkloadError::Invalid {
            path: path.to_owned(),
            line: s.line,
            field: "sub_requests".into(),
            message: format!(
                "session `{}` is an agentic session; this reader takes flat requests only \
                 (read_workload loads sessions)",
                s.id
            ),
        });
    }
    Ok(workload.requests)
}

/// Reads the first `limit` entries (all when `None`) of a JSONL workload: flat requests and
/// agentic session lines (a line with `sub_requests`; see docs/src/inputs.md). Entries get
/// ids in file order: a flat request one, a session one per LLM sub-request, consecutively.
/// Blank lines and sessions with no sub-request are skipped and do not count. The flat
/// requests come sorted by arrival (stable).
pub fn read_workload(path: &Path, limit: Option<usize>) -> Result<Workload, WorkloadError> {
    let file = File::open(path).map_err(|source| WorkloadError::Io {
        path: path.to_owned(),
        source,
    })?;
    let mut reader = BufReader::new(file);
    let mut requests = Vec::new();
    let mut sessions = SessionSet::new();
    let mut session_ids = jsonl_session::SessionIds::default();
    let mut next_id = 0u64;
    let mut classes = RequestClasses::default();
    let mut labelled = false;
    let mut entries = 0usize;
    let mut raw = Vec::new();
    let mut line_no = 0u64;
    while limit.is_none_or(|n| entries < n) {
        line_no += 1;
        let Some(buf) = next_line(&mut reader, &mut raw, path, line_no)? else {
            break;
        };
        if buf.trim().is_empty() {
            continue;
        }
        match parse_line(buf, path, line_no, next_id)? {
            Some((request, labels)) => {
                labelled |= labels.assign(&mut classes, next_id, 1);
                requests.push(request);
            }
            None => {
                let at = jsonl_session::At {
                    path,
                    line: line_no,
                    first_id: next_id,
                };
                match jsonl_session::parse(buf, &at, &mut session_ids)? {
                    Some((header, plan)) => {
                        let labels = session_labels(buf, path, line_no)?;
                        let count = u32::try_from(plan.num_requests()).unwrap_or(u32::MAX);
                        labelled |= labels.assign(&mut classes, next_id, count);
                        next_id += plan.num_requests();
                        sessions.add(header, plan);
                    }
                    None => continue,
                }
                entries += 1;
                continue;
            }
        }
        next_id += 1;
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
        classes: labelled.then_some(classes),
    })
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
    let read = reader
        .read_until(b'\n', raw)
        .map_err(|source| WorkloadError::Io {
            path: path.to_owned(),
            source,
        })?;
    if read == 0 {
        return Ok(None);
    }
    let text = std::str::from_utf8(raw).map_err(|e| WorkloadError::Invalid {
        path: path.to_owned(),
        line: line_no,
        field: "(text)".into(),
        message: format!(
            "not UTF-8 text (invalid byte at column {})",
            e.valid_up_to() + 1
        ),
    })?;
    let text = match line_no {
        1 => text.strip_prefix('\u{feff}').unwrap_or(text),
        _ => text,
    };
    Ok(Some(text))
}

/// The tenant and SLO class of a session line (they apply to all its sub-requests).
fn session_labels(text: &str, path: &Path, line: u64) -> Result<Labels, WorkloadError> {
    let invalid = |field: &str, message: String| WorkloadError::Invalid {
        path: path.to_owned(),
        line,
        field: field.to_owned(),
        message,
    };
    let fields: LabelFields = serde_json::from_str(text).unwrap_or_default();
    Labels::of(fields, invalid)
}

/// Parses a flat-request line with id `id` and its labels; `None` for a session line.
fn parse_line(
    text: &str,
    path: &Path,
    line: u64,
    id: u64,
) -> Result<Option<(Request, Labels)>, WorkloadError> {
    let invalid = |field: &str, message: String| WorkloadError::Invalid {
        path: path.to_owned(),
        line,
        field: field.to_owned(),
        message,
    };
    let parsed: Line = super::lines::parse_object(text, path, line)?;
    if parsed.sub_requests.is_some() {
        return Ok(None);
    }
    let input =
        token_count(parsed.input_toks, "input_toks", 1).map_err(|m| invalid("input_toks", m))?;
    let output =
        token_count(parsed.output_toks, "output_toks", 1).map_err(|m| invalid("output_toks", m))?;
    let arrival = match parsed.arrival_time_ns {
        None => {
            return Err(invalid(
                "arrival_time_ns",
                "missing required field".to_owned(),
            ));
        }
        Some(v) => time_ns(&v).map_err(|m| invalid("arrival_time_ns", m))?,
    };
    let model = model_field(parsed.model).map_err(|m| invalid("model", m))?;
    let token_ids = token_ids(parsed.input_tok_ids, parsed.output_tok_ids, input, output)
        .map_err(|(field, m)| invalid(field, m))?;
    let labels = Labels::of(
        LabelFields {
            tenant: parsed.tenant,
            slo_class: parsed.slo_class,
            priority: parsed.priority,
            slo_target_ns: parsed.slo_target_ns,
        },
        invalid,
    )?;
    let request = Request {
        id,
        line,
        model,
        arrival_ns: arrival,
        input_toks: input,
        output_toks: output,
        token_ids,
        prompt_blocks: None,
    };
    Ok(Some((request, labels)))
}

/// The optional `model` field.
pub(super) fn model_field(value: Option<serde_json::Value>) -> Result<Option<String>, String> {
    match value {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!("expected a string, got {other}")),
    }
}

/// Prompt ids followed by output ids, checked against the token counts; the error names the
/// field.
pub(super) fn token_ids(
    input_ids: Option<Vec<u32>>,
    output_ids: Option<Vec<u32>>,
    input: u32,
    output: u32,
) -> Result<Vec<u32>, (&'static str, String)> {
    let mut token_ids = Vec::new();
    if let Some(ids) = input_ids {
        if ids.len() as u64 != u64::from(input) {
            return Err((
                "input_tok_ids",
                format!("has {} ids but input_toks is {input}", ids.len()),
            ));
        }
        token_ids.reserve(ids.len() + output_ids.as_ref().map_or(0, Vec::len));
        token_ids.extend_from_slice(&ids);
        if let Some(out_ids) = output_ids {
            if out_ids.len() as u64 != u64::from(output) {
                return Err((
                    "output_tok_ids",
                    format!("has {} ids but output_toks is {output}", out_ids.len()),
                ));
            }
            token_ids.extend_from_slice(&out_ids);
        }
    } else if output_ids.is_some() {
        return Err(("output_tok_ids", "given without input_tok_ids".to_owned()));
    }
    Ok(token_ids)
}

/// A priority: an integer that fits 32 bits (higher is more urgent).
fn priority_field(value: &serde_json::Value) -> Result<i32, String> {
    value
        .as_i64()
        .and_then(|v| i32::try_from(v).ok())
        .ok_or_else(|| format!("expected an integer between -2^31 and 2^31-1, got {value}"))
}

/// A non-negative integer.
pub(super) fn non_negative_int(value: &serde_json::Value) -> Result<u64, String> {
    match value {
        serde_json::Value::Number(n) => {
            if let Some(v) = n.as_u64() {
                Ok(v)
            } else if n.as_i64().is_some() {
                Err(format!("must be non-negative, got {n}"))
            } else {
                Err(format!("must be an integer, got {n}"))
            }
        }
        other => Err(format!("expected an integer, got {other}")),
    }
}

/// A time or duration in `[0, MAX_TIME_NS]`, ns.
pub(super) fn time_ns(value: &serde_json::Value) -> Result<u64, String> {
    let v = non_negative_int(value)?;
    if v > MAX_TIME_NS {
        return Err(format!(
            "{v} ns is beyond any simulated time (limit 10^18 ns, about 31 years)"
        ));
    }
    Ok(v)
}

/// A token count in `[min, MAX_TOKENS]`; `name` labels the error.
pub(super) fn token_count(
    value: Option<serde_json::Value>,
    name: &str,
    min: u64,
) -> Result<u32, String> {
    let value = value.ok_or_else(|| "missing required field".to_owned())?;
    let n = non_negative_int(&value)?;
    if n < min {
        return Err(format!("must be at least {min}, got {n}"));
    }
    if n > MAX_TOKENS {
        return Err(format!(
            "{name} = {n} is beyond any context length (limit {MAX_TOKENS})"
        ));
    }
    Ok(n as u32)
}
