//! Unit tests of `blis_cosim::setup`.

mod batch_limits;
mod instances;
mod placement;
mod quick;
mod sglang;
mod threads;
