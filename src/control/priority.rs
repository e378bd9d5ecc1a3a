//! Priority (`--priority-policy`): the number that orders requests in the gateway queue and
//! on the instances (higher is more urgent). Computed once, when the request is admitted.

use super::section::Policy;
use crate::Nanos;
use crate::choice::Choice;
use crate::workload::{Request, RequestClasses};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// BLIS's (GAIE's) priorities of the SLO classes: critical 4, standard 3, batch −1,
/// sheddable −2, background −3; any other class (and none) is standard. Negative =
/// sheddable.
pub fn default_class_priority(class: &str) -> i32 {
    match class {
        "critical" => 4,
        "batch" => -1,
        "sheddable" => -2,
        "background" => -3,
        _ => 3,
    }
}

/// The priority policies (`--priority-policy`, the bundle's `priority`), each with its
/// parameters.
#[derive(
    Debug,
    Clone,
    PartialEq,
    Default,
    Serialize,
    Deserialize,
    strum::EnumIter,
    strum::EnumMessage,
    strum::IntoStaticStr,
)]
#[serde(tag = "type", content = "params", rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum PriorityPolicy {
    /// A request's own priority, else its SLO class's (the class map, overridable with
    /// `slo_priorities`).
    #[default]
    #[strum(to_string = "static", serialize = "slo-class")]
    Static,
    /// Every request gets the same priority (`value`).
    Constant(ConstantParams),
    /// The seed's template: critical requests `realtime_score`, batch, sheddable and
    /// background ones `batch_score`, the others `default_score`.
    SloBased(SloBasedParams),
    /// Each tenant's priority (`tenant_priorities`); unnamed tenants get `value`.
    TenantPriority(TenantPriorityParams),
    /// Earliest deadline first: minus the deadline in ms (arrival + SLO target); requests
    /// without a target are least urgent.
    DeadlineAware,
    /// The static priority negated (pathological, for testing).
    InvertedSlo,
}

impl Choice for PriorityPolicy {
    const WHAT: &'static str = "priority policy";
    fn name(&self) -> &'static str {
        self.into()
    }
}

impl Policy for PriorityPolicy {}

/// `constant`'s parameter.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConstantParams {
    /// The priority of every request.
    pub value: i32,
}

/// `slo-based`'s parameters (the seed's template).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SloBasedParams {
    /// Priority of critical requests.
    pub realtime_score: i32,
    /// Priority of batch, sheddable and background requests.
    pub batch_score: i32,
    /// Priority of the others.
    pub default_score: i32,
}

impl Default for SloBasedParams {
    fn default() -> SloBasedParams {
        SloBasedParams {
            realtime_score: 100,
            batch_score: 10,
            default_score: 50,
        }
    }
}

/// `tenant-priority`'s parameters.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TenantPriorityParams {
    /// Each named tenant's priority.
    pub tenant_priorities: BTreeMap<String, i32>,
    /// The priority of unnamed tenants.
    pub value: i32,
}

/// What a priority policy looks at: the request's class's static priority, its own
/// priority, class name, tenant name and deadline.
#[derive(Debug, Clone, Copy)]
pub struct PriorityInput<'a> {
    /// The class's priority in the (overridden) class map.
    pub class_priority: i32,
    /// The request's own priority, if it has one.
    pub own: Option<i32>,
    /// Its SLO class name.
    pub class: &'a str,
    /// Its tenant name.
    pub tenant: &'a str,
    /// Arrival + SLO target, if it has a target.
    pub deadline_ns: Option<Nanos>,
}

impl PriorityPolicy {
    /// The priority of a request.
    pub fn priority(&self, input: &PriorityInput<'_>) -> i32 {
        let static_priority = input.own.unwrap_or(input.class_priority);
        match self {
            PriorityPolicy::Static => static_priority,
            PriorityPolicy::Constant(p) => p.value,
            PriorityPolicy::SloBased(p) => match input.class {
                "critical" => p.realtime_score,
                "batch" | "sheddable" | "background" => p.batch_score,
                _ => p.default_score,
            },
            PriorityPolicy::TenantPriority(p) => p
                .tenant_priorities
                .get(input.tenant)
                .copied()
                .unwrap_or(p.value),
            PriorityPolicy::DeadlineAware => match input.deadline_ns {
                Some(d) => i32::try_from(d / 1_000_000).map_or(i32::MIN + 1, |ms| -ms),
                None => i32::MIN,
            },
            PriorityPolicy::InvertedSlo => static_priority.saturating_neg(),
        }
    }
}

/// Each SLO class's priority in the class map (the defaults of [`default_class_priority`],
/// overridden by `slo_priorities`), by class index.
pub fn class_priorities(classes: &RequestClasses, slo_priorities: &[(String, i32)]) -> Vec<i32> {
    classes
        .classes()
        .iter()
        .map(|c| {
            let overridden = slo_priorities.iter().find(|(n, _)| n == c);
            overridden.map_or_else(|| default_class_priority(c), |o| o.1)
        })
        .collect()
}

/// A request's nominal urgency: its own priority, else its SLO class's in the class map,
/// whatever the run's priority policy makes of it. The anomaly counters judge priority
/// inversions by it.
#[derive(Debug, Clone, Default)]
pub struct NominalPriority {
    classes: RequestClasses,
    class_priority: Vec<i32>,
}

impl NominalPriority {
    /// The nominal urgencies of a workload whose requests belong to `classes`.
    pub fn new(classes: Option<&RequestClasses>, slo_priorities: &[(String, i32)]) -> Self {
        let classes = classes.cloned().unwrap_or_default();
        let class_priority = class_priorities(&classes, slo_priorities);
        NominalPriority {
            classes,
            class_priority,
        }
    }

    /// The nominal urgency of `request` (standard, 3, without a class).
    pub fn of(&self, request: &Request) -> i32 {
        let Some(p) = self.classes.labels(request.id) else {
            return default_class_priority("");
        };
        let class = self.class_priority.get(p.class as usize).copied();
        p.extras.priority.or(class).unwrap_or(3)
    }
}
