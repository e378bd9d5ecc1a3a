//! Unit tests of `blis_cosim::output`.
