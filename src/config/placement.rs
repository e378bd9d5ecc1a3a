//! An instance's `placement` (cluster config): where each layer's weights live, and where
//! evicted KV goes.
//!
//! Shape, as in LLMServingSim: `{default: {weights, kv_loc, kv_evict_loc}, blocks: [{blocks:
//! "0-3,5,7-9", weights?, kv_loc?, kv_evict_loc?}], layers: {<layer name>: {…}}}`, every key
//! optional. A location is `npu` (the GPU's own memory), `cpu` (the node's `cpu_mem`) or
//! `cxl:<id>` (device `<id>` of the cluster's `cxl_mem`; `cxl` alone is device 0), case
//! insensitive. A layer's location is its layer-name rule, else its transformer block's rule,
//! else the default; the prologue and head layers (`embedding`, `final_layernorm`, `lm_head`,
//! `sampler`) belong to no block. Defaults: weights `npu`, `kv_loc` `npu`, `kv_evict_loc`
//! `cpu`. Only `weights` changes timing here (`kv_loc` is read but unused, as in
//! LLMServingSim; `kv_evict_loc` is validated, see the guide, docs/src/modelling.md).
//!
//! Stricter than LLMServingSim, which silently skips bad block ranges and lets a later block
//! rule win: a malformed or out-of-range range, two block rules naming the same block, an
//! unknown layer name or key, and a CXL device the cluster does not have are errors.

use super::{ConfigError, Problem};
use serde_json::Value;

/// Where a tensor lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemLoc {
    /// The GPU's own memory (LLMServingSim's `LOCAL`).
    Npu,
    /// The node's host memory, `cpu_mem` (`REMOTE:<node>`).
    Cpu,
    /// Device `n` of the cluster's `cxl_mem` (`CXL:<n>`).
    Cxl(u32),
}

impl MemLoc {
    /// `npu`, `cpu`, `cxl` or `cxl:<id>`, any case.
    pub fn parse(s: &str) -> Option<MemLoc> {
        let lower = s.trim().to_ascii_lowercase();
        match lower.as_str() {
            "npu" => Some(MemLoc::Npu),
            "cpu" => Some(MemLoc::Cpu),
            "cxl" => Some(MemLoc::Cxl(0)),
            other => other
                .strip_prefix("cxl:")
                .and_then(|id| id.parse().ok())
                .map(MemLoc::Cxl),
        }
    }
}

/// The three locations of one layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Locations {
    /// Where the layer's weights live.
    pub weights: MemLoc,
    /// Where its KV cache lives (read, never used, as in LLMServingSim).
    pub kv_loc: MemLoc,
    /// Where evicted KV goes.
    pub kv_evict_loc: MemLoc,
}

/// The canonical layer names a `layers` rule may name (LLMServingSim's layer sequences).
pub const PLACEMENT_LAYER_NAMES: &[&str] = &[
    "embedding",
    "layernorm",
    "qkv_proj",
    "qk_norm",
    "rotary_emb",
    "attention",
    "o_proj",
    "gate_up_proj",
    "act_fn",
    "down_proj",
    "moe",
    "final_layernorm",
    "lm_head",
    "sampler",
];

/// A resolved `placement`.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// The default locations.
    pub default: Locations,
    /// One entry per transformer block when some `blocks` rule applies ("block mode"); empty
    /// otherwise.
    blocks: Vec<Locations>,
    /// Layer-name rules, their missing keys filled from the default.
    layers: Vec<(String, Locations)>,
}

/// Rule keys, with optional values.
#[derive(Debug, Clone, Copy, Default)]
struct Rule {
    weights: Option<MemLoc>,
    kv_loc: Option<MemLoc>,
    kv_evict_loc: Option<MemLoc>,
}

impl Rule {
    fn over(self, base: Locations) -> Locations {
        Locations {
            weights: self.weights.unwrap_or(base.weights),
            kv_loc: self.kv_loc.unwrap_or(base.kv_loc),
            kv_evict_loc: self.kv_evict_loc.unwrap_or(base.kv_evict_loc),
        }
    }
}

