//! Unit tests of `blis_cosim::choice`.
