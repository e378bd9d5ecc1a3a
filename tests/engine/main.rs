//! The engine, cluster, scheduler and control plane through the library, on hand-timed
//! clusters with a linear test backend: invariants, P/D, DP, PP, timeouts, autoscaling,
//! routing signals, the lower tier, sessions.

#[path = "../common/autoscale_config.rs"]
mod autoscale_config;
#[path = "../common/cluster_fixture.rs"]
mod cluster_fixture;

mod agentic_run;
mod async_scheduling;
mod autoscale;
mod autoscale_pd;
mod cluster;
mod control_engine;
mod dp;
mod engine_cluster;
mod engine_inject;
mod invariants;
mod lower_tier;
mod pd;
mod pd_decode_side;
mod pd_sessions;
mod pipeline;
mod routing_signals;
mod scheduler;
mod streamed_sessions;
mod timeouts;
