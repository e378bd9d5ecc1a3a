//! Unit tests of `blis_cosim::autoscale`.
mod report;
mod tests;
