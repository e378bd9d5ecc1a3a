//! Unit tests of `blis_cosim::sweep`.
