//! Size limits of a spec, checked before anything is generated: a session's step instances
//! and dependencies, and the requests a spec plans. A spec beyond them would fill the memory
//! or the disk rather than describe a workload.

use super::agentic::{LoopSpec, StepSpec};

/// Most step instances (fan-out branches, loop iterations, turns) in one session.
pub const MAX_SESSION_STEPS: u64 = 100_000;
/// Most dependencies between the step instances of one session (a fan-out step waiting for
/// another has one per pair of branches).
pub const MAX_SESSION_DEPENDENCIES: u64 = 1_000_000;
/// Most token ids drawn for the calls (and tool outputs) of one generated session, 8 MiB of
/// them (a session whose context grows by 10,000 tokens a call reaches it at its 20th call).
/// A call carries its whole context's ids, so a session draws ids quadratic in its length;
/// past this, its later calls carry none (the prefix cache does not look their prompts up),
/// with a warning. A session's plan is held whole, so this bounds its memory.
pub const MAX_SESSION_TOKEN_IDS: usize = 1 << 21;
/// Most arrivals a spec may plan unless `--max-requests` raises it.
pub const DEFAULT_MAX_REQUESTS: u64 = 10_000_000;

/// The step instances and dependencies of one session of a workflow, refused past the limits.
pub(super) fn check_workflow(
    steps: &[StepSpec],
    loop_spec: Option<&LoopSpec>,
) -> Result<(), LimitError> {
    let iterations = |s: usize| {
        loop_spec
            .filter(|l| l.over.contains(&s))
            .map_or(1, |l| u128::from(l.max_iterations))
    };
    let instances = |s: usize| u128::from(steps[s].fan_out) * iterations(s);
    let nodes: u128 = (0..steps.len()).map(instances).sum();
    let edges: u128 = (0..steps.len())
        .map(|s| {
            let parents: u128 = steps[s]
                .depends_on
                .iter()
                .map(|&d| u128::from(steps[d].fan_out))
                .sum();
            instances(s) * parents
        })
        .sum();
    if nodes > u128::from(MAX_SESSION_STEPS) {
        return Err(LimitError::StepInstances { nodes });
    }
    if edges > u128::from(MAX_SESSION_DEPENDENCIES) {
        return Err(LimitError::Dependencies { edges });
    }
    Ok(())
}

/// A conversation's most turns, refused past [`MAX_SESSION_STEPS`]; `field` names it.
pub(super) fn check_turns(field: &'static str, turns: u32) -> Result<(), LimitError> {
    if u64::from(turns) > MAX_SESSION_STEPS {
        return Err(LimitError::Turns { field, turns });
    }
    Ok(())
}

/// A session past the limits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// A workflow with too many step instances.
    #[error(
        "agentic: a session would have {nodes} step instances (fan_out × loop iterations, \
         summed over the steps); at most {MAX_SESSION_STEPS}"
    )]
    StepInstances { nodes: u128 },
    /// A workflow with too many dependencies between its step instances.
    #[error(
        "agentic: a session would have {edges} dependencies between its step instances (each \
         fan_out branch waits for every branch of the steps it depends on); at most \
         {MAX_SESSION_DEPENDENCIES}"
    )]
    Dependencies { edges: u128 },
    /// A conversation with too many turns (`field`: the field that sets them).
    #[error("{field} is {turns}; at most {MAX_SESSION_STEPS}")]
    Turns { field: &'static str, turns: u32 },
}

/// The arrivals a spec plans: `num_requests`, else (or when fewer) those it plans by time
/// (`by_time`: its rates over its horizon or windows, and the field that sets them); refused
/// past `limit`, with the field that plans them.
pub(super) fn check_requests(
    num_requests: Option<u64>,
    by_time: Option<(f64, &'static str)>,
    limit: u64,
) -> Result<(), (&'static str, PlanProblem)> {
    let (field, planned) = match (num_requests, by_time) {
        (Some(n), Some((h, field))) if h < n as f64 => (field, h),
        (Some(n), _) => ("num_requests", n as f64),
        (None, Some((h, field))) => (field, h),
        (None, None) => return Ok(()),
    };
    if planned > limit as f64 {
        return Err((field, PlanProblem::Requests { planned, limit }));
    }
    Ok(())
}

/// A spec that parses but whose generation would not end, would plan past a limit, or plans
/// nothing; [`super::SpecError::Plan`] names the field. Each variant renders to the message
/// after the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanProblem {
    /// Neither `num_requests`, a horizon nor windows on every client ends the generation.
    #[error("give num_requests or horizon (or --num-requests) so that generation ends")]
    NoEnd,
    /// About `planned` requests (rounded when shown), past the limit.
    #[error(
        "the spec plans about {planned:.0} requests, more than the limit of {limit}; raise it \
         with --max-requests"
    )]
    Requests { planned: f64, limit: u64 },
    /// A lifecycle window that plans more arrivals than the limit.
    #[error(
        "plans {planned} arrivals (⌈trace rate × duration⌉), more than the limit of {limit}; \
         raise it with --max-requests"
    )]
    WindowArrivals { planned: u64, limit: u64 },
    /// A client drawing more arrivals outside its lifecycle windows than the limit.
    #[error(
        "draws {drawn} arrivals outside its windows (⌈rate × time outside them before the \
         last ends⌉; they are drawn and dropped, whatever num_requests says), more than the \
         limit of {limit}; lower its rate, or raise the limit with --max-requests"
    )]
    DroppedArrivals { drawn: u64, limit: u64 },
    /// Closed-loop users whose think time can be 0, with nothing bounding their requests.
    #[error(
        "client `{client}`: closed-loop users whose think time can be 0 need num_requests (or \
         --num-requests) to bound their requests: each user's requests are planned before the \
         run"
    )]
    UnboundedUsers { client: String },
    /// A closed-loop user planning more requests than a session may hold.
    #[error(
        "client `{client}`: a user would plan {planned} requests, at most {MAX_SESSION_STEPS}; \
         lower num_requests or the horizon, or add users"
    )]
    UserRequests { client: String, planned: u64 },
    /// Closed-loop users planning more requests, together, than the limit.
    #[error(
        "the closed-loop users plan {planned} requests, more than the limit of {limit}; raise \
         it with --max-requests"
    )]
    ClosedLoopRequests { planned: u64, limit: u64 },
    /// No request arrives before the horizon (µs).
    #[error("no request arrives before the horizon ({horizon_us} µs)")]
    NothingBeforeHorizon { horizon_us: u64 },
    /// A spec without a horizon that generates nothing.
    #[error("the spec generates no request")]
    NothingGenerated,
    /// A client generating sessions, given to the generator of flat requests.
    #[error("client `{client}` generates sessions; generate the workload with generate_workload")]
    Sessions { client: String },
}
