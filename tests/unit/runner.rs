//! Unit tests of `blis_cosim::runner`.

mod backend;
