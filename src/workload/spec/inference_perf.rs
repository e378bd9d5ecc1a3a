//! BLIS's `inference_perf` source: inference-perf's stages and shared-prefix data set in a
//! compact block, expanded into clients the way BLIS expands it
//! (inference-sim `sim/workload/inference_perf.go`, `ExpandInferencePerfSpec`).
//!
//! One client per system prompt and user (`prompt-<p>-user-<u>`, tenant and prefix group
//! `prompt-<p>`, prefix `system_prompt_len` tokens, prompt `question_len` tokens after it,
//! `output_len` output tokens, SLO class standard). One stage: the stage's
//! `floor(rate × duration)` requests are shared out evenly (the first clients get one more),
//! and each client sends exactly its share over the stage (inference-perf's normalised
//! exponential gaps). Several stages: each stage gets its own clients
//! (`stage-<s>-prompt-<p>-user-<u>`), active only in the stage's window, each at a Poisson
//! `rate / clients`. Multi-turn chat: each client is one session of its share of the stage's
//! requests as fixed-length rounds on BLIS's schedule (`chat_sessions`).

use super::arrival::ArrivalProcess;
use super::dist::LengthDist;
use super::extras::{ExtrasError, Lifecycle};
use super::schema::{Category, ClientSpec, SloClass};
use serde::Deserialize;

/// The `inference_perf` block as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawInferencePerf {
    #[serde(default)]
    stages: Vec<RawStage>,
    #[serde(default)]
    shared_prefix: Option<RawSharedPrefix>,
}

/// One stage: `rate` requests per second for `duration` seconds.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStage {
    rate: f64,
    duration: i64,
}

/// inference-perf's shared-prefix data set (BLIS reads absent numbers as 0).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawSharedPrefix {
    num_unique_system_prompts: i64,
    num_users_per_system_prompt: i64,
    system_prompt_len: i64,
    question_len: i64,
    output_len: i64,
    enable_multi_turn_chat: bool,
}

/// The clients an `inference_perf` block stands for, with what the spec takes from it.
#[derive(Debug)]
pub(super) struct Expansion {
    /// The clients, stage by stage, prompt by prompt, user by user.
    pub(super) clients: Vec<ClientSpec>,
    /// Each client's rate while active, requests per second.
    pub(super) rates: Vec<f64>,
    /// The sum of the stage rates (BLIS's `aggregate_rate` for the block).
    pub(super) aggregate_rate: f64,
    /// The end of the last stage, µs, when no arrival comes after it (`None`: one stage of
    /// multi-turn chat, whose later rounds may run past it, as in BLIS).
    pub(super) end_us: Option<u64>,
    /// The requests the block plans in all (multi-turn chat; else 0).
    pub(super) total_requests: u64,
    /// BLIS's label for the block: `reasoning` with multi-turn chat, else `language`.
    pub(super) category: Category,
}

/// Most clients an expansion may make (BLIS's limit).
const MAX_CLIENTS: u64 = 1_000_000;

/// Most requests one client of a single stage may send (BLIS's limit).
const MAX_CLIENT_REQUESTS: u64 = 10_000_000;

/// BLIS's prefix length when `system_prompt_len` is 0 (its default for a prefix group).
const DEFAULT_PREFIX_LENGTH: u32 = 50;

/// One stage, checked: rate (requests/s) and window `[start_us, end_us)`.
struct Stage {
    rate: f64,
    start_us: u64,
    end_us: u64,
}

/// A field of an `inference_perf` block that is wrong: its path (`inference_perf.…`) and what.
pub(super) type Fail = (String, InferencePerfProblem);

