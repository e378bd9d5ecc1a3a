//! Drawing the plan of one generated session: every size, latency and think time, in plan
//! order, from the session's own random streams.
//!
//! An LLM call's prompt is, in order: the context (its previous iteration's or turn's prompt
//! and output with `context_growth: accumulate`, else the client's shared prefix), the tokens
//! returned by the tool calls it waits for, then its own drawn prompt tokens. Token ids are
//! drawn for clients in a prefix group (as for flat requests) and for sessions whose context
//! accumulates (with no shared prefix); a session's requests then carry prompt and output ids,
//! so that accumulated context hits the prefix cache.
//!
//! A conversation's turns are drawn one at a time ([`Turns`]): a run draws the next turn when
//! the previous one finishes, `generate` draws them all at once; the streams are read in the
//! same order either way, so the turns are the same.

use super::agentic::{Action, AgenticSpec};
use super::dist::{DurationDist, LengthDist};
use super::generate::token_id;
use super::limits::MAX_SESSION_TOKEN_IDS;
use crate::workload::BlockHashes;
use crate::workload::sessions::{HandedOn, PlanBuilder, PlanTail, Step, Tail};
use crate::workload::{MAX_TOKENS, Request};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// Whether a session has dropped its token ids past [`MAX_SESSION_TOKEN_IDS`] in this
/// process (the warning is given once).
static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The random streams and fixed parts of one session's requests.
#[derive(Debug)]
pub(super) struct SessionDraw {
    /// Sizes, latencies, think times and turn counts.
    pub rng: ChaCha8Rng,
    /// Token ids: the group's shared prefix and the stream of ids unique to the session
    /// (`None` once its calls have carried [`MAX_SESSION_TOKEN_IDS`]).
    pub ids: Option<(Arc<[u32]>, ChaCha8Rng)>,
    /// Token ids drawn for its calls and tool outputs so far.
    pub ids_carried: usize,
    /// Model the requests name.
    pub model: Option<String>,
}

/// An LLM call drawn so far: its counts and token ids (prompt, then output).
#[derive(Debug, Clone)]
struct Call {
    input: u64,
    output: u32,
    ids: Vec<u32>,
}

impl SessionDraw {
    /// The context of a first call: the shared prefix.
    fn prefix(&self) -> Call {
        let prefix = self.ids.as_ref().map_or(&[][..], |(p, _)| &p[..]);
        Call {
            input: prefix.len() as u64,
            output: 0,
            ids: prefix.to_vec(),
        }
    }

    /// Whether `n` more token ids may be drawn for the session's calls (and the tool outputs
    /// they carry): while the session draws at most [`MAX_SESSION_TOKEN_IDS`]; past that, no
    /// call of the session carries any. Always false for a session without ids.
    fn carry(&mut self, n: usize) -> bool {
        if self.ids.is_none() {
            return false;
        }
        if self.ids_carried + n <= MAX_SESSION_TOKEN_IDS {
            self.ids_carried += n;
            return true;
        }
        self.ids = None;
        if !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            log::warn!(
                "a session's calls would draw more than {MAX_SESSION_TOKEN_IDS} token ids \
                 (each call carries the ids of its whole context); its later calls carry none, \
                 so the prefix cache does not look their prompts up"
            );
        }
        false
    }

    /// Appends `n` ids unique to the session (nothing without ids).
    fn fresh(&mut self, n: u32, ids: &mut Vec<u32>) {
        if let Some((_, rng)) = &mut self.ids {
            ids.extend((0..n).map(|_| token_id(rng)));
        }
    }

    /// An LLM call on `context` (counts and ids of what precedes its own tokens) with
    /// `own` prompt tokens of its own and `output` to generate; `handed` are the block hashes
    /// of the context's ids where a finished call handed them on. With `keep_ids` the call
    /// returned keeps its ids, for a context drawn before it finishes; else they move into
    /// the request, and its finish hands them back ([`HandedOn`]).
    fn call(
        &mut self,
        context: Call,
        (own, output): (u32, u32),
        handed: BlockHashes<'_>,
        keep_ids: bool,
    ) -> (Call, Request) {
        let Call { input, mut ids, .. } = context;
        let input = (input + u64::from(own)).min(MAX_TOKENS) as u32;
        let mut known_hashes = None;
        if self.carry(input as usize + output as usize) {
            // The ids the call starts with unchanged: the context's, up to its prompt's end.
            let kept = ids.len().min(input as usize);
            self.fresh(own, &mut ids);
            ids.truncate(input as usize);
            self.fresh(output, &mut ids);
            known_hashes = handed.known_for(kept);
        } else {
            ids = Vec::new();
        }
        let request = Request {
            id: 0,
            line: 0,
            model: self.model.clone(),
            arrival_ns: 0,
            input_toks: input,
            output_toks: output,
            token_ids: match keep_ids {
                true => ids.clone(),
                false => std::mem::take(&mut ids),
            },
            prompt_blocks: None,
            known_hashes,
        };
        let call = Call {
            input: u64::from(input),
            output,
            ids,
        };
        (call, request)
    }
}

