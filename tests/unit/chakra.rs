//! Unit tests of `blis_cosim::chakra`.
