//! The shared data's RTXPRO6000 profile bundles, loaded as the no-allocation tests use them
//! (bf16, no kv-fp8, max-num-batched-tokens 2048, max-num-seqs 256, no collectives).

use blis_cosim::config::{Dtype, ModelArch};
use blis_cosim::latency::{Collectives, ProfileDb, ProfileSpec};
use std::path::PathBuf;

pub(crate) use crate::shared_data;

/// The shared data folder (see `shared_data.rs`).
pub fn data_dir() -> PathBuf {
    shared_data::shared_path("")
}

/// The RTXPRO6000 bundle of `model` at tensor parallelism `tp`.
pub fn rtxpro6000_db(model: &ModelArch, tp: u32) -> ProfileDb {
    ProfileDb::load(&ProfileSpec {
        root: &data_dir().join("profiler/perf"),
        hardware: "RTXPRO6000",
        model,
        dtype: Dtype::Bfloat16,
        kv_cache_fp8: false,
        tp,
        architecture: None,
        max_num_batched_tokens: 2048,
        max_num_seqs: Some(256),
        collectives: Collectives::NONE,
    })
    .unwrap()
}
