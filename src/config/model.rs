//! Model architectures, read from HuggingFace `config.json` files.

use super::{ConfigError, Dtype};

/// Mixture-of-experts facts of a model.
#[derive(Debug, Clone, PartialEq)]
pub struct MoeArch {
    /// Routed experts per MoE layer (`num_local_experts` or `num_experts`).
    pub num_experts: u64,
    /// Experts activated per token (`num_experts_per_tok`).
    pub top_k: u64,
    /// FFN width of one expert (`moe_intermediate_size`, else `intermediate_size`).
    pub moe_intermediate_size: u64,
}

/// The architecture facts needed for compute and memory.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelArch {
    /// Display name, as in the CSV `model` column (e.g. `meta-llama/Llama-3.1-8B`).
    pub name: String,
    /// HuggingFace `model_type` (`llama`, `qwen3`, `qwen3_moe`, `mixtral`, ...).
    pub model_type: String,
    pub hidden_size: u64,
    pub num_layers: u64,
    pub num_heads: u64,
    pub num_kv_heads: u64,
    pub head_dim: u64,
    /// Dense FFN width.
    pub intermediate_size: u64,
    pub vocab_size: u64,
    pub max_position_embeddings: u64,
    /// Default dtype from `torch_dtype`.
    pub torch_dtype: Option<Dtype>,
    pub moe: Option<MoeArch>,
}

impl ModelArch {
    /// Resolves `spec` as a bundled model name (case-insensitive, with or without the
    /// organisation, e.g. `Llama-3.1-8B` or `meta-llama/Llama-3.1-8B`) or as a path to a
    /// HuggingFace `config.json`.
    pub fn resolve(spec: &str) -> Result<ModelArch, ConfigError> {
        todo!("{spec}")
    }

    /// Parses a HuggingFace `config.json`. `source_name` is used in error messages;
    /// `default_name` is the display name when the file carries no `name`/`_name_or_path`.
    pub fn from_hf_json(
        text: &str,
        source_name: &str,
        default_name: &str,
    ) -> Result<ModelArch, ConfigError> {
        todo!("{text}{source_name}{default_name}")
    }

    /// Names of the bundled models, sorted.
    pub fn bundled_names() -> Vec<String> {
        todo!()
    }

    /// The model used when none is given: Llama-3.1-8B.
    pub fn default_model() -> ModelArch {
        todo!()
    }

    /// Width of the query projection (`num_heads * head_dim`).
    pub fn q_dim(&self) -> u64 {
        self.num_heads * self.head_dim
    }

    /// Width of one of the K or V projections (`num_kv_heads * head_dim`).
    pub fn kv_dim(&self) -> u64 {
        self.num_kv_heads * self.head_dim
    }
}
