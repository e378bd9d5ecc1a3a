//! Model architectures, read from HuggingFace `config.json` files.

use std::path::Path;

use super::{Bound, ConfigError, Dtype, Problem};
use crate::embedded::MODEL_ARCHS;

/// Largest width, head, layer or expert count, or vocabulary a `config.json` may give: 2^24,
/// far above any released model's (vocabularies reach about 2^18), so that a width times the
/// tokens of a batch stays exact in 64 bits.
const MAX_DIMENSION: u64 = 1 << 24;

/// Most bytes a model's whole weights may take in float32: 2^50 (1 PiB), about a hundred times
/// a two-trillion-parameter model's; the weight bytes per GPU are sums of products of widths.
const MAX_WEIGHT_BYTES: u64 = 1 << 50;

/// Most KV bytes per token a model may take in float32: 2^30 (1 GiB), about two thousand times
/// Llama-3.1-405B's; times a block's tokens or a request's it stays exact in 64 bits.
const MAX_KV_BYTES_PER_TOKEN: u64 = 1 << 30;

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
    /// The checkpoint's quantization (`quantization_config.quant_method`): `Some(Fp8)` for
    /// `fp8`, the one method priced here.
    pub quantization: Option<Dtype>,
    pub moe: Option<MoeArch>,
    /// The attention window of every layer, tokens (`sliding_window`), when all layers slide;
    /// `None` for full attention, and for windows on some layers only (`layer_types`,
    /// `sliding_window_pattern`) or switched off (`use_sliding_window: false`), which are not
    /// priced here. vLLM passes it to FlashAttention on every layer
    /// (`CacheConfig.sliding_window` when the model is not interleaved), 0.13.0 and 0.19.0.
    pub sliding_window: Option<u64>,
}

impl ModelArch {
    /// Whether vLLM routes the model's tokens with PhiMoE's `sparsemixer` (eager PyTorch ops)
    /// instead of the fused top-k softmax: `phimoe` (vLLM's `models/phimoe.py`,
    /// `custom_routing_function=phimoe_routing_function`, 0.13.0 and 0.19.0).
    pub fn routes_with_sparsemixer(&self) -> bool {
        self.model_type == "phimoe"
    }

    /// Whether the model's decoder layers add the residual themselves (`hidden_states +
    /// residual` after attention and after the MLP, before a plain `nn.LayerNorm`) where
    /// vLLM's other models fuse the add into the next norm (`RMSNorm(x, residual)`): `phimoe`
    /// (vLLM's `PhiMoEDecoderLayer.forward`, 0.13.0 and 0.19.0).
    pub fn adds_residual_unfused(&self) -> bool {
        self.model_type == "phimoe"
    }

    /// Resolves `spec` as a path to a HuggingFace `config.json` (an existing file, or any
    /// name ending in `.json`) or as a bundled model name (case-insensitive, with or without
    /// the organisation, e.g. `Llama-3.1-8B` or `meta-llama/Llama-3.1-8B`).
    pub fn resolve(spec: &str) -> Result<ModelArch, ConfigError> {
        let path = Path::new(spec);
        if path.is_file() || spec.ends_with(".json") {
            let text = crate::paths::read_text(path).map_err(|source| ConfigError::Io {
                path: path.to_path_buf(),
                source,
            })?;
            return ModelArch::from_hf_json(&text, spec, &name_from_path(path));
        }
        let found = bundled().find(|(name, _)| {
            let short = name.rsplit('/').next().unwrap_or(name);
            name.eq_ignore_ascii_case(spec) || short.eq_ignore_ascii_case(spec)
        });
        match found {
            Some((name, text)) => {
                ModelArch::from_hf_json(text, &format!("model_archs/{name}.json"), name)
            }
            None => Err(ConfigError::Unknown {
                kind: "model",
                name: spec.to_string(),
                known: ModelArch::bundled_names().join(", "),
                hint: "HuggingFace config.json",
            }),
        }
    }