/// What is wrong with a field of an `inference_perf` block (the path says which).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InferencePerfProblem {
    /// No `shared_prefix`.
    #[error("missing: BLIS needs the shared-prefix data set")]
    NoSharedPrefix,
    /// No stage.
    #[error("at least one stage is required")]
    NoStages,
    /// A stage's rate that is not a positive number.
    #[error("must be a positive number of requests per second, got {got}")]
    Rate { got: f64 },
    /// A stage's duration that is not positive or ends the stages past the time bound.
    #[error("must be a positive number of seconds, the stages ending by {limit_s} s; got {got}")]
    Duration { limit_s: u64, got: i64 },
    /// A count that is not positive.
    #[error("must be positive, got {got}")]
    NotPositive { got: i64 },
    /// More clients than the block may expand into.
    #[error(
        "{prompts} prompts × {users} users × {stages} stages make more than {MAX_CLIENTS} clients"
    )]
    TooManyClients {
        prompts: u64,
        users: u64,
        stages: usize,
    },
    /// A length out of range.
    #[error("must be in [{lo}, {hi}] tokens, got {got}")]
    Tokens { lo: i64, hi: i64, got: i64 },
    /// A single stage with fewer requests than clients.
    #[error(
        "rate × duration gives {total} requests, fewer than the {clients} clients (each needs \
         one); raise the rate or the duration"
    )]
    FewerThanClients { total: u64, clients: u64 },
    /// A single stage giving one client more requests than it can send.
    #[error(
        "gives a client {most} requests; at most one per µs of the stage and at most \
         {MAX_CLIENT_REQUESTS}"
    )]
    TooManyPerClient { most: u64 },
    /// A multi-turn stage without a request.
    #[error("rate × duration gives no request; raise either")]
    NoRequest,
    /// A stage's window that cannot be a client's lifecycle.
    #[error("{0}")]
    Window(ExtrasError),
}

impl RawInferencePerf {
    /// Expands the block into clients; errors name the field (`inference_perf.…`).
    pub(super) fn expand(self) -> Result<Expansion, Fail> {
        let stages = stages(&self.stages)?;
        let sp = self.shared_prefix.ok_or_else(|| {
            (
                "inference_perf.shared_prefix".to_owned(),
                InferencePerfProblem::NoSharedPrefix,
            )
        })?;
        let shape = Shape::parse(&sp, stages.len())?;
        let mut out = Expansion {
            clients: Vec::with_capacity(shape.per_stage as usize * stages.len()),
            rates: Vec::with_capacity(shape.per_stage as usize * stages.len()),
            aggregate_rate: stages.iter().map(|s| s.rate).sum(),
            end_us: Some(stages.last().expect("at least one").end_us),
            total_requests: 0,
            category: Category::Language,
        };
        if shape.multi_turn {
            out.category = Category::Reasoning;
            out.end_us = out.end_us.filter(|_| stages.len() > 1);
            for (s, stage) in stages.iter().enumerate() {
                chat_sessions(&shape, s, stage, stages.len() > 1, &mut out)?;
            }
        } else if let [stage] = stages.as_slice() {
            single_stage(&shape, stage, &mut out)?;
        } else {
            for (s, stage) in stages.iter().enumerate() {
                staged(&shape, s, stage, &mut out)?;
            }
        }
        Ok(out)
    }
}

/// The stages, checked, with their consecutive windows.
fn stages(raw: &[RawStage]) -> Result<Vec<Stage>, Fail> {
    if raw.is_empty() {
        return Err((
            "inference_perf.stages".into(),
            InferencePerfProblem::NoStages,
        ));
    }
    let limit_us = crate::workload::MAX_TIME_NS / 1_000;
    let mut start_us = 0u64;
    let mut out = Vec::with_capacity(raw.len());
    for (i, st) in raw.iter().enumerate() {
        let at = |field: &str| format!("inference_perf.stages[{i}].{field}");
        if !(st.rate.is_finite() && st.rate > 0.0) {
            return Err((at("rate"), InferencePerfProblem::Rate { got: st.rate }));
        }
        let end_us = u64::try_from(st.duration)
            .ok()
            .filter(|&d| d > 0)
            .and_then(|d| d.checked_mul(1_000_000))
            .and_then(|d| d.checked_add(start_us))
            .filter(|&end| end <= limit_us)
            .ok_or_else(|| {
                (
                    at("duration"),
                    InferencePerfProblem::Duration {
                        limit_s: limit_us / 1_000_000,
                        got: st.duration,
                    },
                )
            })?;
        out.push(Stage {
            rate: st.rate,
            start_us,
            end_us,
        });
        start_us = end_us;
    }
    Ok(out)
}

