//! Unit tests of `blis_cosim::router`.
mod rank_tests;
mod scorer_tests;
mod tests;