/// The context `previous` leaves to the next call that accumulates it.
fn carried(previous: Call) -> Call {
    Call {
        input: previous.input + u64::from(previous.output),
        output: 0,
        ids: previous.ids,
    }
}

/// A step instance's label: the step id, `#<iteration>` in a loop, `[<branch>]` in a fan-out.
fn label(id: &str, iteration: Option<u32>, branch: Option<u32>) -> String {
    let mut label = id.to_owned();
    if let Some(k) = iteration {
        label.push_str(&format!("#{k}"));
    }
    if let Some(b) = branch {
        label.push_str(&format!("[{b}]"));
    }
    label
}

/// The plan of one session of an agentic workflow.
pub(super) fn agentic_plan(spec: &AgenticSpec, draw: &mut SessionDraw) -> PlanBuilder {
    let mut plan = PlanBuilder::new();
    // Per node: the call drawn (LLM nodes), or the tokens returned (tool nodes).
    let mut calls: Vec<Option<Call>> = Vec::with_capacity(spec.template.len());
    let mut returned: Vec<Option<Call>> = Vec::with_capacity(spec.template.len());
    for node in &spec.template {
        let step = &spec.steps[node.step as usize];
        let label = label(&step.id, node.iteration, node.branch);
        let fan_out = node.branch.is_some();
        match &step.action {
            Action::Llm { input, output } => {
                let own = input.sample(&mut draw.rng);
                let out = output.sample(&mut draw.rng);
                let mut context = match node.previous.filter(|_| step.accumulate) {
                    // Another node may carry the same call on: its ids are copied.
                    Some(p) => carried(calls[p as usize].clone().expect("an LLM node")),
                    None => draw.prefix(),
                };
                for &p in &node.parents {
                    if let Some(tool) = &returned[p as usize] {
                        context.input += tool.input;
                        context.ids.extend_from_slice(&tool.ids);
                    }
                }
                let (call, request) = draw.call(context, (own, out), BlockHashes::default(), true);
                let parents = node.parents.clone();
                plan.push(label, parents, Step::Llm(request), node.iteration, fan_out);
                calls.push(Some(call));
                returned.push(None);
            }
            &Action::Tool(t) => {
                let tool = &spec.tools[t];
                let latency_ns = tool.latency.sample_ns(&mut draw.rng);
                let tokens = tool
                    .output_tokens
                    .as_ref()
                    .map_or(0, |d| d.sample(&mut draw.rng));
                let mut ids = Vec::new();
                if draw.carry(tokens as usize) {
                    draw.fresh(tokens, &mut ids);
                }
                let parents = node.parents.clone();
                plan.push(
                    label,
                    parents,
                    Step::Tool(latency_ns),
                    node.iteration,
                    fan_out,
                );
                calls.push(None);
                returned.push(Some(Call {
                    input: u64::from(tokens),
                    output: 0,
                    ids,
                }));
            }
        }
    }
    plan
}

