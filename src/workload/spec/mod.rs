//! Synthetic workloads from a WorkloadSpec v2 YAML file (BLIS's format, a compatible subset
//! plus a few extensions).
//!
//! A spec names an aggregate arrival rate and a list of clients; each client takes a share of
//! the rate (`rate_fraction`, normalised over all clients), an arrival process
//! ([`ArrivalProcess`]) and what each arrival brings ([`Traffic`]): a request (prompt and output
//! length distributions, [`LengthDist`], and optionally a shared prompt prefix,
//! `prefix_group`), a conversation ([`Conversation`]: follow-up turns after a think time) or a
//! session of an agentic workflow ([`AgenticSpec`]: LLM and tool-call steps with dependencies,
//! fan-out and a loop). [`WorkloadSpec::load`] parses and validates a file strictly: unknown
//! fields, malformed YAML and invalid parameters are errors naming the file, the line and column
//! and the field path. [`Generator`] then draws the arrivals, merged over clients in arrival
//! order, and the plan of each session; [`write_jsonl`] writes them in LLMServingSim's JSONL
//! format and [`generate_workload`] hands them to the engine directly, or [`SessionStream`]
//! one at a time, as the run reaches them, sessions planned when they start and let go when
//! they end ([`stream_workload`] surveys the workload first).
//!
//! Determinism: every client draws from its own ChaCha8 streams (one each for arrivals, prompt
//! lengths, output lengths, streaming and token ids) seeded from the spec's seed and the
//! client's id, and every session from its own (seeded also by its position among the
//! client's arrivals), so the same spec gives the same requests on every platform, and adding,
//! removing or reordering other clients leaves a client's draws unchanged.
//!
//! Closed-loop clients (`concurrency`, `think_time_us`) become one session per user, a chain
//! of requests each arriving one think time after the previous one completes; cohorts expand
//! into one client per member with BLIS's lifecycle windows; a client with windows sends
//! nothing outside them. Multimodal prompts, timeouts, SLO targets and network delays ride on
//! the requests ([`crate::workload::RequestProfile`]).
//!
//! Lifecycle windows may override the client's rate (`trace_rate`, absolute with
//! `aggregate_rate: 0`), arrival process and lengths; such specs are generated window by
//! window as BLIS does ([`WindowParams`]). Session clients get BLIS's default 300 s timeout.
//!
//! An `inference_perf` block (inference-perf's stages and shared-prefix data set) expands into
//! clients as BLIS expands it; a `servegen_data` block reads a ServeGen data directory as one
//! client per chunk, with one window per trace row, or, with `window_duration_secs` /
//! `drain_timeout_secs`, as BLIS's three periods of five SLO-class cohorts.
//!
//! Not supported yet, and refused with a message naming the field: LoRA adapters and BLIS's
//! multi-period conversion of ServeGen's reasoning and multimodal data.

pub mod agentic;
mod agentic_error;
mod ahead;
pub mod arrival;
mod client_error;
mod closed_loop;
mod cohort;
mod conversation;
mod dist;
mod extras;
mod generate;
mod inference_perf;
mod jsonl_out;
mod limits;
pub mod priority;
mod rule_error;
mod scenarios;
pub mod schema;
pub mod servegen;
mod servegen_error;
pub mod servegen_periods;
mod session_gen;
mod session_out;
mod session_stream;
mod synthetic;
mod traffic;
mod window;
mod workflow;

pub use agentic::{Action, AgenticSpec, LoopSpec, StepSpec, ToolSpec};
pub use agentic_error::{AgenticError, StepProblem};
pub use ahead::DrawnAhead;
pub use arrival::{ArrivalError, ArrivalProcess};
pub use client_error::{ClientError, ClientProblem, PatternError};
pub use cohort::CohortSpec;
pub use conversation::{Conversation, ConversationError};
pub use dist::{CountDist, DistError, DurationDist, LengthDist, ParamProblem};
pub use extras::{ClosedLoop, ExtrasError, Lifecycle, ModalTokens, Multimodal};
pub use generate::{
    GeneratedRequest, Generator, Overrides, StreamPlan, TOKEN_ID_SPACE, generate_requests,
    generate_workload, nothing_generated, stream_workload, stream_workload_untimed,
};
pub use inference_perf::InferencePerfProblem;
pub use jsonl_out::write_jsonl;
pub use limits::{DEFAULT_MAX_REQUESTS, LimitError, MAX_SESSION_TOKEN_IDS, PlanProblem};
pub use priority::{PriorityDist, PriorityError};
pub use rule_error::RuleProblem;
pub use scenarios::{SCENARIOS, Scenario, scenario};
pub use schema::{Category, ClientSpec, DEFAULT_SESSION_TIMEOUT_US, SloClass, WorkloadSpec};
pub use servegen_error::{EntryProblem, PdfError, RowProblem, ServeGenError};
pub use session_stream::{Retime, SessionStream};
pub use synthetic::Synthetic;
pub use traffic::Traffic;
pub use window::{WindowError, WindowParams};

