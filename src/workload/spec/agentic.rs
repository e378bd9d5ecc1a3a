//! Agentic workflows (`agentic` on a client): the schema and its nine validation rules.
//!
//! A workflow is a list of steps: `llm_call` steps (a request, with prompt and output length
//! distributions) and `tool_call` steps (a tool of the `tools` section: a latency and the
//! tokens it returns, which join the prompt of the LLM calls that wait for it). `depends_on`
//! names the steps a step waits for (all of them), `fan_out: N` runs N parallel copies of a
//! step (whose dependents wait for all N), and `loop` repeats the steps of `loop.over`
//! `max_iterations` times: an iteration's entry steps wait for the previous iteration's last
//! steps, and steps after the loop wait for its last iteration. Inside the loop,
//! `context_growth: accumulate` makes an LLM call's prompt carry its previous iteration's
//! prompt and output. A `depends_on` from a loop step to a step at or after it in
//! `loop.over` is a loop-back edge: it states the loop and adds nothing.

use super::agentic_error::{AgenticError, StepProblem};
use super::dist::{DurationDist, LengthDist};
use super::workflow::{TemplateNode, unroll};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The YAML form of `agentic`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAgentic {
    #[serde(default)]
    workflow: Option<String>,
    #[serde(default, rename = "loop")]
    loop_spec: Option<RawLoop>,
    #[serde(default)]
    steps: Vec<RawStep>,
    #[serde(default)]
    tools: BTreeMap<String, RawTool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLoop {
    over: Vec<String>,
    max_iterations: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    id: String,
    #[serde(rename = "type")]
    kind: StepType,
    #[serde(default)]
    tool: Option<String>,
    #[serde(default)]
    depends_on: Vec<String>,
    #[serde(default)]
    fan_out: Option<u32>,
    #[serde(default)]
    context_growth: Option<ContextGrowth>,
    #[serde(default)]
    input_distribution: Option<LengthDist>,
    #[serde(default)]
    output_distribution: Option<LengthDist>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StepType {
    LlmCall,
    ToolCall,
}

/// `context_growth`: `accumulate`, or `""` / `none` for none (BLIS writes `""`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub(super) enum ContextGrowth {
    #[serde(rename = "accumulate")]
    Accumulate,
    #[serde(rename = "", alias = "none")]
    None,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    latency: DurationDist,
    #[serde(default)]
    output_tokens: Option<LengthDist>,
}

/// A validated agentic workflow.
#[derive(Debug, Clone)]
pub struct AgenticSpec {
    /// The workflow's name (a label).
    pub workflow: Option<String>,
    /// The steps, in file order.
    pub steps: Vec<StepSpec>,
    /// The tools, by name.
    pub tools: Vec<ToolSpec>,
    /// The loop, if any.
    pub loop_spec: Option<LoopSpec>,
    /// The workflow unrolled: one node per step instance (fan-out branch, loop iteration),
    /// parents first.
    pub(super) template: Vec<TemplateNode>,
}

/// One validated step.
#[derive(Debug, Clone)]
pub struct StepSpec {
    /// Step id.
    pub id: String,
    /// What it does.
    pub action: Action,
    /// Indices of the steps it waits for (loop-back edges removed).
    pub depends_on: Vec<usize>,
    /// Parallel copies (1 without `fan_out`).
    pub fan_out: u32,
    /// Carries its previous loop iteration's prompt and output.
    pub accumulate: bool,
}

/// What a step does.
#[derive(Debug, Clone)]
pub enum Action {
    /// An LLM call.
    Llm {
        /// Prompt tokens of its own (before tool outputs and accumulated context).
        input: LengthDist,
        /// Tokens to generate.
        output: LengthDist,
    },
    /// A call of the tool at this index of [`AgenticSpec::tools`].
    Tool(usize),
}

/// A tool of the `tools` section.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// Name.
    pub name: String,
    /// Latency, µs.
    pub latency: DurationDist,
    /// Tokens it returns (none when not given).
    pub output_tokens: Option<LengthDist>,
}

/// The workflow's loop.
#[derive(Debug, Clone)]
pub struct LoopSpec {
    /// Indices of the repeated steps, in `loop.over` order.
    pub over: Vec<usize>,
    /// Iterations run (the loop stops early only at the horizon).
    pub max_iterations: u32,
}

impl AgenticSpec {
    /// LLM calls of one session: the ids a session reserves.
    pub fn num_llm_calls(&self) -> u32 {
        self.template
            .iter()
            .filter(|n| matches!(self.steps[n.step as usize].action, Action::Llm { .. }))
            .count() as u32
    }
}

/// `problem` with step `id`.
fn at_step(id: &str, problem: StepProblem) -> AgenticError {
    AgenticError::Step {
        id: id.to_owned(),
        problem,
    }
}

impl TryFrom<RawAgentic> for AgenticSpec {
    type Error = AgenticError;

    fn try_from(raw: RawAgentic) -> Result<Self, AgenticError> {
        let ids = step_ids(&raw.steps)?;
        let index = |name: &str| ids.iter().position(|id| *id == name);
        let loop_spec = match &raw.loop_spec {
            None => None,
            Some(l) => Some(validate_loop(l, &index)?),
        };
        let graph = StepGraph {
            ids: &ids,
            tool_names: raw.tools.keys().map(String::as_str).collect(),
            loop_spec: loop_spec.as_ref(),
        };
        let steps = raw
            .steps
            .iter()
            .enumerate()
            .map(|(s, step)| graph.step(s, step))
            .collect::<Result<Vec<_>, _>>()?;
        let tools = raw
            .tools
            .into_iter()
            .map(|(name, t)| ToolSpec {
                name,
                latency: t.latency,
                output_tokens: t.output_tokens,
            })
            .collect();
        super::limits::check_workflow(&steps, loop_spec.as_ref())?;
        // Rules 1, 2 and 5.
        let template = unroll(&steps, loop_spec.as_ref())?;
        Ok(AgenticSpec {
            workflow: raw.workflow,
            steps,
            tools,
            loop_spec,
            template,
        })
    }
}

