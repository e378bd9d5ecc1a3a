//! Unit tests of `blis_cosim::paths`.
