//! Unit tests of `blis_cosim::metrics`.