/// A conversation's turns (labelled `0`, `1`, ...), each followed by a think time but the
/// last, drawn a turn at a time.
#[derive(Debug)]
pub(super) struct Turns<'a> {
    /// Pause between a turn's completion and the next turn's arrival.
    pub think: &'a DurationDist,
    /// Each turn's prompt carries the previous turn's prompt and output.
    pub accumulate: bool,
    pub input: &'a LengthDist,
    pub output: &'a LengthDist,
    pub draw: SessionDraw,
    /// Turns of the conversation.
    pub turns: u32,
    /// Turns drawn so far.
    pub drawn: u32,
    /// The call of the last turn drawn, when another follows (its think time is then the
    /// plan's last node, wherever the plan starts: a running session folds its first nodes).
    previous: Option<Call>,
    /// Whether each turn is drawn once the one before has finished ([`Turns::start`]): its
    /// ids then move into its request and come back with its finish, rather than being
    /// kept beside it.
    lazily: bool,
}

impl<'a> Turns<'a> {
    /// A conversation of `turns` turns drawn from `draw`, none drawn yet.
    pub fn new(
        (think, accumulate): (&'a DurationDist, bool),
        (input, output): (&'a LengthDist, &'a LengthDist),
        draw: SessionDraw,
        turns: u32,
    ) -> Turns<'a> {
        Turns {
            think,
            accumulate,
            input,
            output,
            draw,
            turns,
            drawn: 0,
            previous: None,
            lazily: false,
        }
    }

    /// Its first turn in a plan of its own, and the rest to draw later (`None` for a single
    /// turn).
    pub fn start(mut self: Box<Self>) -> (PlanBuilder, Option<Tail<'a>>) {
        let mut plan = PlanBuilder::new();
        self.lazily = true;
        let more = self.extend(&mut plan, HandedOn::default());
        (plan, more.then_some(self as Tail<'a>))
    }

    /// Every turn in one plan.
    pub fn whole(mut self: Box<Self>) -> PlanBuilder {
        let mut plan = PlanBuilder::new();
        while self.extend(&mut plan, HandedOn::default()) {}
        plan
    }
}

impl PlanTail for Turns<'_> {
    /// Draws the next turn (and its think time unless it is the last); an accumulating turn
    /// starts from what the previous turn `handed` on: its ids, drawn lazily, and its block
    /// hashes.
    fn extend(&mut self, plan: &mut PlanBuilder, handed: HandedOn<'_>) -> bool {
        if self.drawn >= self.turns {
            return false;
        }
        let k = self.drawn;
        let draw = &mut self.draw;
        let own = self.input.sample(&mut draw.rng);
        let out = self.output.sample(&mut draw.rng);
        let parents = match self.previous {
            Some(_) => vec![plan.len() as u32 - 1],
            None => Vec::new(),
        };
        // The previous call is not read again: its ids become the context's, not copied.
        let (context, hashes) = match self.previous.take() {
            Some(mut call) if self.accumulate => {
                if self.lazily {
                    call.ids = handed.ids;
                }
                (carried(call), handed.hashes)
            }
            _ => (draw.prefix(), BlockHashes::default()),
        };
        let (call, request) = draw.call(context, (own, out), hashes, !self.lazily);
        let node = plan.push(k.to_string(), parents, Step::Llm(request), None, false);
        self.drawn += 1;
        self.previous = (self.drawn < self.turns).then(|| {
            let think = self.think.sample_ns(&mut draw.rng);
            let label = format!("{k}+think");
            plan.push(label, vec![node], Step::Think(think), None, false);
            call
        });
        self.drawn < self.turns
    }

    fn planned(&self) -> u32 {
        self.turns
    }
}
