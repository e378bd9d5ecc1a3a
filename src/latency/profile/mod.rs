//! The profile-DB backend: per-layer latencies measured on real GPUs (LLMServingSim 2.0
//! profile bundles), interpolated to the batch at hand. See [`ProfileDb`].
//!
//! Files: `arch` (layer sequences), `load` (folders and CSVs), `meta` (`meta.yaml`), `skew`
//! (the skew alpha), `lookup` (interpolation), `resolve` (sequence → priced rows), `error`.

pub mod arch;
mod error;
pub mod identity;
mod load;
pub mod lookup;
pub mod meta;
mod resolve;
pub mod shape;
pub mod skew;

use std::path::{Path, PathBuf};

use arch::Architecture;
pub use error::{MetaProblem, ProfileError};
use lookup::{AttentionTable, Edges, truncate_ns};
use resolve::{Part, Price, Resolver, Row};
use skew::SkewFit;

use super::{
    BatchDesc, Collectives, LatencyBackend, LatencyError, LayerTiming, MoeShape, StepParts,
};
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
    /// TP all-reduces and EP dispatch/combine to price as rows of the step
    /// ([`Collectives::NONE`] for none), and the expert parallelism the MoE layer runs at.
    pub collectives: Collectives,
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
    /// Lookups made while pricing steps (a report re-reading a priced step does not count,
    /// see [`LatencyBackend::count_lookups`]).
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

/// Per-layer latencies from a profile bundle, priced the way LLMServingSim prices a trace.
///
/// A bundle is `<root>/<hardware>/<org>/<model>/<variant>/` with `meta.yaml` and one
/// `tp<N>/` folder per TP degree holding `dense.csv`, `per_sequence.csv`, `attention.csv` and,
/// for mixture-of-experts models, `moe.csv` (read from `tp1/`, else the lowest TP folder).
/// Layers marked `tp_stable` are read from `tp1/` when it exists. The architecture YAML (ours
/// in `model_archs/layers/`, or LLMServingSim's) gives the layer sequence of one step.
///
/// A step runs the prologue once, the transformer block `num_hidden_layers` times and the
/// head once; its time is the sum of the rows. The batch maps onto LLMServingSim's batch
/// context as: `total_len` = Σ new tokens; the items with more than one new token are
/// collapsed into one prefill of `prefill_chunk` = Σ their new tokens over `kv_prefill` = Σ
/// their contexts; the one-token items are the `n_decode` decodes, with mean (floored), max and
/// min context; `lm_head_len` = item count. Dense layers are looked up at `max(total_len, 1)`
/// tokens, per-sequence layers at `lm_head_len` sequences, attention on the 4D grid with the
/// skew correction (the row is omitted without prefill and decodes, which a valid batch always
/// has), the MoE block at BALANCED routing with EP 1. A block layer without rows in its table
/// is skipped with a warning; a prologue or head layer without rows fails the load.
///
/// Everything is resolved at load: the rows of a step and the table each row reads, so
/// [`LatencyBackend::step_time`] does no allocation and no name lookups.
#[derive(Debug)]
pub struct ProfileDb {
    bundle: PathBuf,
    rows: Vec<Row>,
    pricer: Pricer,
}

/// The state shared by all rows: the attention grid, the skew fit, the collectives and the
/// counters.
#[derive(Debug)]
struct Pricer {
    attention: AttentionTable,
    skew: SkewFit,
    collectives: Collectives,
    shape: MoeShape,
    counts: LookupCounts,
    /// Whether lookups are counted (see [`LatencyBackend::count_lookups`]).
    counting: bool,
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
    /// Tokens whose gate decisions fire the instance's experts ([`BatchDesc::gate_tokens`]).
    gate_tokens: u64,
    /// A hash of the batch (salts random expert routing).
    fingerprint: u64,
    /// See [`BatchDesc::graph_replayed`] (the TP all-reduces' copies).
    graph_replayed: bool,
}

