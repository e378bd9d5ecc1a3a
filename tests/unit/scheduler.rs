//! Unit tests of `blis_cosim::scheduler`.
mod prompt_hashes;
