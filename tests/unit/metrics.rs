//! Unit tests of `blis_cosim::metrics`.

mod anomalies;
mod count_log;
mod csv_out;
mod fitness;
mod plots;
mod run_settings;
mod slo;
mod sorted_blocks;
mod stats;
mod summary;
mod timeseries;
mod validate;
