//! Architecture layer sequences in LLMServingSim's `profiler/models/<model_type>.yaml` schema.
//!
//! `sequence:` lists the layers one step runs (prologue once, the transformer block once per
//! hidden layer, head once); `catalog:` files every name under the profile category whose
//! table prices it and says whether its cost is the same at every TP degree (`tp_stable`).
//! The same parser reads our bundled files (`model_archs/layers/*.yaml`) and LLMServingSim's.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::ProfileError;
use crate::embedded::LAYER_SEQUENCES;

/// The profile table family that prices a layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// `dense.csv`, keyed on the step's token count.
    Dense,
    /// `per_sequence.csv`, keyed on the step's sequence count.
    PerSequence,
    /// `attention.csv`, the 4D attention grid.
    Attention,
    /// `moe.csv`, tokens × activated experts.
    Moe,
}

impl Category {
    /// Catalog block names, in LLMServingSim's dispatch order: a name filed under several
    /// blocks takes the first.
    const DISPATCH_ORDER: [(&'static str, Category); 4] = [
        ("per_sequence", Category::PerSequence),
        ("attention", Category::Attention),
        ("moe", Category::Moe),
        ("dense", Category::Dense),
    ];
}

/// One layer of the step sequence, resolved against the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// Canonical name (`qkv_proj`, `attention`, ...), as in the CSV `layer` column.
    pub name: String,
    pub category: Category,
    /// Priced from the `tp1/` tables whatever the TP degree (when `tp1/` exists).
    pub tp_stable: bool,
}

/// Which part of the step a sequence section belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Prologue,
    PreAttn,
    PostAttn,
    MlpDense,
    MlpMoe,
    Head,
}

impl Section {
    /// Prologue and head run once per step; the others once per transformer block.
    pub fn per_block(self) -> bool {
        !matches!(self, Section::Prologue | Section::Head)
    }
}

/// A parsed architecture file: the step's layers by section, and the catalog names by category.
#[derive(Debug, Clone)]
pub struct Architecture {
    /// Where it came from (a path, or `bundled layers/<type>.yaml`), for error messages.
    pub source: String,
    /// The step's layers, section by section, in execution order.
    pub sections: Vec<(Section, Vec<Layer>)>,
    /// Catalog names of each category, to validate CSV `layer` columns against.
    pub dense_names: Vec<String>,
    per_sequence_names: Vec<String>,
}

/// The file as written; unknown sequence sections are refused, unknown catalog blocks too.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SequenceYaml {
    prologue: Option<Vec<String>>,
    pre_attn: Option<Vec<String>>,
    post_attn: Option<Vec<String>>,
    mlp_dense: Option<Vec<String>>,
    mlp_moe: Option<Vec<String>>,
    head: Option<Vec<String>>,
}

/// A catalog entry; `vllm` and `within` document the vLLM class and are not needed here.
#[derive(Deserialize)]
struct EntryYaml {
    #[serde(default)]
    tp_stable: bool,
}

#[derive(Deserialize)]
struct ArchYaml {
    sequence: SequenceYaml,
    /// Category block → layer name → entry (an entry may be empty).
    catalog: BTreeMap<String, Option<BTreeMap<String, Option<EntryYaml>>>>,
}

