//! Unit tests of `blis_cosim::engine::cluster`.
mod effects;
mod tests;
