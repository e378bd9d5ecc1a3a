//! Unit tests of `blis_cosim::workload`.
