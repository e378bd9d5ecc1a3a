//! Unit tests of `blis_cosim::router`.