use serde::de::{Deserialize, Deserializer, Error as _, MapAccess, Visitor};
use std::fmt;
use std::marker::PhantomData;
use std::path::PathBuf;

/// A workload spec that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The file could not be read.
    #[error("cannot read workload spec {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Malformed YAML, an unknown field or an invalid value, with its place in the file.
    #[error("{source_name}{location}: {path}: {message}")]
    Parse {
        source_name: String,
        location: Location,
        path: String,
        message: String,
    },
    /// A `servegen_data` block, or the ServeGen directory it names, that cannot be read.
    #[error("{source_name}: servegen_data.{}: {source}", source.field())]
    ServeGen {
        source_name: String,
        #[source]
        source: Box<ServeGenError>,
    },
    /// A top-level field that cannot be used.
    #[error("{source_name}: {field}: {problem}")]
    Top {
        source_name: String,
        field: &'static str,
        problem: TopProblem,
    },
    /// A rule spanning several fields broken, at `path`.
    #[error("{source_name}: {path}: {problem}")]
    Rule {
        source_name: String,
        path: String,
        problem: RuleProblem,
    },
    /// A spec that parses but cannot be generated: nothing ends it, it plans past a limit, or
    /// it plans nothing.
    #[error("{source_name}: {path}: {problem}")]
    Plan {
        source_name: String,
        path: String,
        problem: PlanProblem,
    },
}

/// What is wrong with a top-level field of a spec (`version`, `category`, `clients`,
/// `aggregate_rate`); each variant renders to the message after the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TopProblem {
    /// A `version` string other than 1 or 2.
    #[error("must be 1 or 2, got `{text}`")]
    VersionText { text: String },
    /// A `version` number other than 1 or 2.
    #[error("must be 1 or 2, got {value}")]
    VersionNumber { value: u64 },
    /// A `category` none of BLIS's.
    #[error("unknown category `{name}`; known: language, multimodal, reasoning, agentic")]
    UnknownCategory { name: String },
    /// Neither clients nor cohorts.
    #[error("at least one client or cohort is required")]
    NoClient,
    /// An `aggregate_rate` that is not a rate.
    #[error("must be a positive number of requests per second, got {value}")]
    AggregateRate { value: f64 },
    /// No `aggregate_rate` for open-loop clients.
    #[error("missing: required unless every client is closed-loop (`concurrency`)")]
    NoAggregateRate,
}

/// Line and column (1-based) of a parse error, when the YAML parser knows them; displays as
/// `:line:column` or nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location(pub Option<(usize, usize)>);

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some((line, column)) => write!(f, ":{line}:{column}"),
            None => Ok(()),
        }
    }
}

/// Deserializes a mapping as `Raw` and converts it with `TryFrom`, inside the mapping, so that
/// a conversion error carries the mapping's line and column like a syntax error does.
fn deserialize_checked<'de, D, Raw, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    Raw: Deserialize<'de>,
    T: TryFrom<Raw>,
    T::Error: fmt::Display,
{
    struct Checked<Raw, T>(PhantomData<(Raw, T)>);

    impl<'de, Raw, T> Visitor<'de> for Checked<Raw, T>
    where
        Raw: Deserialize<'de>,
        T: TryFrom<Raw>,
        T::Error: fmt::Display,
    {
        type Value = T;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a mapping")
        }

        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            let raw = Raw::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
            T::try_from(raw).map_err(A::Error::custom)
        }
    }

    deserializer.deserialize_map(Checked(PhantomData))
}
