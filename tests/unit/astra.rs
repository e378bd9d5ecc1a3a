//! Unit tests of `blis_cosim::astra`.
