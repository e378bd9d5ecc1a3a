//! Unit tests of `blis_cosim::scheduler`.
mod itl;
mod kv;
mod kv_offload;
mod lower_tier;
mod sglang;
mod stretch;