impl Architecture {
    /// Reads an architecture file from disk.
    pub fn from_file(path: &Path) -> Result<Architecture, ProfileError> {
        let text = crate::paths::read_text(path).map_err(|source| ProfileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Architecture::parse(&text, &path.display().to_string())
    }

    /// Our bundled file for a HuggingFace `model_type` (`model_archs/layers/<type>.yaml`).
    pub fn bundled(model_type: &str) -> Result<Architecture, ProfileError> {
        let rel = format!("layers/{model_type}.yaml");
        match LAYER_SEQUENCES.iter().find(|(path, _)| *path == rel) {
            Some((_, text)) => Architecture::parse(text, &format!("bundled {rel}")),
            None => Err(ProfileError::UnknownModelType {
                model_type: model_type.to_string(),
                known: LAYER_SEQUENCES
                    .iter()
                    .filter_map(|(p, _)| p.strip_prefix("layers/")?.strip_suffix(".yaml"))
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// Parses the YAML text; `source` names it in errors.
    pub fn parse(text: &str, source: &str) -> Result<Architecture, ProfileError> {
        let invalid = |message: String| ProfileError::Architecture {
            file: source.to_string(),
            message,
        };
        crate::yaml::check_nesting(text).map_err(|deep| invalid(deep.to_string()))?;
        let de = serde_yaml_ng::Deserializer::from_str(text);
        let yaml: ArchYaml = serde_path_to_error::deserialize(de)
            .map_err(|e| invalid(format!("{}: {}", e.path(), e.inner())))?;

        let mut catalog: Vec<(Category, BTreeMap<String, Option<EntryYaml>>)> = Vec::new();
        for (block, entries) in yaml.catalog {
            let Some(&(_, category)) = Category::DISPATCH_ORDER.iter().find(|(n, _)| *n == block)
            else {
                return Err(invalid(format!(
                    "unknown catalog category `{block}` (expected dense, per_sequence, \
                     attention or moe)"
                )));
            };
            catalog.push((category, entries.unwrap_or_default()));
        }
        let names_of = |wanted: Category| -> Vec<String> {
            catalog
                .iter()
                .filter(|(c, _)| *c == wanted)
                .flat_map(|(_, entries)| entries.keys().cloned())
                .collect()
        };
        let resolve = |section: &str, name: String| -> Result<Layer, ProfileError> {
            for (_, wanted) in Category::DISPATCH_ORDER {
                let found = catalog
                    .iter()
                    .filter(|(c, _)| *c == wanted)
                    .find_map(|(_, entries)| entries.get(&name));
                if let Some(entry) = found {
                    let tp_stable = entry.as_ref().is_some_and(|e| e.tp_stable);
                    return Ok(Layer {
                        name,
                        category: wanted,
                        tp_stable,
                    });
                }
            }
            Err(invalid(format!(
                "sequence.{section} names `{name}`, which is not in the catalog"
            )))
        };

        let s = yaml.sequence;
        let mut sections = Vec::new();
        for (section, key, names) in [
            (Section::Prologue, "prologue", s.prologue),
            (Section::PreAttn, "pre_attn", s.pre_attn),
            (Section::PostAttn, "post_attn", s.post_attn),
            (Section::MlpDense, "mlp_dense", s.mlp_dense),
            (Section::MlpMoe, "mlp_moe", s.mlp_moe),
            (Section::Head, "head", s.head),
        ] {
            let layers = names
                .unwrap_or_default()
                .into_iter()
                .map(|name| resolve(key, name))
                .collect::<Result<Vec<_>, _>>()?;
            sections.push((section, layers));
        }
        Ok(Architecture {
            source: source.to_string(),
            sections,
            dense_names: names_of(Category::Dense),
            per_sequence_names: names_of(Category::PerSequence),
        })
    }

    /// The sections one step runs, in order: prologue, pre_attn, post_attn, the MLP section
    /// (`mlp_moe` for mixture-of-experts models, else `mlp_dense`), head.
    pub fn step_sections(&self, moe: bool) -> impl Iterator<Item = (Section, &[Layer])> {
        let skip = if moe {
            Section::MlpDense
        } else {
            Section::MlpMoe
        };
        self.sections
            .iter()
            .filter(move |(s, _)| *s != skip)
            .map(|(s, layers)| (*s, layers.as_slice()))
    }

    /// Whether `name` is filed under `category` in the catalog (for CSV `layer` validation).
    pub fn catalog_has(&self, category: Category, name: &str) -> bool {
        let names = match category {
            Category::Dense => &self.dense_names,
            Category::PerSequence => &self.per_sequence_names,
            Category::Attention | Category::Moe => return false,
        };
        names.iter().any(|n| n == name)
    }
}
