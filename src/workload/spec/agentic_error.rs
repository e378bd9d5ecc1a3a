//! What is wrong with a client's `agentic` workflow: the steps, the loop and the rules over
//! the whole graph, as typed values that render to the messages users see.

use super::limits::LimitError;

/// An agentic workflow that cannot be used; each message starts with `agentic` or the step.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AgenticError {
    /// `steps` is empty.
    #[error("agentic: `steps` lists no step")]
    NoSteps,
    /// Step `index` has an empty id.
    #[error("agentic: steps[{index}] has an empty id")]
    EmptyId { index: usize },
    /// A step (named by its id) that is wrong by itself.
    #[error("agentic step `{id}`: {problem}")]
    Step { id: String, problem: StepProblem },
    /// `loop.over` is empty.
    #[error("agentic: loop.over names no step")]
    LoopEmpty,
    /// `loop.max_iterations` is 0.
    #[error("agentic: loop.max_iterations must be at least 1")]
    NoIteration,
    /// `loop.over` names a step that does not exist.
    #[error("agentic: loop.over names no step `{name}`")]
    LoopUnknown { name: String },
    /// `loop.over` names a step twice.
    #[error("agentic: loop.over lists `{name}` twice")]
    LoopTwice { name: String },
    /// A session larger than the limits.
    #[error(transparent)]
    Limit(#[from] LimitError),
    /// Rule 1: dependencies that form a cycle (the steps on it, by id).
    #[error(
        "agentic: the depends_on of {} form a cycle (only edges back to an earlier step of \
         loop.over may loop)",
        quoted(steps)
    )]
    Cycle { steps: Vec<String> },
    /// Rule 2: not exactly one root step (the steps without dependencies, by id).
    #[error(
        "agentic: {} have no depends_on (loop-back edges aside); a workflow has exactly one \
         root step",
        quoted(steps)
    )]
    Roots { steps: Vec<String> },
    /// Rule 5: steps outside the loop that both follow and precede it (by id).
    #[error(
        "agentic: steps outside loop.over both wait for its steps and are waited for by them \
         (put them in loop.over): {}",
        quoted(steps)
    )]
    AroundLoop { steps: Vec<String> },
    /// Rule 5: loop steps not linked to the first one (`first`) by dependencies.
    #[error(
        "agentic: loop.over steps must form a connected subgraph; not linked to `{first}` \
         through depends_on: {}",
        quoted(apart)
    )]
    LoopApart { first: String, apart: Vec<String> },
}

/// What is wrong with one step; each variant renders to the message after its name.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StepProblem {
    /// Another step has the same id.
    #[error("the id is used by two steps")]
    DuplicateId,
    /// `fan_out` below 2.
    #[error("fan_out must be at least 2, got {value}")]
    FanOut { value: u32 },
    /// Rule 8: `context_growth: accumulate` outside the loop.
    #[error("context_growth: accumulate is only valid on a step of loop.over")]
    AccumulateOutsideLoop,
    /// Rule 8: `context_growth` on a tool call.
    #[error("context_growth applies to llm_call steps, not tool calls")]
    AccumulateOnTool,
    /// Rule 7: lengths on a tool call.
    #[error(
        "a tool_call takes no input_distribution or output_distribution (its latency and \
         output tokens come from the `tools` section)"
    )]
    ToolLengths,
    /// Rule 3: a tool call without `tool`.
    #[error("a tool_call needs `tool`")]
    NoTool,
    /// Rule 3: a tool the `tools` section does not define (`defined`: those it does).
    #[error(
        "tool `{name}` is not defined in `tools` (defined: {})",
        defined_tools(defined)
    )]
    UnknownTool { name: String, defined: Vec<String> },
    /// `depends_on` names a step that does not exist.
    #[error("depends_on names no step `{name}`")]
    UnknownParent { name: String },
    /// `depends_on` names a step twice.
    #[error("depends_on lists `{name}` twice")]
    ParentTwice { name: String },
    /// Rule 6: an LLM call with a `tool`.
    #[error("an llm_call names no `tool`")]
    LlmWithTool,
    /// Rule 6: an LLM call without one of its distributions (`field`).
    #[error("an llm_call needs `{field}`")]
    LlmNeeds { field: &'static str },
}

/// `` `a`, `b` ``.
fn quoted(ids: &[String]) -> String {
    let quoted: Vec<String> = ids.iter().map(|id| format!("`{id}`")).collect();
    quoted.join(", ")
}

/// The tools defined, or `none`.
fn defined_tools(names: &[String]) -> String {
    match names.is_empty() {
        true => "none".to_owned(),
        false => names.join(", "),
    }
}
