//! Closed-loop clients (BLIS `concurrency`, `think_time_us`): how many requests each user
//! sends.
//!
//! A user is a session: a chain of requests, each arriving one think time after the previous
//! one completes (the conversation mechanism, so the engine needs nothing new), planned whole
//! when its first request is due. Its length is fixed before the run:
//! - with `num_requests` N, the users share what the open-loop clients leave of N (BLIS's
//!   follow-up budget), split evenly in user order (client order, then user index; the first
//!   `remainder` users get one more). BLIS hands the same budget out at run time, first come
//!   first served, so there fast users take more of it;
//! - with a `horizon`, a user sends no request at or after it: it plans at most the turns
//!   whose earliest arrival (its first arrival plus one think time per turn) is before the
//!   horizon, and the session's deadline (the horizon) cuts those the run delays past it.

use super::generate::Generator;
use super::limits::{MAX_SESSION_STEPS, PlanProblem};
use super::{Overrides, SpecError, WorkloadSpec};

/// The turns of every user of every client (empty vectors for open-loop clients; an empty
/// result when no client is closed-loop).
pub(super) fn user_turns(
    spec: &WorkloadSpec,
    overrides: Overrides,
) -> Result<Vec<Vec<u32>>, SpecError> {
    let users: u64 = spec
        .clients
        .iter()
        .filter_map(|c| c.closed_loop.as_ref())
        .map(|c| u64::from(c.users))
        .sum();
    if users == 0 {
        return Ok(Vec::new());
    }
    let invalid = |path: String, problem: PlanProblem| SpecError::Plan {
        source_name: spec.source_name.clone(),
        path,
        problem,
    };
    let budget = match overrides.num_requests.or(spec.num_requests) {
        None => None,
        Some(n) => Some(n.saturating_sub(open_loop_arrivals(spec, overrides)?)),
    };
    let horizon_ns = spec.horizon_us.map(|h| h.saturating_mul(1000));
    let mut global = 0u64;
    let mut out = Vec::with_capacity(spec.clients.len());
    for (i, c) in spec.clients.iter().enumerate() {
        let Some(loop_) = &c.closed_loop else {
            out.push(Vec::new());
            continue;
        };
        // Turns are bounded by the shortest think time.
        let think_ns = u64::from(loop_.think.min_us()) * 1000;
        let mut turns = Vec::with_capacity(loop_.users as usize);
        for u in 0..loop_.users {
            let share = budget.map(|b| b / users + u64::from(global < b % users));
            global += 1;
            let first = loop_.first_arrival_ns(u);
            let by_horizon = match (horizon_ns, think_ns) {
                (None, _) => None,
                (Some(h), _) if first >= h => Some(0),
                (Some(_), 0) => None,
                (Some(h), t) => Some((h - first).div_ceil(t)),
            };
            let k = match (share, by_horizon) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) | (None, Some(a)) => a,
                (None, None) => {
                    return Err(invalid(
                        format!("clients[{i}].think_time_us"),
                        PlanProblem::UnboundedUsers {
                            client: c.id.clone(),
                        },
                    ));
                }
            };
            if k > MAX_SESSION_STEPS {
                return Err(invalid(
                    format!("clients[{i}].concurrency"),
                    PlanProblem::UserRequests {
                        client: c.id.clone(),
                        planned: k,
                    },
                ));
            }
            turns.push(k as u32);
        }
        out.push(turns);
    }
    let planned: u64 = out.iter().flatten().map(|&k| u64::from(k)).sum();
    let limit = overrides
        .max_requests
        .unwrap_or(super::limits::DEFAULT_MAX_REQUESTS);
    if planned > limit {
        return Err(invalid(
            "clients".into(),
            PlanProblem::ClosedLoopRequests { planned, limit },
        ));
    }
    Ok(out)
}

/// The arrivals of the open-loop clients (BLIS keeps them first within `num_requests`).
fn open_loop_arrivals(spec: &WorkloadSpec, overrides: Overrides) -> Result<u64, SpecError> {
    if spec.clients.iter().all(|c| c.closed_loop.is_some()) {
        return Ok(0);
    }
    let turns = spec.clients.iter().map(|_| Vec::new()).collect();
    Ok(Generator::with_turns(spec, overrides, turns)?.count() as u64)
}