    /// Parses a HuggingFace `config.json`. `source_name` is used in error messages;
    /// `default_name` is the display name when the file carries no `name`/`_name_or_path`.
    pub fn from_hf_json(
        text: &str,
        source_name: &str,
        default_name: &str,
    ) -> Result<ModelArch, ConfigError> {
        let fields = HfFields { source_name };
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let hf: HfConfig = crate::serde_messages::json_document(text)
            .map_err(|(field, message)| fields.invalid(&field, Problem::Syntax(message)))?;
        let model_type = match &hf.model_type {
            Some(t) if !t.trim().is_empty() => t.clone(),
            _ => return Err(fields.invalid("model_type", Problem::missing())),
        };
        let hidden_size = fields.dimension(hf.hidden_size, "hidden_size")?;
        let num_layers = fields.dimension(hf.num_hidden_layers, "num_hidden_layers")?;
        let (num_heads, num_kv_heads, head_dim) = fields.head_geometry(&hf, hidden_size)?;
        let intermediate_size =
            fields.dimension(hf.intermediate_size.or(hf.ffn_dim), "intermediate_size")?;
        let vocab_size = fields.dimension(hf.vocab_size, "vocab_size")?;
        let max_position_embeddings =
            fields.required(hf.max_position_embeddings, "max_position_embeddings")?;
        let torch_dtype = match hf.torch_dtype.clone().or(hf.dtype.clone()) {
            None => None,
            Some(s) => Some(
                s.parse::<Dtype>()
                    .map_err(|e| fields.invalid("torch_dtype", e))?,
            ),
        };
        let quantization = fields.quantization(hf.quantization_config.as_ref())?;
        let moe = fields.moe(&hf, intermediate_size)?;
        let sliding_window = fields.sliding_window(&hf)?;
        let name = [hf.name, hf.name_or_path]
            .into_iter()
            .flatten()
            .find(|n| !n.trim().is_empty())
            .unwrap_or_else(|| default_name.to_string());
        let model = ModelArch {
            name,
            model_type,
            hidden_size,
            num_layers,
            num_heads,
            num_kv_heads,
            head_dim,
            intermediate_size,
            vocab_size,
            max_position_embeddings,
            torch_dtype,
            quantization,
            moe,
            sliding_window,
        };
        fields.size(&model)?;
        Ok(model)
    }

    /// Names of the bundled models, sorted.
    pub fn bundled_names() -> Vec<String> {
        let mut names: Vec<String> = bundled().map(|(name, _)| name.to_string()).collect();
        names.sort();
        names
    }

    /// The model used when none is given: Llama-3.1-8B.
    pub fn default_model() -> ModelArch {
        ModelArch::resolve("meta-llama/Llama-3.1-8B").expect("bundled Llama-3.1-8B is valid")
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

/// The keys of a HuggingFace `config.json` that matter here; all others are ignored.
#[derive(serde::Deserialize)]
struct HfConfig {
    name: Option<String>,
    #[serde(rename = "_name_or_path")]
    name_or_path: Option<String>,
    model_type: Option<String>,
    hidden_size: Option<u64>,
    num_hidden_layers: Option<u64>,
    num_attention_heads: Option<u64>,
    num_key_value_heads: Option<u64>,
    head_dim: Option<u64>,
    intermediate_size: Option<u64>,
    ffn_dim: Option<u64>,
    vocab_size: Option<u64>,
    max_position_embeddings: Option<u64>,
    torch_dtype: Option<String>,
    /// Newer transformers releases write `dtype` instead of `torch_dtype`.
    dtype: Option<String>,
    num_local_experts: Option<u64>,
    num_experts: Option<u64>,
    num_experts_per_tok: Option<u64>,
    moe_intermediate_size: Option<u64>,
    quantization_config: Option<HfQuantization>,
    /// A number of tokens, or `null`; read loosely (see [`HfFields::sliding_window`]).
    sliding_window: Option<serde_json::Value>,
    use_sliding_window: Option<serde_json::Value>,
    /// Per-layer attention kinds (`sliding_attention`, `full_attention`) of interleaved models.
    layer_types: Option<serde_json::Value>,
    sliding_window_pattern: Option<serde_json::Value>,
}

/// The key of a `config.json`'s `quantization_config` that matters here.
#[derive(serde::Deserialize)]
struct HfQuantization {
    quant_method: Option<String>,
}

/// Field checks of one HuggingFace `config.json`, with errors naming its source.
struct HfFields<'a> {
    source_name: &'a str,
}

impl HfFields<'_> {
    fn invalid(&self, field: &str, problem: Problem) -> ConfigError {
        ConfigError::invalid(self.source_name, field, problem)
    }

