//! Unit tests of `blis_cosim::config`.
