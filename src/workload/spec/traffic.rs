//! What each arrival of a client brings: a request, a conversation or an agentic session.

use super::agentic::AgenticSpec;
use super::client_error::ClientProblem;
use super::conversation::Conversation;
use super::dist::LengthDist;
use super::schema::RawClient;

/// What one arrival of a client brings.
#[derive(Debug, Clone)]
pub enum Traffic {
    /// A request, or the first turn of a conversation.
    Requests {
        /// Prompt length, tokens, not counting the shared prefix.
        input: LengthDist,
        /// Output length, tokens.
        output: LengthDist,
        /// Follow-up turns (`reasoning.multi_turn` or `follow_up`).
        conversation: Option<Conversation>,
    },
    /// A session of an agentic workflow.
    Agentic(Box<AgenticSpec>),
}

impl Traffic {
    /// Whether a session carries its calls' context into later calls (`context_growth:
    /// accumulate` on a conversation or on an agentic step).
    pub fn accumulates(&self) -> bool {
        match self {
            Traffic::Requests { conversation, .. } => {
                conversation.as_ref().is_some_and(|c| c.accumulate)
            }
            Traffic::Agentic(a) => a.steps.iter().any(|s| s.accumulate),
        }
    }

    /// Whether each arrival starts a session.
    pub fn is_session(&self) -> bool {
        !matches!(
            self,
            Traffic::Requests {
                conversation: None,
                ..
            }
        )
    }
}

/// What a client's arrivals bring, taking its session fields out of `raw`.
pub(super) fn traffic(raw: &mut RawClient) -> Result<Traffic, ClientProblem> {
    if let Some(agentic) = raw.agentic.take() {
        if raw.follow_up.is_some() || raw.closed_loop.is_some() {
            return Err(ClientProblem::AgenticConversation);
        }
        if raw.input_distribution.is_some() || raw.output_distribution.is_some() {
            return Err(ClientProblem::AgenticLengths);
        }
        return Ok(Traffic::Agentic(Box::new(AgenticSpec::try_from(agentic)?)));
    }
    let from_reasoning = match raw.reasoning.take() {
        Some(r) => Conversation::from_reasoning(r)?,
        None => None,
    };
    let conversation = match (from_reasoning, raw.follow_up.take()) {
        (Some(_), Some(_)) => return Err(ClientProblem::TwoConversations),
        (Some(c), None) => Some(c),
        (None, Some(f)) => Some(Conversation::from_follow_up(f)?),
        (None, None) => None,
    };
    match (raw.closed_loop, &conversation) {
        (Some(false), _) => return Err(ClientProblem::OpenLoopFollowUps),
        (Some(true), None) => return Err(ClientProblem::ClosedLoopSingleTurn),
        _ => {}
    }
    let missing = |field| ClientProblem::Missing { field };
    Ok(Traffic::Requests {
        input: raw
            .input_distribution
            .take()
            .ok_or_else(|| missing("input_distribution"))?,
        output: raw
            .output_distribution
            .take()
            .ok_or_else(|| missing("output_distribution"))?,
        conversation,
    })
}
