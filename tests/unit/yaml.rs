//! Unit tests of `blis_cosim::yaml`.
