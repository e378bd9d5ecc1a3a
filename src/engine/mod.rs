//! The discrete-event loop.
