//! blis-cosim: a discrete-event simulator of LLM inference serving.
//!
//! A workload of requests ([`workload`]) is routed ([`router`]) to per-instance
//! continuous-batching schedulers ([`scheduler`]); each formed batch is priced by the
//! instance's [`latency::LatencyBackend`] (or by ASTRA-Sim co-simulation, [`astra`]); the
//! [`engine`] advances a deterministic clock in integer nanoseconds; [`metrics`] turns the
//! finished requests into the per-request CSV and a vLLM-style summary.
//!
//! All simulated time is [`Nanos`]. The same inputs always produce byte-identical outputs.

pub mod astra;
pub mod autoscale;
pub mod calibrate;
pub mod chakra;
pub mod choice;
pub mod cli;
pub mod config;
pub mod control;
pub mod engine;
pub mod evaluation;
pub mod interrupt;
pub mod latency;
pub mod logging;
pub mod metrics;
pub mod observe;
pub mod output;
pub mod paths;
pub mod power;
pub mod router;
pub mod runner;
pub mod scheduler;
pub mod serde_messages;
pub mod setup;
pub mod sweep;
pub mod trace;
pub mod workload;
pub mod yaml;

/// Simulated time and durations, in integer nanoseconds.
pub type Nanos = u64;

/// Bundled data files embedded at build time (see `build.rs`).
pub mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded.rs"));
}
