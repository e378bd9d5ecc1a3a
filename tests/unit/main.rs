//! The library's unit tests, one module per library module. They live in this harness rather
//! than beside the code so that a cold `cargo test --release` compiles the library once
//! instead of twice (once as the library, once with its unit tests).

/// The repository's root, as a literal (`tests/` is a package of its own, a folder down).
macro_rules! root {
    () => {
        concat!(env!("CARGO_MANIFEST_DIR"), "/..")
    };
}

#[path = "../common/cluster_fixture.rs"]
mod cluster_fixture;
#[path = "../common/shared_data.rs"]
mod shared_data;

mod astra;
mod autoscale;
mod calibrate;
mod chakra;
mod choice;
mod cli;
mod config;
mod control;
mod engine;
mod evaluation;
mod latency;
mod metrics;
mod module_graph;
mod output;
mod paths;
mod power;
mod router;
mod runner;
mod scheduler;
mod serde_messages;
mod setup;
mod sweep;
mod workload;
mod yaml;
