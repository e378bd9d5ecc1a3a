//! Unit tests of `blis_cosim::autoscale`.