/// Where the rules are checked: the file, the instance's field path and what exists.
pub struct PlacementContext<'a> {
    /// The config's name for messages.
    pub source: &'a str,
    /// The `placement` key's path, e.g. `nodes[0].instances[0].placement`.
    pub at: &'a str,
    /// Transformer blocks of the model (`num_hidden_layers`).
    pub num_blocks: u64,
    /// Devices of the cluster's `cxl_mem`; `None` without one.
    pub cxl_devices: Option<u32>,
}

impl PlacementContext<'_> {
    fn invalid(&self, field: &str, problem: Problem) -> ConfigError {
        ConfigError::invalid(self.source, format!("{}{field}", self.at), problem)
    }

    fn object<'v>(
        &self,
        v: &'v Value,
        field: &str,
        keys: &[&str],
    ) -> Result<&'v serde_json::Map<String, Value>, ConfigError> {
        let map = v
            .as_object()
            .ok_or_else(|| self.invalid(field, Problem::wrong_kind("an object", None)))?;
        if let Some(k) = map.keys().find(|k| !keys.contains(&k.as_str())) {
            return Err(self.invalid(&format!("{field}.{k}"), Problem::unknown_key("key", keys)));
        }
        Ok(map)
    }

    fn location(&self, v: &Value, field: &str) -> Result<MemLoc, ConfigError> {
        let bad = || {
            self.invalid(
                field,
                Problem::not_one_of(v, &["\"npu\"", "\"cpu\"", "\"cxl:<id>\""]),
            )
        };
        let loc = v.as_str().and_then(MemLoc::parse).ok_or_else(bad)?;
        if let MemLoc::Cxl(id) = loc {
            match self.cxl_devices {
                None => {
                    return Err(self.invalid(
                        field,
                        Problem::disagrees(
                            format!("CXL device {id}"),
                            "the cluster config has no `cxl_mem`",
                        ),
                    ));
                }
                Some(n) if id >= n => {
                    return Err(self.invalid(
                        field,
                        Problem::disagrees(
                            format!("CXL device {id}"),
                            format!("`cxl_mem.num_devices` is {n} (ids 0..{})", n - 1),
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(loc)
    }

    fn rule(&self, v: &Value, field: &str, extra: &[&str]) -> Result<Rule, ConfigError> {
        let mut keys = vec!["weights", "kv_loc", "kv_evict_loc"];
        keys.extend_from_slice(extra);
        let map = self.object(v, field, &keys)?;
        let get = |key: &str| {
            map.get(key)
                .map(|v| self.location(v, &format!("{field}.{key}")))
                .transpose()
        };
        Ok(Rule {
            weights: get("weights")?,
            kv_loc: get("kv_loc")?,
            kv_evict_loc: get("kv_evict_loc")?,
        })
    }

    /// `"0-3,5,7-9"` → the block ids, each below the block count.
    fn block_ids(&self, v: &Value, field: &str) -> Result<Vec<u64>, ConfigError> {
        let text = v.as_str().ok_or_else(|| {
            self.invalid(
                field,
                Problem::wrong_kind("a string like \"0-3,5\"", Some(v.to_string())),
            )
        })?;
        let n = self.num_blocks;
        let mut ids = Vec::new();
        for part in text.split(',').map(str::trim) {
            let got = || format!("`{part}` in \"{text}\"");
            let bad = |what: &str| self.invalid(field, Problem::wrong_kind(what, Some(got())));
            let number = |s: &str| s.trim().parse::<u64>().map_err(|_| bad("a block id"));
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (number(a)?, number(b)?),
                None => {
                    let x = number(part)?;
                    (x, x)
                }
            };
            if lo > hi {
                return Err(bad("a range that goes up"));
            }
            if hi >= n {
                let blocks = format!(
                    "the model has {n} transformer blocks (ids 0..{})",
                    n.saturating_sub(1)
                );
                return Err(self.invalid(field, Problem::disagrees(got(), blocks)));
            }
            ids.extend(lo..=hi);
        }
        Ok(ids)
    }
}

impl Placement {
    /// Parses and checks an instance's `placement` value.
    pub fn parse(value: &Value, cx: &PlacementContext<'_>) -> Result<Placement, ConfigError> {
        let map = cx.object(value, "", &["default", "blocks", "layers"])?;
        let base = Locations {
            weights: MemLoc::Npu,
            kv_loc: MemLoc::Npu,
            kv_evict_loc: MemLoc::Cpu,
        };
        let default = match map.get("default") {
            Some(v) => cx.rule(v, ".default", &[])?.over(base),
            None => base,
        };
        let mut blocks = Vec::new();
        if let Some(v) = map.get("blocks") {
            let rules = v.as_array().ok_or_else(|| {
                cx.invalid(".blocks", Problem::wrong_kind("a list of rules", None))
            })?;
            // Which rule set each block, to name both rules of an overlap.
            let mut owner: Vec<Option<usize>> = vec![None; cx.num_blocks as usize];
            for (r, rule_value) in rules.iter().enumerate() {
                let field = format!(".blocks[{r}]");
                let rule = cx.rule(rule_value, &field, &["blocks"])?;
                let ids_value = rule_value
                    .get("blocks")
                    .ok_or_else(|| cx.invalid(&format!("{field}.blocks"), Problem::missing()))?;
                let ids = cx.block_ids(ids_value, &format!("{field}.blocks"))?;
                if blocks.is_empty() {
                    blocks = vec![default; cx.num_blocks as usize];
                }
                for id in ids {
                    let slot = &mut owner[id as usize];
                    if let Some(earlier) = *slot
                        && earlier != r
                    {
                        return Err(cx.invalid(
                            &format!("{field}.blocks"),
                            Problem::Overlaps {
                                item: format!("block {id}"),
                                other: format!("blocks[{earlier}]"),
                            },
                        ));
                    }
                    *slot = Some(r);
                    blocks[id as usize] = rule.over(default);
                }
            }
        }
        let mut layers = Vec::new();
        if let Some(v) = map.get("layers") {
            let rules = v.as_object().ok_or_else(|| {
                cx.invalid(
                    ".layers",
                    Problem::wrong_kind("an object of layer-name rules", None),
                )
            })?;
            for (name, rule_value) in rules {
                let field = format!(".layers.{name}");
                if !PLACEMENT_LAYER_NAMES.contains(&name.as_str()) {
                    return Err(
                        cx.invalid(&field, Problem::unknown_key("layer", PLACEMENT_LAYER_NAMES))
                    );
                }
                let rule = cx.rule(rule_value, &field, &[])?;
                layers.push((name.clone(), rule.over(default)));
            }
        }
        Ok(Placement {
            default,
            blocks,
            layers,
        })
    }

    /// Whether some `blocks` rule applies (LLMServingSim's block mode).
    pub fn block_mode(&self) -> bool {
        !self.blocks.is_empty()
    }

    /// The locations of the layer rule for `layer` (a canonical name), if any.
    pub fn layer_rule(&self, layer: &str) -> Option<Locations> {
        self.layers
            .iter()
            .find(|(name, _)| name == layer)
            .map(|(_, l)| *l)
    }

    /// The locations of a layer outside any layer rule: its block's (`Some(block)`), else the
    /// default (prologue and head layers pass `None`).
    pub fn block_locations(&self, block: Option<u64>) -> Locations {
        block
            .and_then(|b| self.blocks.get(b as usize))
            .copied()
            .unwrap_or(self.default)
    }

    /// The locations of `layer` (a canonical name) in `block` (`None` for the prologue and
    /// head): the layer rule beats the block rule, which beats the default.
    pub fn resolve(&self, block: Option<u64>, layer: &str) -> Locations {
        self.layer_rule(layer)
            .unwrap_or_else(|| self.block_locations(block))
    }

    /// Whether some layer's weights live outside the GPU.
    pub fn weights_off_gpu(&self) -> bool {
        std::iter::once(&self.default)
            .chain(&self.blocks)
            .chain(self.layers.iter().map(|(_, l)| l))
            .any(|l| l.weights != MemLoc::Npu)
    }
}