/// The steps' ids: at least one step, none empty, none repeated.
fn step_ids(steps: &[RawStep]) -> Result<Vec<&str>, AgenticError> {
    if steps.is_empty() {
        return Err(AgenticError::NoSteps);
    }
    let ids: Vec<&str> = steps.iter().map(|s| s.id.as_str()).collect();
    for (i, id) in ids.iter().enumerate() {
        if id.is_empty() {
            return Err(AgenticError::EmptyId { index: i });
        }
        if ids[..i].contains(id) {
            return Err(at_step(id, StepProblem::DuplicateId));
        }
    }
    Ok(ids)
}

/// What a step is checked against: the other steps, the tools and the loop.
struct StepGraph<'a> {
    ids: &'a [&'a str],
    tool_names: Vec<&'a str>,
    loop_spec: Option<&'a LoopSpec>,
}

impl StepGraph<'_> {
    /// Step `s` (`step` in the file), checked.
    fn step(&self, s: usize, step: &RawStep) -> Result<StepSpec, AgenticError> {
        let at = |problem| at_step(&step.id, problem);
        let action = match step.kind {
            StepType::LlmCall => llm_action(step),
            StepType::ToolCall => self.tool_action(step),
        }
        .map_err(at)?;
        // Rule 4.
        let fan_out = match step.fan_out {
            None => 1,
            Some(n) if n >= 2 => n,
            Some(n) => return Err(at(StepProblem::FanOut { value: n })),
        };
        // Rule 8.
        let accumulate = step.context_growth == Some(ContextGrowth::Accumulate);
        if accumulate && self.in_loop(s).is_none() {
            return Err(at(StepProblem::AccumulateOutsideLoop));
        }
        if accumulate && step.kind == StepType::ToolCall {
            return Err(at(StepProblem::AccumulateOnTool));
        }
        Ok(StepSpec {
            id: step.id.clone(),
            action,
            depends_on: self.parents(s, step).map_err(at)?,
            fan_out,
            accumulate,
        })
    }

    /// A tool call's tool (rules 3 and 7).
    fn tool_action(&self, step: &RawStep) -> Result<Action, StepProblem> {
        // Rule 7.
        if step.input_distribution.is_some() || step.output_distribution.is_some() {
            return Err(StepProblem::ToolLengths);
        }
        // Rule 3.
        let name = step.tool.as_deref().ok_or(StepProblem::NoTool)?;
        let tool = self.tool_names.iter().position(|t| *t == name);
        tool.map(Action::Tool)
            .ok_or_else(|| StepProblem::UnknownTool {
                name: name.to_owned(),
                defined: self.tool_names.iter().map(|t| (*t).to_owned()).collect(),
            })
    }

    /// The steps `step` (step `s`) waits for: its `depends_on`, less the loop's back edges
    /// (a step of the loop depending on one at or after it, in `loop.over` order).
    fn parents(&self, s: usize, step: &RawStep) -> Result<Vec<usize>, StepProblem> {
        let mut depends_on = Vec::with_capacity(step.depends_on.len());
        for name in &step.depends_on {
            let p = self
                .ids
                .iter()
                .position(|id| id == name)
                .ok_or_else(|| StepProblem::UnknownParent { name: name.clone() })?;
            if step.depends_on.iter().filter(|n| *n == name).count() > 1 {
                return Err(StepProblem::ParentTwice { name: name.clone() });
            }
            let loop_back =
                matches!((self.in_loop(s), self.in_loop(p)), (Some(a), Some(b)) if b >= a);
            if !loop_back {
                depends_on.push(p);
            }
        }
        Ok(depends_on)
    }

    /// Step `s`'s position in `loop.over`, if it is in the loop.
    fn in_loop(&self, s: usize) -> Option<usize> {
        self.loop_spec
            .and_then(|l| l.over.iter().position(|&o| o == s))
    }
}

/// An LLM call's prompt and output distributions (rule 6).
fn llm_action(step: &RawStep) -> Result<Action, StepProblem> {
    if step.tool.is_some() {
        return Err(StepProblem::LlmWithTool);
    }
    let missing = |field| StepProblem::LlmNeeds { field };
    Ok(Action::Llm {
        input: step
            .input_distribution
            .clone()
            .ok_or_else(|| missing("input_distribution"))?,
        output: step
            .output_distribution
            .clone()
            .ok_or_else(|| missing("output_distribution"))?,
    })
}

/// The loop's steps exist, appear once, and iterate at least once.
fn validate_loop(
    l: &RawLoop,
    index: &dyn Fn(&str) -> Option<usize>,
) -> Result<LoopSpec, AgenticError> {
    if l.over.is_empty() {
        return Err(AgenticError::LoopEmpty);
    }
    if l.max_iterations == 0 {
        return Err(AgenticError::NoIteration);
    }
    let mut over = Vec::with_capacity(l.over.len());
    for name in &l.over {
        let s = index(name).ok_or_else(|| AgenticError::LoopUnknown { name: name.clone() })?;
        if over.contains(&s) {
            return Err(AgenticError::LoopTwice { name: name.clone() });
        }
        over.push(s);
    }
    Ok(LoopSpec {
        over,
        max_iterations: l.max_iterations,
    })
}
