//! Unit tests of `blis_cosim::engine::cluster`.
mod effects;
mod streamed_ahead;
mod tests;