    /// The checkpoint's quantization: `fp8` (what vLLM's `Fp8Config` serves: FP8 weights of
    /// the linear layers and experts); no other method is priced, so any other is an error
    /// rather than a run priced in 16 bits.
    fn quantization(&self, q: Option<&HfQuantization>) -> Result<Option<Dtype>, ConfigError> {
        let Some(q) = q else {
            return Ok(None);
        };
        const FIELD: &str = "quantization_config.quant_method";
        match q.quant_method.as_deref() {
            None => Err(self.invalid(FIELD, Problem::missing())),
            Some(m) if m.eq_ignore_ascii_case("fp8") => Ok(Some(Dtype::Fp8)),
            Some(other) => {
                Err(self.invalid(FIELD, Problem::not_one_of(format!("`{other}`"), &["fp8"])))
            }
        }
    }

    /// A width, count of heads, layers or experts, or vocabulary size: present, positive and
    /// at most [`MAX_DIMENSION`].
    fn dimension(&self, value: Option<u64>, field: &str) -> Result<u64, ConfigError> {
        let v = self.required(value, field)?;
        let bound = Bound::closed(1.0, MAX_DIMENSION as f64, "");
        match bound.check(v as f64) {
            Ok(_) => Ok(v),
            Err(_) => Err(self.invalid(field, Problem::out_of_range(v, bound))),
        }
    }

    /// The model's whole weights and KV bytes per token in float32 (unsharded), within
    /// [`MAX_WEIGHT_BYTES`] and [`MAX_KV_BYTES_PER_TOKEN`]: the memory model's sums then
    /// stay exact in 64 bits at any sharding, dtype and block size.
    fn size(&self, model: &ModelArch) -> Result<(), ConfigError> {
        const FP32: f64 = 4.0;
        let f = |v: u64| v as f64;
        let hidden = f(model.hidden_size);
        let (q_dim, kv_dim) = (
            f(model.num_heads) * f(model.head_dim),
            f(model.num_kv_heads) * f(model.head_dim),
        );
        let mlp = match &model.moe {
            Some(moe) => hidden * f(moe.num_experts) * (1.0 + 3.0 * f(moe.moe_intermediate_size)),
            None => 3.0 * hidden * f(model.intermediate_size),
        };
        let block = 2.0 * hidden + hidden * (q_dim + 2.0 * kv_dim) + q_dim * hidden + mlp;
        let weights =
            FP32 * (f(model.num_layers) * block + 2.0 * f(model.vocab_size) * hidden + hidden);
        let kv_per_token = FP32 * 2.0 * kv_dim * f(model.num_layers);
        let checks = [
            ("(weights)", weights, MAX_WEIGHT_BYTES, "bytes in float32"),
            (
                "(KV cache)",
                kv_per_token,
                MAX_KV_BYTES_PER_TOKEN,
                "bytes per token in float32",
            ),
        ];
        for (field, v, max, unit) in checks {
            if v > max as f64 {
                let bound = Bound::closed(1.0, max as f64, unit);
                return Err(self.invalid(field, Problem::out_of_range(format!("{v:.4e}"), bound)));
            }
        }
        Ok(())
    }

    /// A field that must be present and positive.
    fn required(&self, value: Option<u64>, field: &str) -> Result<u64, ConfigError> {
        match value {
            None => Err(self.invalid(field, Problem::missing())),
            Some(0) => Err(self.invalid(field, Problem::out_of_range(0, Bound::AtLeast(1)))),
            Some(v) => Ok(v),
        }
    }

