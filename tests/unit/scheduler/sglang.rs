//! Unit tests of `blis_cosim::scheduler::sglang`.
mod keys;
mod radix;
mod tests;
