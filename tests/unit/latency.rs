//! Unit tests of `blis_cosim::latency`.

mod profile;
mod roofline;
