//! Unit tests of `blis_cosim::scheduler`.
