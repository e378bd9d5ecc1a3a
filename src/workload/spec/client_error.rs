//! What is wrong with a client or a cohort of a spec, as typed values that render to the
//! messages users see: `client `id`: ...` or `cohort `id`: ...`, then the problem.

use super::agentic_error::AgenticError;
use super::cohort::MAX_POPULATION;
use super::conversation::ConversationError;
use super::extras::ExtrasError;
use super::priority::PriorityError;
use crate::workload::MAX_TOKENS;

/// A client or cohort that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{who}: {problem}")]
pub struct ClientError {
    /// The client or cohort: `client `id``, `client` without an id, or the same for a cohort.
    pub who: String,
    /// What is wrong with it (boxed: errors stay small on the `Ok` path).
    pub problem: Box<ClientProblem>,
}

/// What is wrong with a client or cohort; each variant renders to the message after its name.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClientProblem {
    /// Rule 9 of agentic workflows.
    #[error("`agentic` cannot be combined with `reasoning` or `multimodal`")]
    AgenticWithOthers,
    /// BLIS's LoRA adapters.
    #[error("`adapter` (LoRA) is not supported yet")]
    Adapter,
    /// A cohort's field on a client.
    #[error("`{field}` belongs to cohorts, not clients")]
    CohortField { field: &'static str },
    /// A client's field on a cohort.
    #[error(
        "`{field}` does not apply to cohorts (BLIS builds a member's lifecycle from diurnal, \
         spike and drain)"
    )]
    ClientField { field: &'static str },
    /// A required field is absent.
    #[error("missing field `{field}`")]
    Missing { field: &'static str },
    /// A cohort's population out of range.
    #[error("population must be in [1, {MAX_POPULATION}], got {value}")]
    Population { value: i64 },
    /// `prefix_sharing: per_member` without a group to share.
    #[error("prefix_sharing `per_member` needs a prefix_group")]
    PerMemberWithoutGroup,
    /// `prefix_sharing` none of its two values.
    #[error("prefix_sharing must be `shared` or `per_member`, got `{value}`")]
    PrefixSharing { value: String },
    /// A cohort's `diurnal`, `spike` or `drain`.
    #[error(transparent)]
    Pattern(#[from] PatternError),
    /// Both forms of a think time.
    #[error("give think_time_us or think_time, not both")]
    TwoThinkTimes,
    /// A think time (`field`) without closed-loop users.
    #[error("{field} needs concurrency (closed-loop users)")]
    ThinkWithoutUsers { field: &'static str },
    /// `concurrency` out of range.
    #[error("concurrency must be a number of users in [1, {max}], got {value}")]
    Concurrency { value: i64, max: i64 },
    /// `think_time_us` out of range.
    #[error("think_time_us must be in [0, {}] µs, got {value}", u32::MAX)]
    ThinkMicros { value: i64 },
    /// A window, multimodal prompt, timeout, SLO target or network.
    #[error(transparent)]
    Extras(#[from] ExtrasError),
    /// A multimodal client of sessions.
    #[error(
        "`multimodal` applies to single requests, not to sessions (conversations, agentic \
         workflows)"
    )]
    MultimodalSessions,
    /// `rate_fraction` not positive.
    #[error("rate_fraction must be positive, got {value}")]
    RateFraction { value: f64 },
    /// The priority distribution.
    #[error(transparent)]
    Priority(#[from] PriorityError),
    /// A field a closed-loop client does not take.
    #[error(
        "`{field}` cannot be combined with `concurrency` (closed-loop users send single \
         requests of the input and output distributions)"
    )]
    NotClosedLoop { field: &'static str },
    /// `streaming` neither a flag nor a probability.
    #[error("streaming must be true, false or a probability in [0, 1], got {value}")]
    Streaming { value: f64 },
    /// `prefix_length` without a group.
    #[error("prefix_length needs a prefix_group")]
    PrefixWithoutGroup,
    /// `prefix_length` as long as any prompt may be.
    #[error("prefix_length {value} leaves no room for a prompt (limit {MAX_TOKENS})")]
    PrefixTooLong { value: u32 },
    /// Conversation fields on an agentic client.
    #[error("`follow_up` and `closed_loop` apply to conversations, not `agentic` workflows")]
    AgenticConversation,
    /// Lengths on an agentic client.
    #[error(
        "an agentic client's input_distribution and output_distribution belong on its \
         llm_call steps"
    )]
    AgenticLengths,
    /// The agentic workflow.
    #[error(transparent)]
    Agentic(#[from] AgenticError),
    /// The conversation (`reasoning.multi_turn` or `follow_up`).
    #[error(transparent)]
    Conversation(#[from] ConversationError),
    /// Follow-ups given twice.
    #[error("give follow-ups by `reasoning.multi_turn` or by `follow_up`, not both")]
    TwoConversations,
    /// BLIS's open-loop follow-ups.
    #[error(
        "`closed_loop: false` (open-loop follow-ups at pre-stamped times) is not supported: \
         follow-ups arrive at completion + think time"
    )]
    OpenLoopFollowUps,
    /// `closed_loop` on a client of single requests.
    #[error("`closed_loop` applies to multi-turn clients")]
    ClosedLoopSingleTurn,
}

/// What is wrong with a cohort's activity pattern.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatternError {
    /// A spike of no length.
    #[error("spike.duration_us must be positive")]
    SpikeDuration,
    /// A spike's rate not positive.
    #[error("spike.trace_rate must be a positive number of requests per second, got {value}")]
    SpikeRate { value: f64 },
    /// The peak hour not an hour.
    #[error("diurnal.peak_hour must be an hour in [0, 23], got {value}")]
    PeakHour { value: i64 },
    /// A peak-to-trough ratio below 1.
    #[error("diurnal.peak_to_trough_ratio must be at least 1, got {value}")]
    PeakToTrough { value: f64 },
}

impl ClientError {
    /// `problem` with the client or cohort `who`.
    pub(super) fn new(who: &str, problem: impl Into<ClientProblem>) -> ClientError {
        ClientError {
            who: who.to_owned(),
            problem: Box::new(problem.into()),
        }
    }
}
