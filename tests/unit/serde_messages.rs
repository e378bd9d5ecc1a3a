//! Unit tests of `blis_cosim::serde_messages`.
