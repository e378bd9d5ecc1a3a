//! Unit tests of `blis_cosim::setup`.
