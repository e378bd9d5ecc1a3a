//! Nothing: this package holds the library's unit tests (`main.rs`, the `unit` harness).
