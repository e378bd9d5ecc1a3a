//! The KV-cache memory model (vLLM semantics, as LLMServingSim computes it).

use super::{ConfigError, Dtype, ModelArch};

/// What determines KV capacity on one GPU of an instance.
#[derive(Debug, Clone, PartialEq)]
pub struct KvSizing {
    /// Device memory, GiB.
    pub memory_gib: f64,
    /// Fraction of device memory vLLM may use, in (0, 1] (`--npu-memory-utilization`).
    pub utilization: f64,
    /// Tokens per KV block (`--block-size`).
    pub block_size: u32,
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Weight dtype.
    pub dtype: Dtype,
    /// KV-cache dtype (equal to `dtype` unless an fp8 KV cache is used).
    pub kv_dtype: Dtype,
}

/// KV-cache capacity of one instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvCapacity {
    /// Weight bytes held by the most loaded GPU.
    pub weight_bytes: u64,
    /// KV bytes per token on one GPU.
    pub kv_bytes_per_token: u64,
    /// Tokens per block.
    pub block_size: u32,
    /// Number of KV blocks.
    pub num_blocks: u64,
}

/// Computes weight bytes per GPU, KV bytes per token per GPU and the number of KV blocks:
/// `floor((memory × utilization − weights) / (block_size × kv_bytes_per_token))`.
pub fn kv_capacity(model: &ModelArch, sizing: &KvSizing) -> Result<KvCapacity, ConfigError> {
    todo!("{model:?}{sizing:?}")
}
