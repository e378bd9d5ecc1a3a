//! Conversations: sessions of turns, each arriving when the previous one has finished plus a
//! think time. Two forms: BLIS's `reasoning.multi_turn` (a fixed number of rounds and think
//! time) and the `follow_up` extension (another turn with some probability, up to a maximum,
//! after a think time drawn from a distribution).

use super::agentic::ContextGrowth;
use super::dist::DurationDist;
use super::limits::LimitError;
use rand::{Rng, RngExt};
use serde::Deserialize;
use serde::de::IgnoredAny;

/// BLIS's `reasoning` block.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReasoning {
    /// Share of the output that is reasoning: accepted, no effect (the engine does not tell
    /// reasoning tokens from other output tokens).
    #[serde(default, rename = "reason_ratio_distribution")]
    _reason_ratio: Option<IgnoredAny>,
    #[serde(default)]
    multi_turn: Option<RawMultiTurn>,
}

/// BLIS's `reasoning.multi_turn`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMultiTurn {
    max_rounds: u32,
    #[serde(default)]
    think_time_us: u32,
    #[serde(default)]
    context_growth: Option<ContextGrowth>,
    #[serde(default)]
    single_session: bool,
}

/// The `follow_up` extension.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFollowUp {
    probability: f64,
    think_time: DurationDist,
    max_turns: u32,
    #[serde(default)]
    context_growth: Option<ContextGrowth>,
}

/// A validated conversation pattern of a client.
#[derive(Debug, Clone)]
pub struct Conversation {
    /// Most turns of a session (the first included).
    pub max_turns: u32,
    /// Probability of each follow-up (1 for `multi_turn`: always `max_turns` turns).
    pub follow_up_probability: f64,
    /// Pause between a turn's completion and the next turn's arrival, µs.
    pub think_time: DurationDist,
    /// Each turn's prompt carries the previous turn's prompt and output.
    pub accumulate: bool,
}

/// What is wrong with a client's `reasoning.multi_turn` or `follow_up`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConversationError {
    /// A follow-up probability outside `[0, 1]`.
    #[error("follow_up.probability must be in [0, 1], got {value}")]
    Probability { value: f64 },
    /// A conversation of no turn (`field`: the field that says so).
    #[error("{field} must be at least 1")]
    NoTurn { field: &'static str },
    /// BLIS's `single_session`, which this simulator does not model.
    #[error(
        "reasoning.multi_turn.single_session is not supported: each arrival starts its own \
         session"
    )]
    SingleSession,
    /// More turns than a session may have.
    #[error(transparent)]
    Limit(#[from] LimitError),
}

impl Conversation {
    /// From `reasoning`: `None` without `multi_turn`.
    pub(super) fn from_reasoning(
        raw: RawReasoning,
    ) -> Result<Option<Conversation>, ConversationError> {
        let Some(m) = raw.multi_turn else {
            return Ok(None);
        };
        const MAX_ROUNDS: &str = "reasoning.multi_turn.max_rounds";
        if m.max_rounds == 0 {
            return Err(ConversationError::NoTurn { field: MAX_ROUNDS });
        }
        super::limits::check_turns(MAX_ROUNDS, m.max_rounds)?;
        if m.single_session {
            return Err(ConversationError::SingleSession);
        }
        Ok(Some(Conversation {
            max_turns: m.max_rounds,
            follow_up_probability: 1.0,
            think_time: DurationDist::constant(m.think_time_us),
            accumulate: m.context_growth == Some(ContextGrowth::Accumulate),
        }))
    }

    /// From `follow_up`.
    pub(super) fn from_follow_up(raw: RawFollowUp) -> Result<Conversation, ConversationError> {
        if !(0.0..=1.0).contains(&raw.probability) {
            let value = raw.probability;
            return Err(ConversationError::Probability { value });
        }
        const MAX_TURNS: &str = "follow_up.max_turns";
        if raw.max_turns == 0 {
            return Err(ConversationError::NoTurn { field: MAX_TURNS });
        }
        super::limits::check_turns(MAX_TURNS, raw.max_turns)?;
        Ok(Conversation {
            max_turns: raw.max_turns,
            follow_up_probability: raw.probability,
            think_time: raw.think_time,
            accumulate: raw.context_growth == Some(ContextGrowth::Accumulate),
        })
    }

    /// Draws a session's number of turns: 1, then each follow-up with its probability, up
    /// to `max_turns` (no draw when the probability is 1).
    pub(super) fn turns<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        let mut turns = 1;
        while turns < self.max_turns
            && (self.follow_up_probability >= 1.0
                || rng.random::<f64>() < self.follow_up_probability)
        {
            turns += 1;
        }
        turns
    }
}
