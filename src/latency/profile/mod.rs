//! The profile-DB backend: per-layer latencies measured on real GPUs (LLMServingSim 2.0
//! profile bundles), interpolated to the batch at hand.
//!
//! A bundle is `<root>/<hardware>/<org>/<model>/<variant>/` with `meta.yaml` and one
//! `tp<N>/` folder per TP degree holding `dense.csv`, `per_sequence.csv`, `attention.csv` and,
//! for mixture-of-experts models, `moe.csv`. The architecture YAML (ours in
//! `model_archs/layers/`, or LLMServingSim's) gives the layer sequence of one step.
//!
//! A step is priced the way LLMServingSim prices a trace: the prologue once, the transformer
//! block `num_hidden_layers` times, the head once, the step time being the sum of the rows.
//! The batch maps onto LLMServingSim's batch context as: `total_len` = Σ new tokens; the
//! items with more than one new token are collapsed into one prefill of `prefill_chunk` = Σ
//! their new tokens over `kv_prefill` = Σ their contexts; the one-token items are the
//! `n_decode` decodes, with mean (floored), max and min context; `lm_head_len` = item count.
//! Dense layers are looked up at `max(total_len, 1)` tokens, per-sequence layers at
//! `lm_head_len` sequences, attention on the 4D grid with the skew correction, the MoE block
//! at BALANCED routing with EP 1.
//!
//! Everything is resolved at load: the rows of a step and the table each row reads, so
//! [`LatencyBackend::step_time`] does no allocation and no name lookups.

mod arch;
mod load;
mod lookup;
mod meta;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use arch::{Architecture, Category, Section};
use lookup::{AttentionTable, Edges, MoeTable, Table1d, truncate_ns};
use meta::SkewFit;

use super::{BatchDesc, LatencyBackend, LatencyError, LayerTiming};
use crate::Nanos;
use crate::config::{Dtype, ModelArch};

/// What to load: which bundle, for which model and parallelism.
#[derive(Debug, Clone, Copy)]
pub struct ProfileSpec<'a> {
    /// The profile root, e.g. `../shared/data/llmservingsim/profiler/perf`.
    pub root: &'a Path,
    /// Hardware folder name, e.g. `RTXPRO6000`. A name containing `TPU` drops `rotary_emb`
    /// from the transformer block, as LLMServingSim does.
    pub hardware: &'a str,
    /// The model; its `name` (`org/model`) gives the folders under the hardware, its
    /// `model_type` the bundled architecture, `num_layers` the block count.
    pub model: &'a ModelArch,
    /// Weight dtype; its short name (`bf16`, ...) is the variant folder.
    pub dtype: Dtype,
    /// An FP8 KV cache: the variant folder gets a `-kvfp8` suffix (e.g. `bf16-kvfp8`).
    pub kv_cache_fp8: bool,
    /// Tensor-parallel degree; `tp<tp>/` must exist (0 is treated as 1).
    pub tp: u32,
    /// An LLMServingSim architecture YAML; `None` uses ours for `model.model_type`.
    pub architecture: Option<&'a Path>,
    /// The runtime token budget per step; a warning is logged when it exceeds the profiled
    /// one (lookups above it extrapolate).
    pub max_num_batched_tokens: u32,
    /// The runtime sequence limit, compared with the profiled one like the token budget.
    pub max_num_seqs: Option<u32>,
}

/// How many layer lookups were made, and how many of them left the profiled grid.
///
/// A lookup is one priced row of one step (an attention row counts once even when the skew
/// correction reads the grid twice). It is `clamped` when a query coordinate that carries
/// weight in the result lay below the table's axis, or off an axis with a single point (the
/// edge value was used), and `extrapolated` when one lay above an axis of two or more points.
/// One lookup can be both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LookupCounts {
    /// Lookups made by [`LatencyBackend::step_time`] and [`LatencyBackend::breakdown`].
    pub lookups: u64,
    /// Lookups pinned to a grid edge.
    pub clamped: u64,
    /// Lookups extrapolated beyond the grid.
    pub extrapolated: u64,
}

impl LookupCounts {
    fn record(&mut self, edges: Edges) {
        self.lookups += 1;
        self.clamped += u64::from(edges.clamped);
        self.extrapolated += u64::from(edges.extrapolated);
    }
}

