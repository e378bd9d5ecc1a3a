//! Unit tests of `blis_cosim::config`.
mod cluster;
mod dtype;
mod error;
mod hardware;
mod memory;
mod model;
mod pim;
mod pipeline;
mod placement;
mod release2;
mod roles;
mod topology;
mod vllm_version;
