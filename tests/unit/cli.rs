//! Unit tests of `blis_cosim::cli`.