/// Why a bundle could not be loaded. Every variant names the file, and the line, column,
/// field or layer where one applies.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// A file or folder exists but could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The bundle folder does not exist; `listing` says what the nearest existing folder holds.
    #[error("no profile bundle at {} ({listing})", path.display())]
    MissingBundle { path: PathBuf, listing: String },
    /// The bundle has no folder for the requested TP degree.
    #[error("profile bundle {} has no tp{tp}/ folder (TP folders there: {available})", bundle.display())]
    MissingTp {
        bundle: PathBuf,
        tp: u32,
        available: String,
    },
    /// A file the bundle needs does not exist.
    #[error("missing profile file {}", path.display())]
    MissingFile { path: PathBuf },
    /// `meta.yaml` has a key of the wrong shape.
    #[error("{}: {field}: {message}", path.display())]
    Meta {
        path: PathBuf,
        field: String,
        message: String,
    },
    /// The architecture YAML is invalid or does not fit the model.
    #[error("architecture {file}: {message}")]
    Architecture { file: String, message: String },
    /// No bundled architecture for the model type, and none was given.
    #[error(
        "no bundled layer sequence for model_type `{model_type}` (bundled: {known}); \
         give an architecture YAML"
    )]
    UnknownModelType { model_type: String, known: String },
    /// A CSV row or header that cannot be read.
    #[error("{}, line {line}, column `{column}`: {message}", path.display())]
    Malformed {
        path: PathBuf,
        line: u64,
        column: String,
        message: String,
    },
    /// A `dense.csv` or `per_sequence.csv` layer that the catalog does not file there.
    #[error(
        "{}, line {line}: layer `{layer}` is not in the {category} catalog of {architecture}",
        path.display()
    )]
    UnknownLayer {
        path: PathBuf,
        line: u64,
        layer: String,
        category: &'static str,
        architecture: String,
    },
    /// A grid point that comes before the previous one.
    #[error("{}, line {line}: {message}", path.display())]
    Unsorted {
        path: PathBuf,
        line: u64,
        message: String,
    },
    /// A grid point given twice.
    #[error("{}, line {line}: duplicate grid point {point}", path.display())]
    DuplicatePoint {
        path: PathBuf,
        line: u64,
        point: String,
    },
    /// An attention or MoE table without data rows.
    #[error("{} has no data rows", path.display())]
    Empty { path: PathBuf },
    /// A prologue or head layer with no rows in its table (LLMServingSim fails on these too;
    /// block layers without rows are skipped with a warning instead).
    #[error(
        "{} has no rows for layer `{layer}`, which the {section} of {architecture} runs",
        path.display()
    )]
    MissingLayer {
        path: PathBuf,
        layer: String,
        section: &'static str,
        architecture: String,
    },
}

/// Per-layer latencies from a profile bundle; see the module documentation.
#[derive(Debug)]
pub struct ProfileDb {
    bundle: PathBuf,
    rows: Vec<Row>,
    pricer: Pricer,
}

/// One priced row of a step, repeated `repeats` times.
#[derive(Debug)]
struct Row {
    name: &'static str,
    repeats: u64,
    price: Price,
}

/// How a row is priced.
#[derive(Debug)]
enum Price {
    /// A dense layer, keyed on the step's token count.
    Tokens(Table1d),
    /// A per-sequence layer, keyed on the step's sequence count.
    Sequences(Table1d),
    /// The attention layer (the grid lives in [`Pricer`]); omitted without prefill or decodes.
    Attention,
    /// The MoE block.
    Moe(MoeBlock),
}

/// The MoE table with the routing facts it needs.
#[derive(Debug)]
struct MoeBlock {
    table: MoeTable,
    top_k: u64,
    experts: u64,
}

/// The state shared by all rows: the attention grid, the skew fit and the counters.
#[derive(Debug)]
struct Pricer {
    attention: AttentionTable,
    skew: SkewFit,
    counts: LookupCounts,
}

