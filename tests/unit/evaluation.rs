//! Unit tests of `blis_cosim::evaluation`.

mod identity;
