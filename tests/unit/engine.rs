//! Unit tests of `blis_cosim::engine`.
mod cluster;
mod eligibility;
mod events;
mod pd;
mod pipeline;
