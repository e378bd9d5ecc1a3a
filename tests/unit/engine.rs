//! Unit tests of `blis_cosim::engine`.
