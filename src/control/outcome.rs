//! How a request ends when it is not served: the outcome, the stage and the policy.

use std::fmt;

/// How a request that was not served ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    /// Refused outright (admission, a full gateway queue, the router).
    Rejected,
    /// Dropped to protect more urgent traffic (`tier-shed`, over-quota tenants).
    Shed,
    /// Waited in the gateway queue longer than its time to live.
    Expired,
    /// Not completed within its own timeout of its arrival (the client gave up, wherever
    /// the request was).
    TimedOut,
}

impl Outcome {
    /// Lower-case name, as reported.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Rejected => "rejected",
            Outcome::Shed => "shed",
            Outcome::Expired => "expired",
            Outcome::TimedOut => "timed out",
        }
    }
}

/// The stage of the control plane where a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// The admission policy (`--admission-policy`).
    Admission,
    /// The gateway queue (`--flow-control`): full, or the request's TTL ran out.
    FlowControl,
    /// The router.
    Routing,
    /// An instance: its waiting queue or its running batch.
    Instance,
    /// The KV transfer from a prefill to a decode instance.
    Transfer,
    /// The autoscaler: an `immediate` drain dropped the request (`crate::autoscale`).
    Autoscaler,
}

impl Stage {
    /// Name, as reported.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Admission => "admission",
            Stage::FlowControl => "flow-control",
            Stage::Routing => "routing",
            Stage::Instance => "instance",
            Stage::Transfer => "kv-transfer",
            Stage::Autoscaler => "autoscaler",
        }
    }
}

/// Why a request ended without being served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dropped {
    /// How it ended.
    pub outcome: Outcome,
    /// Where.
    pub stage: Stage,
    /// Which policy or limit decided it (`token-bucket`, `max-depth`, `ttl`, ...).
    pub policy: &'static str,
}

impl Dropped {
    /// Rejected at `stage` by `policy`.
    pub fn rejected(stage: Stage, policy: &'static str) -> Dropped {
        Dropped {
            outcome: Outcome::Rejected,
            stage,
            policy,
        }
    }

    /// Shed at `stage` by `policy`.
    pub fn shed(stage: Stage, policy: &'static str) -> Dropped {
        Dropped {
            outcome: Outcome::Shed,
            stage,
            policy,
        }
    }
}

impl Dropped {
    /// Timed out at `stage` (its client's timeout ran out there).
    pub fn timed_out(stage: Stage) -> Dropped {
        Dropped {
            outcome: Outcome::TimedOut,
            stage,
            policy: "timeout",
        }
    }
}

impl fmt::Display for Dropped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at {} ({})",
            self.outcome.name(),
            self.stage.name(),
            self.policy
        )
    }
}