/// LLMServingSim's batch context, from a [`BatchDesc`].
#[derive(Debug, Clone, Copy)]
struct BatchStats {
    total_len: u64,
    prefill_chunk: u64,
    kv_prefill: u64,
    n_decode: u64,
    kv_decode_mean: u64,
    kv_decode_max: u64,
    kv_decode_min: u64,
    lm_head_len: u64,
}

impl BatchStats {
    fn of(batch: &BatchDesc<'_>) -> Result<BatchStats, LatencyError> {
        if batch.items.is_empty() {
            return Err(LatencyError::Backend("profile: empty batch".into()));
        }
        let mut s = BatchStats {
            total_len: 0,
            prefill_chunk: 0,
            kv_prefill: 0,
            n_decode: 0,
            kv_decode_mean: 0,
            kv_decode_max: 0,
            kv_decode_min: u64::MAX,
            lm_head_len: batch.items.len() as u64,
        };
        let mut decode_sum = 0u64;
        for (i, item) in batch.items.iter().enumerate() {
            let (new, context) = (u64::from(item.new_tokens), u64::from(item.context_tokens));
            if new == 0 {
                return Err(LatencyError::Backend(format!(
                    "profile: batch item {i} computes no tokens"
                )));
            }
            s.total_len += new;
            if item.is_decode() {
                s.n_decode += 1;
                decode_sum += context;
                s.kv_decode_max = s.kv_decode_max.max(context);
                s.kv_decode_min = s.kv_decode_min.min(context);
            } else {
                s.prefill_chunk += new;
                s.kv_prefill += context;
            }
        }
        if s.n_decode == 0 {
            s.kv_decode_min = 0;
        }
        s.kv_decode_mean = decode_sum.checked_div(s.n_decode).unwrap_or(0);
        Ok(s)
    }
}

impl Pricer {
    /// The time of one occurrence of a row, or `None` for an omitted attention row.
    fn price(&mut self, price: &Price, s: &BatchStats) -> Option<Nanos> {
        let mut edges = Edges::default();
        let ns = match price {
            Price::Tokens(t) => truncate_ns(t.interpolate(s.total_len.max(1), &mut edges)),
            Price::Sequences(t) => truncate_ns(t.interpolate(s.lm_head_len.max(1), &mut edges)),
            Price::Attention => self.attention(s, &mut edges)?,
            // BALANCED routing at EP 1: every token stays on the one rank, which fires
            // min(tokens × top_k, experts) experts.
            Price::Moe(m) => {
                let activated = s.total_len.saturating_mul(m.top_k).min(m.experts);
                m.table.lookup(s.total_len, activated, &mut edges)
            }
        };
        self.counts.record(edges);
        Some(ns)
    }

    /// `_lookup_attention_with_skew`: the grid at the mean decode context, blended towards
    /// the grid at the longest one by the skew alpha when decode contexts differ.
    fn attention(&mut self, s: &BatchStats, edges: &mut Edges) -> Option<Nanos> {
        let (pc, kp, nd) = (s.prefill_chunk, s.kv_prefill, s.n_decode);
        if pc == 0 && nd == 0 {
            return None;
        }
        let t_mean = self.attention.lookup(pc, kp, nd, s.kv_decode_mean, edges);
        if nd <= 1 || s.kv_decode_max == s.kv_decode_mean {
            return Some(t_mean);
        }
        let gap = s.kv_decode_max - s.kv_decode_min;
        let skew_rate = (s.kv_decode_mean - s.kv_decode_min) as f64 / gap as f64;
        let alpha = self.skew.alpha(pc, nd, skew_rate, s.kv_decode_max, kp);
        if alpha == 0.0 {
            return Some(t_mean);
        }
        let t_max = self.attention.lookup(pc, kp, nd, s.kv_decode_max, edges);
        if t_max <= t_mean {
            return Some(t_mean);
        }
        let blended = t_mean as f64 + alpha * (t_max - t_mean) as f64;
        Some((blended.round_ties_even() as i64).max(1) as Nanos)
    }
}

/// Layer names as `&'static str` for [`LayerTiming`]: each distinct name is leaked once per
/// process, however many bundles are loaded.
fn intern(name: &str) -> &'static str {
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(known) = names.iter().find(|n| **n == name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.push(leaked);
    leaked
}

