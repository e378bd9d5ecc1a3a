//! Built-in scenarios: spec files under `examples/scenarios/`, embedded in the binary.

use super::{SpecError, WorkloadSpec};

/// A named, bundled workload spec.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// Name given to `--scenario`.
    pub name: &'static str,
    /// One-line description.
    pub description: &'static str,
    /// The spec's YAML text.
    pub yaml: &'static str,
}

impl Scenario {
    /// Parses the scenario's spec.
    pub fn spec(&self) -> Result<WorkloadSpec, SpecError> {
        WorkloadSpec::from_yaml(self.yaml, &format!("scenario {}", self.name))
    }
}

macro_rules! scenario {
    ($name:literal, $description:literal) => {
        Scenario {
            name: $name,
            description: $description,
            yaml: include_str!(concat!("../../../examples/scenarios/", $name, ".yaml")),
        }
    };
}

/// Every built-in scenario.
pub const SCENARIOS: &[Scenario] = &[
    scenario!(
        "bursty-traffic",
        "one batch client with gamma gaps of cv 3.5: quiet stretches and dense bursts"
    ),
    scenario!(
        "diurnal-cycle",
        "a day in 10 minutes: sinusoidal chat traffic (peak 4x trough) over a batch trickle"
    ),
    scenario!(
        "unfair-tenants",
        "a bulk tenant sends 90% of the load, a latency-sensitive tenant 10%"
    ),
    scenario!(
        "prefix-heavy",
        "80% of the prompts start with the same 512-token system prompt"
    ),
    scenario!(
        "mixed-slo",
        "equal thirds of critical, standard and batch traffic"
    ),
    scenario!(
        "react-search",
        "ReAct agent sessions: reason, web search, observe (5 iterations), then answer"
    ),
    scenario!(
        "mcts-code",
        "tree search: decompose, 4 parallel candidates, evaluate, run tests, refine"
    ),
    scenario!(
        "fork-join-research",
        "plan, then web, database and document tools in parallel, then synthesize"
    ),
    scenario!(
        "coding-assistant",
        "BLIS closed-loop users, lifecycle windows and drain/spike cohorts over two minutes"
    ),
];

/// The built-in scenario called `name`.
pub fn scenario(name: &str) -> Option<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.name == name)
}
