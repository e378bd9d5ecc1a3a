//! Autoscaling: replicas that come and go with the load, what their lives take and what they
//! cost (`autoscale:` in `--policy-config`, `--autoscale*` flags).
//!
//! With autoscaling on, each instance the run's configuration describes is a *template*;
//! the run gets `max_replicas` replica slots of each (instance ids template by template),
//! `initial_replicas` of them ready at time 0 and the rest off. Every `interval` of
//! simulated time the [`Autoscaler`] ticks: each template's policy ([`Policy`]) looks at its
//! ready replicas through the run's signals, as stale as the router sees them, and asks for
//! a replica count; the count is bounded to `[min_replicas, max_replicas]`, stabilized
//! (a scale-up goes to the lowest count asked for over the up window, a scale-down to the
//! highest over the down window) and held during the cooldown after an action.
//!
//! A replica asked for lives `pending` (a provisioning delay drawn from its own seeded
//! stream) → `loading` (weight bytes per GPU / the load bandwidth) → `warming_up` (CUDA-graph
//! capture, [`DEFAULT_WARMUP_NS`]) → `ready` → `draining` → `off`. Only ready replicas are
//! routed to. A scale-down first cancels replicas still starting, then drains ready ones
//! (highest ids first) by the drain mode ([`DrainMode`]). The time every replica spends in
//! every state is accounted, and priced per GPU-hour ([`AutoscaleReport`]).

mod config;
mod fleet;
mod notes;
mod policy;
mod report;

pub(crate) use config::RawAutoscale;
pub use config::{
    AutoscaleConfig, AutoscalePolicy, AutoscaleSettings, DEFAULT_LOAD_BANDWIDTH_GBPS,
    DEFAULT_WARMUP_NS, DrainMode, QueueDepthParams, SaturationParams, SloParams,
    TargetUtilizationParams, ThresholdParams,
};
pub use fleet::{Autoscaler, Change, ReplicaState, ReplicaTemplate, ScaleCounts};
pub use notes::{ScaleAction, ScaleNote};
pub use policy::{Observation, Policy};
pub use report::{AutoscaleReport, PoolCost, ReplicaTimeline, ScaleSample, StateChange, cost_text};
