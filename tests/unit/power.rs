//! Unit tests of `blis_cosim::power`.