/// What every client of the block shares: its size and its requests.
struct Shape {
    prompts: u64,
    users: u64,
    /// Clients per stage: prompts × users.
    per_stage: u64,
    prefix_length: u32,
    input: LengthDist,
    output: LengthDist,
    output_len: u32,
    /// Each client is one conversation (`enable_multi_turn_chat`).
    multi_turn: bool,
}

impl Shape {
    fn parse(sp: &RawSharedPrefix, num_stages: usize) -> Result<Shape, Fail> {
        let at = |field: &str| format!("inference_perf.shared_prefix.{field}");
        let count = |field: &str, v: i64| {
            u64::try_from(v)
                .ok()
                .filter(|&n| n > 0)
                .ok_or((at(field), InferencePerfProblem::NotPositive { got: v }))
        };
        let prompts = count("num_unique_system_prompts", sp.num_unique_system_prompts)?;
        let users = count(
            "num_users_per_system_prompt",
            sp.num_users_per_system_prompt,
        )?;
        let per_stage = prompts.saturating_mul(users);
        if per_stage.saturating_mul(num_stages as u64) > MAX_CLIENTS {
            return Err((
                at("num_users_per_system_prompt"),
                InferencePerfProblem::TooManyClients {
                    prompts,
                    users,
                    stages: num_stages,
                },
            ));
        }
        let tokens = |field: &str, v: i64, lo: i64| {
            let hi = crate::workload::MAX_TOKENS as i64 - 1;
            match v {
                v if (lo..=hi).contains(&v) => Ok(v as u32),
                got => Err((at(field), InferencePerfProblem::Tokens { lo, hi, got })),
            }
        };
        let prefix_length = match tokens("system_prompt_len", sp.system_prompt_len, 0)? {
            0 => DEFAULT_PREFIX_LENGTH,
            n => n,
        };
        let question = tokens("question_len", sp.question_len, 1)?;
        let output = tokens("output_len", sp.output_len, 1)?;
        Ok(Shape {
            prompts,
            users,
            per_stage,
            prefix_length,
            input: LengthDist::constant_tokens(question),
            output: LengthDist::constant_tokens(output),
            output_len: output,
            multi_turn: sp.enable_multi_turn_chat,
        })
    }

    /// The client of prompt `p`'s user `u`, with `id` and `arrival`.
    fn client(&self, id: String, p: u64, arrival: ArrivalProcess) -> ClientSpec {
        let group = format!("prompt-{p}");
        ClientSpec {
            tenant_id: Some(group.clone()),
            slo_class: Some(SloClass::Standard),
            rate_fraction: 1.0 / self.per_stage as f64,
            prefix_group: Some(group),
            prefix_length: self.prefix_length,
            ..ClientSpec::of_requests(id, arrival, self.input.clone(), self.output.clone())
        }
    }
}

