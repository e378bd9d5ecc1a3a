//! What is wrong with a workload file: where (file, line, field) and what, as typed values that
//! render to the messages users see.

use super::ClassTargets;
use crate::config::Bound;
use std::path::PathBuf;

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
    #[error("{path}:{line}: {field}: {problem}")]
    Invalid {
        path: PathBuf,
        line: u64,
        field: String,
        /// What is wrong with the field (boxed: errors stay small on the `Ok` path).
        problem: Box<FieldProblem>,
    },
    /// The file holds no request.
    #[error("{path}: the workload holds no request")]
    Empty { path: PathBuf },
    /// A dataset read as the run goes differs from what its first reading found (it changed
    /// while the run read it), from line `line` on.
    #[error(
        "{path}:{line}: the dataset changed while the run read it (a large dataset is read \
         twice: first to count its requests, then as the run reaches them)"
    )]
    Changed { path: PathBuf, line: u64 },
}

impl WorkloadError {
    /// `problem` with `field` of line `line` of `path`.
    pub fn invalid(
        path: impl Into<PathBuf>,
        line: u64,
        field: impl Into<String>,
        problem: FieldProblem,
    ) -> Self {
        WorkloadError::Invalid {
            path: path.into(),
            line,
            field: field.into(),
            problem: Box::new(problem),
        }
    }
}

/// What is wrong with one field of a workload line. Each variant renders to the message after
/// the field's name.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FieldProblem {
    /// The parser's message (JSON or CSV), in the user's terms.
    #[error("{0}")]
    Syntax(String),
    /// Text that is not JSON at all.
    #[error("malformed JSON: {0}")]
    MalformedJson(String),
    /// A line that is JSON but not an object (`found`: what it is).
    #[error("expected a JSON object {{...}}, found {found}")]
    NotObject { found: &'static str },
    /// Bytes that are not UTF-8, from 1-based `column`.
    #[error("not UTF-8 text (invalid byte at column {column})")]
    NotUtf8 { column: usize },
    /// A line longer than a workload file's lines may be (a file with no line ends, say).
    #[error("a line longer than {limit} bytes, the most a workload file's line may take")]
    LineTooLong { limit: u64 },
    /// A required field is absent.
    #[error("missing required field")]
    Missing,
    /// A value of the wrong kind: `expected` says which, `got` what was there (as written).
    #[error("expected {expected}{}", got.as_ref().map(|g| format!(", got {g}")).unwrap_or_default())]
    WrongKind {
        expected: &'static str,
        got: Option<String>,
    },
    /// A number of the right kind (`what`) outside `bound`.
    #[error("expected {what} {bound}, got {value}")]
    NotWithin {
        what: &'static str,
        value: String,
        bound: Bound,
    },
    /// A number outside `bound`.
    #[error("must be {bound}, got {value}")]
    OutOfRange { value: String, bound: Bound },
    /// A negative integer where counts and times are not.
    #[error("must be non-negative, got {value}")]
    Negative { value: String },
    /// A number with a fraction where an integer is needed.
    #[error("must be an integer, got {value}")]
    NotInteger { value: String },
    /// An integer past what the field can hold.
    #[error("{value} is too large (at most {max})")]
    TooLarge { value: u64, max: u64 },
    /// A time past the simulated clock's range.
    #[error("{ns} ns is beyond any simulated time (limit 10^18 ns, about 31 years)")]
    BeyondTime { ns: u64 },
    /// A time in ms whose ns overflow the simulated clock.
    #[error("{ms} ms is beyond the simulated clock")]
    BeyondClock { ms: u64 },
    /// A token count past any context length (`name`: the field, when the message names it).
    #[error("{}{value} is beyond any context length (limit {limit})", name.map(|n| format!("{n} = ")).unwrap_or_default())]
    BeyondContext {
        name: Option<&'static str>,
        value: u64,
        limit: u64,
    },
    /// A list of token ids whose length is not the token count in `count_field`.
    #[error("has {ids} ids but {count_field} is {count}")]
    IdCount {
        ids: usize,
        count_field: &'static str,
        count: u32,
    },
    /// The field is given without `other`, which it needs.
    #[error("given without {other}")]
    GivenWithout { other: &'static str },
    /// A key the object does not have.
    #[error("unknown key `{key}`; known: {}", known.join(", "))]
    UnknownKey {
        key: String,
        known: &'static [&'static str],
    },
    /// Media tokens that add up to more than the prompt.
    #[error("image, audio and video tokens sum to {sum}, more than input_toks ({input})")]
    MediaExceedsPrompt { sum: u64, input: u32 },
    /// A session line read by the reader of flat requests.
    #[error(
        "session `{id}` is an agentic session; this reader takes flat requests only \
         (read_workload loads sessions)"
    )]
    SessionInFlatReader { id: String },
    /// A session id an earlier line already has.
    #[error("`{id}` is also the session of line {first_line}; session ids must be unique")]
    DuplicateSession { id: String, first_line: u64 },
    /// A dependency on a sub-request that is not earlier than sub-request `this`.
    #[error("{index} is not an earlier sub-request (this is sub-request {this})")]
    NotEarlier { index: u64, this: u32 },
    /// A dependency listed twice.
    #[error("{index} is listed twice")]
    ListedTwice { index: u64 },
    /// Token fields on a tool sub-request.
    #[error("a tool sub-request has no tokens")]
    ToolHasTokens,
    /// A goodput target for a class that already has other ones.
    #[error("SLO class `{class}` already has other goodput targets ({existing:?})")]
    OtherTargets {
        class: String,
        existing: ClassTargets,
    },
    /// A Mooncake line whose block ids do not cover its prompt.
    #[error(
        "has {ids} block ids but input_length {input} needs {blocks} at {block_size} tokens \
         per block (--trace-block-size)"
    )]
    BlockCount {
        ids: usize,
        input: u32,
        blocks: u32,
        block_size: u32,
    },
    /// A Mooncake block id too large for the token ids it stands for.
    #[error(
        "block id {id} does not fit the 32-bit token ids at {block_size} tokens per block \
         (largest {largest})"
    )]
    BlockIdTooLarge {
        id: u64,
        block_size: u32,
        largest: u64,
    },
    /// An Azure trace whose header lacks a column.
    #[error("missing column (the header must name TIMESTAMP, ContextTokens and GeneratedTokens)")]
    MissingColumn,
    /// An Azure row with too few fields.
    #[error("missing: the row has {fields} fields")]
    ShortRow { fields: usize },
    /// A timestamp of the right form that is no date and time.
    #[error("`{text}` is not a date and time (years 1970 to 2200)")]
    NotADate { text: String },
    /// A first line that is none of the dataset formats.
    #[error(
        "neither LLMServingSim or Mooncake JSONL nor an Azure trace's CSV header; name the \
         format with --dataset-format"
    )]
    UnknownFormat,
}

impl FieldProblem {
    /// A value of the wrong kind; `got` is what was there.
    pub fn wrong_kind(expected: &'static str, got: impl std::fmt::Display) -> Self {
        FieldProblem::WrongKind {
            expected,
            got: Some(got.to_string()),
        }
    }
}
