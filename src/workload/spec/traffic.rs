//! What each arrival of a client brings: a request, a conversation or an agentic session.

use super::agentic::AgenticSpec;
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
pub(super) fn traffic(raw: &mut RawClient, who: &str) -> Result<Traffic, String> {
    let at = |e: String| format!("{who}: {e}");
    if let Some(agentic) = raw.agentic.take() {
        if raw.follow_up.is_some() || raw.closed_loop.is_some() {
            return Err(at(
                "`follow_up` and `closed_loop` apply to conversations, not `agentic` workflows"
                    .into(),
            ));
        }
        if raw.input_distribution.is_some() || raw.output_distribution.is_some() {
            return Err(at("an agentic client's input_distribution and \
                           output_distribution belong on its llm_call steps"
                .into()));
        }
        return Ok(Traffic::Agentic(Box::new(
            AgenticSpec::try_from(agentic).map_err(at)?,
        )));
    }
    let from_reasoning = match raw.reasoning.take() {
        Some(r) => Conversation::from_reasoning(r).map_err(|e| at(e.to_string()))?,
        None => None,
    };
    let conversation = match (from_reasoning, raw.follow_up.take()) {
        (Some(_), Some(_)) => {
            return Err(at(
                "give follow-ups by `reasoning.multi_turn` or by `follow_up`, not both".into(),
            ));
        }
        (Some(c), None) => Some(c),
        (None, Some(f)) => Some(Conversation::from_follow_up(f).map_err(|e| at(e.to_string()))?),
        (None, None) => None,
    };
    match (raw.closed_loop, &conversation) {
        (Some(false), _) => {
            return Err(at(
                "`closed_loop: false` (open-loop follow-ups at pre-stamped \
                           times) is not supported: follow-ups arrive at completion + think \
                           time"
                    .into(),
            ));
        }
        (Some(true), None) => {
            return Err(at("`closed_loop` applies to multi-turn clients".into()));
        }
        _ => {}
    }
    let missing = |field: &str| at(format!("missing field `{field}`"));
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