/// One stage: every client sends exactly its even share of `floor(rate × duration)` requests
/// over the stage, in normalised exponential gaps.
fn single_stage(shape: &Shape, stage: &Stage, out: &mut Expansion) -> Result<(), Fail> {
    let duration_us = stage.end_us - stage.start_us;
    let total = (stage.rate * (duration_us / 1_000_000) as f64) as u64;
    if total < shape.per_stage {
        return Err((
            "inference_perf.stages[0]".into(),
            InferencePerfProblem::FewerThanClients {
                total,
                clients: shape.per_stage,
            },
        ));
    }
    let (base, extra) = (total / shape.per_stage, total % shape.per_stage);
    let most = base + u64::from(extra > 0);
    if most > duration_us.min(MAX_CLIENT_REQUESTS) {
        return Err((
            "inference_perf.stages[0]".into(),
            InferencePerfProblem::TooManyPerClient { most },
        ));
    }
    let rate = stage.rate / shape.per_stage as f64;
    let mut k = 0;
    for p in 0..shape.prompts {
        for u in 0..shape.users {
            let count = base + u64::from(k < extra);
            let arrival = ArrivalProcess::NormalizedExponential { count, duration_us };
            out.clients
                .push(shape.client(format!("prompt-{p}-user-{u}"), p, arrival));
            out.rates.push(rate);
            k += 1;
        }
    }
    Ok(())
}

/// Stage `s` of several: its own clients, active only in its window, each Poisson at the
/// stage's rate over the clients.
fn staged(shape: &Shape, s: usize, stage: &Stage, out: &mut Expansion) -> Result<(), Fail> {
    let window = Lifecycle::from_us(&[(stage.start_us, stage.end_us)]).map_err(|e| {
        (
            format!("inference_perf.stages[{s}]"),
            InferencePerfProblem::Window(e),
        )
    })?;
    let rate = stage.rate / shape.per_stage as f64;
    for p in 0..shape.prompts {
        for u in 0..shape.users {
            let id = format!("stage-{s}-prompt-{p}-user-{u}");
            let mut client = shape.client(id, p, ArrivalProcess::Poisson);
            client.lifecycle = Some(window.clone());
            out.clients.push(client);
            out.rates.push(rate);
        }
    }
    Ok(())
}

/// Stage `s` with multi-turn chat: each client is one session of its even share of the
/// stage's `floor(rate × duration)` requests as rounds of fixed length (no context carried
/// over), the first an exponential gap (at `rate / clients`) into the stage, then one every
/// `clients / rate` seconds of think time plus 1 µs per output token (BLIS's
/// `computeReasoningSpec` and its round schedule); a client whose share is 0 is left out.
/// `windowed` (several stages): rounds outside the stage's window are dropped.
fn chat_sessions(
    shape: &Shape,
    s: usize,
    stage: &Stage,
    windowed: bool,
    out: &mut Expansion,
) -> Result<(), Fail> {
    let at = format!("inference_perf.stages[{s}]");
    let total = (stage.rate * ((stage.end_us - stage.start_us) / 1_000_000) as f64) as u64;
    if total == 0 {
        return Err((at, InferencePerfProblem::NoRequest));
    }
    let think_us = (shape.per_stage as f64 / stage.rate * 1e6) as u64;
    let period_us = think_us.saturating_add(u64::from(shape.output_len));
    let window = windowed
        .then(|| Lifecycle::from_us(&[(stage.start_us, stage.end_us)]))
        .transpose()
        .map_err(|e| (at.clone(), InferencePerfProblem::Window(e)))?;
    let (base, extra) = (total / shape.per_stage, total % shape.per_stage);
    let rate = stage.rate / shape.per_stage as f64;
    let mut k = 0;
    for p in 0..shape.prompts {
        for u in 0..shape.users {
            let count = base + u64::from(k < extra);
            k += 1;
            if count == 0 {
                continue;
            }
            let id = match windowed {
                true => format!("stage-{s}-prompt-{p}-user-{u}"),
                false => format!("prompt-{p}-user-{u}"),
            };
            let arrival = ArrivalProcess::Rounds {
                start_us: stage.start_us,
                count,
                period_us,
            };
            let mut client = shape.client(id, p, arrival);
            client.lifecycle = window.clone();
            out.clients.push(client);
            out.rates.push(rate);
        }
    }
    out.total_requests += total;
    Ok(())
}
