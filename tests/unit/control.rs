//! Unit tests of `blis_cosim::control`.
mod export;
mod section;
mod tests;
