//! Unrolling a workflow into one node per step instance (fan-out branch, loop iteration),
//! checking that it is acyclic, has one root and a connected loop.

use super::agentic::{LoopSpec, StepSpec};
use super::agentic_error::AgenticError;
use std::collections::BTreeSet;

/// One step instance of an unrolled workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TemplateNode {
    /// Index of its step.
    pub step: u32,
    /// Loop iteration, from 0, for a step of the loop.
    pub iteration: Option<u32>,
    /// Branch, from 0, for a step with `fan_out`.
    pub branch: Option<u32>,
    /// Nodes it waits for, all earlier.
    pub parents: Vec<u32>,
    /// The same step and branch in the previous iteration (for accumulated context).
    pub previous: Option<u32>,
}

/// Steps in dependency order, the lowest index first among those ready; `None` when some
/// steps are left on or behind a cycle (returned in the error as their indices).
fn topological(n: usize, deps: &dyn Fn(usize) -> Vec<usize>) -> Result<Vec<usize>, Vec<usize>> {
    let mut waiting: Vec<usize> = (0..n).map(|s| deps(s).len()).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for s in 0..n {
        for p in deps(s) {
            dependents[p].push(s);
        }
    }
    let mut ready: BTreeSet<usize> = (0..n).filter(|&s| waiting[s] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(s) = ready.pop_first() {
        order.push(s);
        for &d in &dependents[s] {
            waiting[d] -= 1;
            if waiting[d] == 0 {
                ready.insert(d);
            }
        }
    }
    if order.len() == n {
        Ok(order)
    } else {
        Err((0..n).filter(|s| !order.contains(s)).collect())
    }
}

/// Of the steps a topological order left out, those on a cycle (dropping the ones that only
/// follow a cycle).
fn on_cycles(mut stuck: Vec<usize>, deps: &dyn Fn(usize) -> Vec<usize>) -> Vec<usize> {
    loop {
        let kept: Vec<usize> = stuck
            .iter()
            .copied()
            .filter(|&s| stuck.iter().any(|&d| deps(d).contains(&s)))
            .collect();
        if kept.len() == stuck.len() {
            return kept;
        }
        stuck = kept;
    }
}

/// The ids of steps `indices`.
fn names(steps: &[StepSpec], indices: &[usize]) -> Vec<String> {
    indices.iter().map(|&s| steps[s].id.clone()).collect()
}

/// Checks rules 1 (acyclic, loop-back edges aside), 2 (one root) and 5 (a connected loop
/// that no outside step both follows and precedes) and unrolls the workflow.
pub(super) fn unroll(
    steps: &[StepSpec],
    loop_spec: Option<&LoopSpec>,
) -> Result<Vec<TemplateNode>, AgenticError> {
    check_acyclic(steps)?;
    check_one_root(steps)?;
    let body: Vec<usize> = loop_spec.map_or_else(Vec::new, |l| l.over.clone());
    if !body.is_empty() {
        check_connected(steps, &body)?;
    }
    let order = unit_order(steps, &body)?;
    let iterations = loop_spec.map_or(1, |l| l.max_iterations);
    Ok(emit_units(steps, &body, order, iterations))
}

/// Rule 1: no step depends on itself through others (the error names the steps on a cycle).
fn check_acyclic(steps: &[StepSpec]) -> Result<(), AgenticError> {
    let deps = |s: usize| steps[s].depends_on.clone();
    match topological(steps.len(), &deps) {
        Ok(_) => Ok(()),
        Err(stuck) => Err(AgenticError::Cycle {
            steps: names(steps, &on_cycles(stuck, &deps)),
        }),
    }
}

/// Rule 2: exactly one step depends on none.
fn check_one_root(steps: &[StepSpec]) -> Result<(), AgenticError> {
    let roots: Vec<usize> = (0..steps.len())
        .filter(|&s| steps[s].depends_on.is_empty())
        .collect();
    if roots.len() != 1 {
        return Err(AgenticError::Roots {
            steps: names(steps, &roots),
        });
    }
    Ok(())
}

/// The order of the workflow's units, the loop `body` as one unit (index `steps.len()`) among
/// the other steps (whose indices inside the body are left without dependencies); rule 5's
/// error when a step outside the loop both follows and precedes it.
fn unit_order(steps: &[StepSpec], body: &[usize]) -> Result<Vec<usize>, AgenticError> {
    let n = steps.len();
    let in_body = |s: usize| body.contains(&s);
    let unit = |s: usize| if in_body(s) { n } else { s };
    let unit_deps = |u: usize| -> Vec<usize> {
        let members: Vec<usize> = if u == n { body.to_vec() } else { vec![u] };
        let mut deps: Vec<usize> = members
            .iter()
            .flat_map(|&s| steps[s].depends_on.iter().map(|&p| unit(p)))
            .filter(|&p| p != u)
            .collect();
        deps.sort_unstable();
        deps.dedup();
        deps
    };
    let units = if body.is_empty() { n } else { n + 1 };
    let condensed = |u: usize| {
        if u < n && in_body(u) {
            Vec::new()
        } else {
            unit_deps(u)
        }
    };
    topological(units, &condensed).map_err(|stuck| {
        let outside: Vec<usize> = on_cycles(stuck, &condensed)
            .into_iter()
            .filter(|&s| s < n)
            .collect();
        AgenticError::AroundLoop {
            steps: names(steps, &outside),
        }
    })
}

/// The nodes of the units in `order`: a step's instances, or the loop's `iterations`.
fn emit_units(
    steps: &[StepSpec],
    body: &[usize],
    order: Vec<usize>,
    iterations: u32,
) -> Vec<TemplateNode> {
    let n = steps.len();
    let mut nodes = Vec::new();
    // The current instances of each step (for loop steps: of the latest iteration).
    let mut instances: Vec<Vec<u32>> = vec![Vec::new(); n];
    for u in order {
        if u < n && body.contains(&u) {
            continue;
        }
        if u < n {
            emit(&mut nodes, &mut instances, steps, u, None, Vec::new());
        } else {
            emit_loop(&mut nodes, &mut instances, steps, body, iterations);
        }
    }
    nodes
}

/// Appends the loop's `iterations`, its steps in dependency order in each; the steps that
/// start an iteration wait for the previous iteration's exits (steps nothing in the loop
/// waits for).
fn emit_loop(
    nodes: &mut Vec<TemplateNode>,
    instances: &mut [Vec<u32>],
    steps: &[StepSpec],
    body: &[usize],
    iterations: u32,
) {
    let inner = |s: usize| -> Vec<usize> {
        steps[s]
            .depends_on
            .iter()
            .copied()
            .filter(|p| body.contains(p))
            .collect()
    };
    let body_order: Vec<usize> = topological(body.len(), &|i| {
        inner(body[i])
            .iter()
            .map(|p| body.iter().position(|b| b == p).expect("in the body"))
            .collect()
    })
    .expect("the steps are acyclic")
    .into_iter()
    .map(|i| body[i])
    .collect();
    let exits: Vec<usize> = body
        .iter()
        .copied()
        .filter(|&s| !body.iter().any(|&d| inner(d).contains(&s)))
        .collect();
    for k in 0..iterations {
        let previous_exits: Vec<u32> = if k == 0 {
            Vec::new()
        } else {
            exits.iter().flat_map(|&s| instances[s].clone()).collect()
        };
        for &s in &body_order {
            let entry_parents = if inner(s).is_empty() {
                previous_exits.clone()
            } else {
                Vec::new()
            };
            emit(nodes, instances, steps, s, Some(k), entry_parents);
        }
    }
}

/// Appends the instances of step `s` (in `iteration`), waiting for the current instances of
/// its dependencies and for `extra`.
fn emit(
    nodes: &mut Vec<TemplateNode>,
    instances: &mut [Vec<u32>],
    steps: &[StepSpec],
    s: usize,
    iteration: Option<u32>,
    extra: Vec<u32>,
) {
    let mut parents: Vec<u32> = steps[s]
        .depends_on
        .iter()
        .flat_map(|&p| instances[p].iter().copied())
        .collect();
    parents.extend(extra);
    let fan_out = steps[s].fan_out;
    let previous = std::mem::take(&mut instances[s]);
    for b in 0..fan_out {
        instances[s].push(nodes.len() as u32);
        nodes.push(TemplateNode {
            step: s as u32,
            iteration,
            branch: (fan_out > 1).then_some(b),
            parents: parents.clone(),
            previous: iteration.and_then(|_| previous.get(b as usize).copied()),
        });
    }
}

/// Rule 5: the loop's steps are linked by depends_on (either way) into one piece.
fn check_connected(steps: &[StepSpec], body: &[usize]) -> Result<(), AgenticError> {
    let mut reached = vec![body[0]];
    let mut frontier = vec![body[0]];
    while let Some(s) = frontier.pop() {
        for &o in body {
            let linked = steps[s].depends_on.contains(&o) || steps[o].depends_on.contains(&s);
            if linked && !reached.contains(&o) {
                reached.push(o);
                frontier.push(o);
            }
        }
    }
    let apart: Vec<usize> = body
        .iter()
        .copied()
        .filter(|s| !reached.contains(s))
        .collect();
    if apart.is_empty() {
        Ok(())
    } else {
        Err(AgenticError::LoopApart {
            first: steps[body[0]].id.clone(),
            apart: names(steps, &apart),
        })
    }
}