impl ProfileDb {
    /// Loads the bundle `spec` names and resolves the rows of a step.
    pub fn load(spec: &ProfileSpec<'_>) -> Result<ProfileDb, ProfileError> {
        let variant = format!(
            "{}{}",
            spec.dtype.short_name(),
            if spec.kv_cache_fp8 { "-kvfp8" } else { "" }
        );
        let bundle = spec
            .root
            .join(spec.hardware)
            .join(&spec.model.name)
            .join(&variant);
        if !bundle.is_dir() {
            return Err(load::missing_bundle(spec.root, &bundle));
        }
        let tp = spec.tp.max(1);
        let tps = load::tp_folders(&bundle);
        if !tps.contains(&tp) {
            let available: Vec<String> = tps.iter().map(|t| format!("tp{t}")).collect();
            return Err(ProfileError::MissingTp {
                bundle,
                tp,
                available: if available.is_empty() {
                    "none".into()
                } else {
                    available.join(", ")
                },
            });
        }
        let arch = match spec.architecture {
            Some(path) => Architecture::from_file(path)?,
            None => Architecture::bundled(&spec.model.model_type)?,
        };
        let meta = meta::load_meta(&bundle, tp)?;
        warn_if_beyond_profiled(spec, &meta, &bundle);

        let attention = load::load_attention(&bundle.join(format!("tp{tp}/attention.csv")))?;
        let mut resolver = Resolver {
            spec,
            arch: &arch,
            bundle: &bundle,
            tp,
            tps: &tps,
            files: Vec::new(),
            moe: None,
            warned: Vec::new(),
        };
        let mut rows = Vec::new();
        for (section, layers) in arch.step_sections(spec.model.moe.is_some()) {
            for layer in layers {
                if let Some(row) = resolver.row(section, layer)? {
                    rows.push(row);
                }
            }
        }
        Ok(ProfileDb {
            bundle,
            rows,
            pricer: Pricer {
                attention,
                skew: meta.skew,
                counts: LookupCounts::default(),
            },
        })
    }

    /// The bundle folder in use: `<root>/<hardware>/<org>/<model>/<variant>`.
    pub fn bundle_dir(&self) -> &Path {
        &self.bundle
    }

    /// Lookups made so far, and how many fell outside the profiled grid.
    pub fn lookup_counts(&self) -> LookupCounts {
        self.pricer.counts
    }
}

/// Logs once per load when the runtime limits exceed the profiled ones.
fn warn_if_beyond_profiled(spec: &ProfileSpec<'_>, meta: &meta::Meta, bundle: &Path) {
    let runtime_tokens = u64::from(spec.max_num_batched_tokens);
    if let Some(profiled) = meta.max_num_batched_tokens
        && profiled > 0
        && runtime_tokens > profiled
    {
        log::warn!(
            "max-num-batched-tokens {runtime_tokens} exceeds the {profiled} profiled in {}; \
             dense and attention lookups above it extrapolate",
            bundle.display()
        );
    }
    if let (Some(profiled), Some(runtime)) = (meta.max_num_seqs, spec.max_num_seqs)
        && profiled > 0
        && u64::from(runtime) > profiled
    {
        log::warn!(
            "max-num-seqs {runtime} exceeds the {profiled} profiled in {}; per-sequence \
             lookups above it extrapolate",
            bundle.display()
        );
    }
}

/// Turns sequence layers into rows, reading each table file once.
struct Resolver<'a> {
    spec: &'a ProfileSpec<'a>,
    arch: &'a Architecture,
    bundle: &'a Path,
    tp: u32,
    /// The TP degrees with a folder, ascending.
    tps: &'a [u32],
    /// Tables read so far, by file.
    files: Vec<(PathBuf, Vec<(String, Table1d)>)>,
    moe: Option<MoeTable>,
    /// Block layers already reported as missing.
    warned: Vec<String>,
}

