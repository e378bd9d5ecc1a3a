//! Unit tests of `blis_cosim::calibrate`.
