//! Unit tests of `blis_cosim::runner`.

mod backend;
mod huge_pages;