    /// Query heads, KV heads (defaulting to the query heads; they must divide them) and the
    /// head dimension (defaulting to `hidden_size / heads`).
    fn head_geometry(
        &self,
        hf: &HfConfig,
        hidden_size: u64,
    ) -> Result<(u64, u64, u64), ConfigError> {
        let num_heads = self.dimension(hf.num_attention_heads, "num_attention_heads")?;
        let num_kv_heads = self.dimension(
            hf.num_key_value_heads.or(Some(num_heads)),
            "num_key_value_heads",
        )?;
        if !num_heads.is_multiple_of(num_kv_heads) {
            return Err(self.invalid(
                "num_key_value_heads",
                Problem::disagrees(
                    num_kv_heads,
                    format!("num_attention_heads = {num_heads} is not a multiple of it"),
                ),
            ));
        }
        let head_dim = match hf.head_dim {
            Some(d) => self.dimension(Some(d), "head_dim")?,
            None if hidden_size.is_multiple_of(num_heads) => hidden_size / num_heads,
            None => {
                return Err(self.invalid(
                    "head_dim",
                    Problem::missing_for(format!(
                        "hidden_size = {hidden_size} is not divisible by num_attention_heads \
                         = {num_heads}, so the head size cannot be derived"
                    )),
                ));
            }
        };
        Ok((num_heads, num_kv_heads, head_dim))
    }

    /// The window every layer attends within (see [`ModelArch::sliding_window`]): none when
    /// the config sets none (absent or `null`), switches it off, or slides on some layers
    /// only (a `layer_types` list with another kind, a `sliding_window_pattern`). A window
    /// that is not a positive whole number is an error.
    fn sliding_window(&self, hf: &HfConfig) -> Result<Option<u64>, ConfigError> {
        use serde_json::Value;
        let window = match &hf.sliding_window {
            None | Some(Value::Null) => return Ok(None),
            Some(v) => match v.as_u64() {
                Some(w) => self.required(Some(w), "sliding_window")?,
                None => {
                    let problem = Problem::wrong_kind("a token count", Some(v.to_string()));
                    return Err(self.invalid("sliding_window", problem));
                }
            },
        };
        let switched_off = matches!(hf.use_sliding_window, Some(Value::Bool(false)));
        let every_layer = match &hf.layer_types {
            None | Some(Value::Null) => true,
            Some(Value::Array(kinds)) => kinds.iter().all(|k| k == "sliding_attention"),
            Some(_) => false,
        };
        let patterned = !matches!(hf.sliding_window_pattern, None | Some(Value::Null));
        Ok((!switched_off && every_layer && !patterned).then_some(window))
    }

    /// The mixture of experts, when the config names experts (`num_local_experts` or
    /// `num_experts`); top-k defaults to 1 and the expert FFN width to `intermediate_size`.
    fn moe(&self, hf: &HfConfig, intermediate_size: u64) -> Result<Option<MoeArch>, ConfigError> {
        let experts_field = if hf.num_local_experts.is_some() {
            "num_local_experts"
        } else {
            "num_experts"
        };
        let Some(experts) = hf.num_local_experts.or(hf.num_experts) else {
            return Ok(None);
        };
        let num_experts = self.dimension(Some(experts), experts_field)?;
        let top_k = self.required(hf.num_experts_per_tok.or(Some(1)), "num_experts_per_tok")?;
        if top_k > num_experts {
            return Err(self.invalid(
                "num_experts_per_tok",
                Problem::disagrees(top_k, format!("the model has only {num_experts} experts")),
            ));
        }
        let moe_intermediate_size = self.dimension(
            hf.moe_intermediate_size.or(Some(intermediate_size)),
            "moe_intermediate_size",
        )?;
        Ok(Some(MoeArch {
            num_experts,
            top_k,
            moe_intermediate_size,
        }))
    }
}

/// Bundled models as (name, JSON text); the name is the path under `model_archs/` without
/// the `.json` extension, e.g. `meta-llama/Llama-3.1-8B`.
fn bundled() -> impl Iterator<Item = (&'static str, &'static str)> {
    MODEL_ARCHS
        .iter()
        .map(|(rel, text)| (rel.strip_suffix(".json").unwrap_or(rel), *text))
}

/// `<parent dir>/<file stem>` of a config path, e.g. `meta-llama/Llama-3.1-8B` for
/// `configs/model/meta-llama/Llama-3.1-8B.json`; only the stem when there is no parent.
fn name_from_path(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy())
        .unwrap_or_default();
    match path.parent().and_then(Path::file_name) {
        Some(dir) => format!("{}/{stem}", dir.to_string_lossy()),
        None => stem.into_owned(),
    }
}