impl BatchStats {
    fn of(batch: &BatchDesc<'_>) -> Result<BatchStats, LatencyError> {
        if batch.items.is_empty() {
            return Err(LatencyError::EmptyBatch { backend: "profile" });
        }
        let pad = u64::from(batch.pad_tokens);
        let mut s = BatchStats {
            total_len: pad,
            prefill_chunk: 0,
            kv_prefill: 0,
            n_decode: 0,
            kv_decode_mean: 0,
            kv_decode_max: 0,
            kv_decode_min: u64::MAX,
            lm_head_len: batch.items.len() as u64 + pad,
            gate_tokens: batch.expert_gate_tokens(),
            fingerprint: pad,
            graph_replayed: batch.graph_replayed,
        };
        let mut decode_sum = 0u64;
        for (i, item) in batch.items.iter().enumerate() {
            let (new, context) = (u64::from(item.new_tokens), u64::from(item.context_tokens));
            if new == 0 {
                return Err(LatencyError::NoTokens {
                    backend: "profile",
                    item: i,
                });
            }
            s.total_len += new;
            s.fingerprint = mix(s.fingerprint ^ (new << 32 | context));
            if item.is_decode() && batch.attention_offloaded {
                // Its attention runs on PIM: only the dense layers see it.
            } else if item.is_decode() {
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

/// SplitMix64's finaliser: a cheap, well-spread mix of a running batch hash.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Pricer {
    /// The time of one occurrence of a row, or `None` for an omitted attention row.
    fn price(&mut self, price: &mut Price, s: &BatchStats) -> Option<Nanos> {
        let mut edges = Edges::default();
        let ns = match price {
            Price::Tokens(t) => truncate_ns(t.interpolate(s.total_len.max(1), &mut edges)),
            Price::Sequences(t) => truncate_ns(t.interpolate(s.lm_head_len.max(1), &mut edges)),
            Price::Attention => self.attention(s, &mut edges)?,
            // The instance's EP ranks run in parallel: the slowest one counts. A rank the
            // gate sends no token costs nothing.
            Price::Moe(m) => {
                let mut slowest = 0;
                for load in m.router.route(s.total_len, s.gate_tokens, s.fingerprint) {
                    if load.tokens > 0 {
                        let ns = m.table.lookup(load.tokens, load.experts.max(1), &mut edges);
                        slowest = slowest.max(ns);
                    }
                }
                slowest
            }
            // Communication is arithmetic, not a table lookup: not counted.
            Price::TpAllReduce => {
                return Some(self.collectives.tp_all_reduce_step_ns(
                    s.total_len,
                    self.shape.hidden,
                    self.shape.fp,
                    s.graph_replayed,
                ));
            }
            Price::EpDispatch => {
                return Some(self.collectives.ep_dispatch_ns(s.total_len, &self.shape));
            }
            Price::EpCombine => {
                return Some(self.collectives.ep_combine_ns(s.total_len, &self.shape));
            }
        };
        if self.counting {
            self.counts.record(edges);
        }
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
        identity::check(spec, &meta.identity, &bundle)?;
        warn_if_beyond_profiled(spec, &meta, &bundle);

        let attention = load::load_attention(&bundle.join(format!("tp{tp}/attention.csv")))?;
        let rows = Resolver::new(spec, &arch, &bundle, tp, &tps).rows()?;
        Ok(ProfileDb {
            bundle,
            rows,
            pricer: Pricer {
                attention,
                skew: meta.skew,
                collectives: spec.collectives,
                shape: MoeShape::of(spec.model, spec.dtype.activations().bytes()),
                counts: LookupCounts::default(),
                counting: true,
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

/// Logs one line when the runtime limits exceed the range the bundle was profiled over (its
/// `engine_effective` limits): the range, that lookups beyond it extrapolate linearly, and the
/// flags that keep every step within it. Once per bundle and limits in a process: the
/// instances of a cluster load the same bundle.
fn warn_if_beyond_profiled(spec: &ProfileSpec<'_>, meta: &meta::Meta, bundle: &Path) {
    static NOTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let Some(note) = beyond_profiled_note(spec, meta, bundle) else {
        return;
    };
    let mut noted = NOTED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !noted.contains(&note) {
        log::warn!("{note}");
        noted.push(note);
    }
}

/// The line [`warn_if_beyond_profiled`] logs, if the runtime limits exceed the profiled ones.
fn beyond_profiled_note(
    spec: &ProfileSpec<'_>,
    meta: &meta::Meta,
    bundle: &Path,
) -> Option<String> {
    let tokens = u64::from(spec.max_num_batched_tokens);
    let (profiled_tokens, profiled_seqs) = (meta.max_num_batched_tokens, meta.max_num_seqs);
    // `None`: no cap on the running sequences, beyond any profiled count.
    let seqs = spec.max_num_seqs.map(u64::from);
    let (over_tokens, over_seqs) = (
        tokens > profiled_tokens,
        seqs.is_none_or(|s| s > profiled_seqs),
    );
    if !over_tokens && !over_seqs {
        return None;
    }
    let seqs = seqs.map_or("unlimited".to_owned(), |s| s.to_string());
    let mut pins = Vec::new();
    if over_tokens {
        pins.push(format!("--max-num-batched-tokens {profiled_tokens}"));
    }
    if over_seqs {
        pins.push(format!("--max-num-seqs {profiled_seqs}"));
    }
    Some(format!(
        "profile bundle {} was profiled up to {profiled_tokens} batched tokens and \
         {profiled_seqs} sequences per step; this run allows max-num-batched-tokens {tokens} \
         and max-num-seqs {seqs} (vLLM's defaults for the GPU unless set), and a step beyond \
         the profiled range is priced by extending each table linearly from its last two \
         points (counted as extrapolated lookups in the summary); {} keep{} every step within \
         it",
        bundle.display(),
        pins.join(" "),
        if pins.len() == 1 { "s" } else { "" },
    ))
}

impl LatencyBackend for ProfileDb {
    fn name(&self) -> &'static str {
        "profile"
    }

    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        let stats = BatchStats::of(batch)?;
        let mut total: Nanos = 0;
        for row in &mut self.rows {
            if let Some(ns) = self.pricer.price(&mut row.price, &stats) {
                // Saturating: an extrapolated time far off the grid must not wrap the sum
                // into a short step (the engine refuses a clock that would overflow).
                total = total.saturating_add(row.repeats.saturating_mul(ns));
            }
        }
        Ok(total)
    }

    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        out: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        let stats = BatchStats::of(batch)?;
        out.clear();
        for row in &mut self.rows {
            if let Some(time_ns) = self.pricer.price(&mut row.price, &stats) {
                out.push(LayerTiming {
                    name: row.name,
                    repeats: row.repeats,
                    time_ns,
                    is_comm: row.price.is_comm(),
                });
            }
        }
        Ok(())
    }

    fn step_parts(&mut self, batch: &BatchDesc<'_>) -> Result<StepParts, LatencyError> {
        let stats = BatchStats::of(batch)?;
        let mut parts = StepParts::default();
        for row in &mut self.rows {
            if let Some(ns) = self.pricer.price(&mut row.price, &stats) {
                match row.part {
                    Part::Prologue => {
                        parts.prologue_ns = parts
                            .prologue_ns
                            .saturating_add(row.repeats.saturating_mul(ns));
                    }
                    Part::Block => parts.block_ns = parts.block_ns.saturating_add(ns),
                    Part::Head => {
                        parts.head_ns =
                            parts.head_ns.saturating_add(row.repeats.saturating_mul(ns));
                    }
                }
            }
        }
        Ok(parts)
    }

    fn profile_lookups(&self) -> Option<LookupCounts> {
        Some(self.lookup_counts())
    }

    fn count_lookups(&mut self, on: bool) {
        self.pricer.counting = on;
    }
}
