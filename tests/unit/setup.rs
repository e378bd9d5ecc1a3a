//! Unit tests of `blis_cosim::setup`.

mod batch_limits;
mod instances;
mod pipeline;
mod placement;
mod quick;
mod sglang;
mod threads;
