//! Unit tests of `blis_cosim::control`.
