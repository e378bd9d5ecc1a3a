//! The autoscaler's decisions as the decision trace records them (`--trace-level`): each
//! scaling action with the signals that triggered it, and each replica's change of state.
//! Noted only when the run traces ([`super::Autoscaler::trace_decisions`]).

use super::fleet::ReplicaState;
use super::policy::Observation;
use crate::Nanos;

/// A scaling action of one template (pool) at a tick.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaleAction {
    pub t: Nanos,
    /// The pool's index (templates in configuration order).
    pub pool: u32,
    /// Up (replicas started) or down (replicas cancelled or drained).
    pub up: bool,
    /// Replicas up or coming up before and after the action.
    pub from: u32,
    pub to: u32,
    /// What the policy asked for at this tick, within the bounds (the stabilization windows
    /// and cooldown then gave `to`, capped by the free slots).
    pub desired: u32,
    /// What the policy saw.
    pub signals: Observation,
}

/// What the autoscaler noted for the trace, in the order it happened.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ScaleNote {
    /// A scaling action.
    Action(ScaleAction),
    /// Replica `instance` moved from `from` to `to` at `t`.
    Replica {
        t: Nanos,
        instance: u32,
        from: ReplicaState,
        to: ReplicaState,
    },
}