impl Resolver<'_> {
    /// `<bundle>/tp<N>/<file>`, where N is 1 for a `tp_stable` layer when `tp1/` exists, else
    /// the run's TP degree.
    fn file_of(&self, layer: &arch::Layer, file: &str) -> PathBuf {
        let tp = if layer.tp_stable && self.tps.contains(&1) {
            1
        } else {
            self.tp
        };
        self.bundle.join(format!("tp{tp}")).join(file)
    }

    fn row(&mut self, section: Section, layer: &arch::Layer) -> Result<Option<Row>, ProfileError> {
        let per_block = section.per_block();
        if per_block && layer.name == "rotary_emb" && self.spec.hardware.contains("TPU") {
            return Ok(None);
        }
        let price = match layer.category {
            Category::Attention => Price::Attention,
            Category::Moe => Price::Moe(self.moe_block(layer)?),
            category @ (Category::Dense | Category::PerSequence) => {
                let file = self.file_of(
                    layer,
                    match category {
                        Category::Dense => "dense.csv",
                        _ => "per_sequence.csv",
                    },
                );
                match self.table(&file, category, &layer.name)? {
                    Some(t) if category == Category::Dense => Price::Tokens(t),
                    Some(t) => Price::Sequences(t),
                    None if per_block => {
                        if !self.warned.contains(&layer.name) {
                            log::warn!(
                                "layer `{}` is in the sequence of {} but {} has no rows for it; \
                                 skipping it",
                                layer.name,
                                self.arch.source,
                                file.display()
                            );
                            self.warned.push(layer.name.clone());
                        }
                        return Ok(None);
                    }
                    None => {
                        return Err(ProfileError::MissingLayer {
                            path: file,
                            layer: layer.name.clone(),
                            section: if section == Section::Head {
                                "head"
                            } else {
                                "prologue"
                            },
                            architecture: self.arch.source.clone(),
                        });
                    }
                }
            }
        };
        Ok(Some(Row {
            name: intern(&layer.name),
            repeats: if per_block {
                self.spec.model.num_layers
            } else {
                1
            },
            price,
        }))
    }

    /// The table of `layer` in `file`, reading the file on first use.
    fn table(
        &mut self,
        file: &Path,
        category: Category,
        layer: &str,
    ) -> Result<Option<Table1d>, ProfileError> {
        let index = match self.files.iter().position(|(p, _)| p == file) {
            Some(i) => i,
            None => {
                let tables = load::load_1d(file, category, self.arch)?;
                self.files.push((file.to_path_buf(), tables));
                self.files.len() - 1
            }
        };
        Ok(self.files[index]
            .1
            .iter()
            .find(|(name, _)| name == layer)
            .map(|(_, t)| t.clone()))
    }

    fn moe_block(&mut self, layer: &arch::Layer) -> Result<MoeBlock, ProfileError> {
        let Some(moe) = &self.spec.model.moe else {
            return Err(ProfileError::Architecture {
                file: self.arch.source.clone(),
                message: format!(
                    "layer `{}` is a moe layer, but {} has no experts",
                    layer.name, self.spec.model.name
                ),
            });
        };
        let table = match &self.moe {
            Some(table) => table.clone(),
            None => {
                // MoE is profiled at tp1 only: `tp1/`, else the lowest TP degree there is.
                let tp = if self.tps.contains(&1) {
                    1
                } else {
                    self.tps[0]
                };
                let table = load::load_moe(&self.bundle.join(format!("tp{tp}/moe.csv")))?;
                self.moe = Some(table.clone());
                table
            }
        };
        Ok(MoeBlock {
            table,
            top_k: moe.top_k,
            experts: moe.num_experts,
        })
    }
}

impl LatencyBackend for ProfileDb {
    fn name(&self) -> &'static str {
        "profile"
    }

    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        let stats = BatchStats::of(batch)?;
        let mut total: Nanos = 0;
        for row in &self.rows {
            if let Some(ns) = self.pricer.price(&row.price, &stats) {
                total += row.repeats * ns;
            }
        }
        Ok(total)
    }

    fn breakdown(&mut self, batch: &BatchDesc<'_>) -> Result<Vec<LayerTiming>, LatencyError> {
        let stats = BatchStats::of(batch)?;
        let mut layers = Vec::with_capacity(self.rows.len());
        for row in &self.rows {
            if let Some(time_ns) = self.pricer.price(&row.price, &stats) {
                layers.push(LayerTiming {
                    name: row.name,
                    repeats: row.repeats,
                    time_ns,
                    is_comm: false,
                });
            }
        }
        Ok(layers)
    }
}
