//! Unit tests of `blis_cosim::workload`.

mod azure;
mod blocks;
mod classes;
mod sessions;
mod spec;
mod trace_scenarios;
