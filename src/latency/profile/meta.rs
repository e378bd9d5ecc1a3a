//! `meta.yaml`: the engine limits the bundle was profiled at, and the skew-correction fit.
//!
//! Only the keys LLMServingSim reads are used: `engine_effective.max_num_batched_tokens` and
//! `.max_num_seqs`, `skew_fit.enabled`, `skew_fit.bucket_axes` and
//! `skew_fit.per_tp[<tp>].{alpha_by_bucket | bucket_table, alpha_default, bucket_axes}`.
//!
//! The fit resolves as in LLMServingSim: disabled or absent → alpha 0; no entry for the TP →
//! the block's `alpha_default` (else 0); an entry → its bucket table (inline
//! `alpha_by_bucket`, else the `bucket_table` CSV) with its `alpha_default` as fallback, keyed
//! on the entry's `bucket_axes`, else the block's, else the built-in defaults. A missing
//! `bucket_table` file is a warning and leaves `alpha_default`.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

use super::load::CsvFile;
use super::skew::{BucketAxis, SkewAxes, SkewFit};
use super::{MetaProblem, ProfileError};

/// What the simulator uses from `meta.yaml`, resolved for one TP degree.
#[derive(Debug, Clone)]
pub struct Meta {
    /// `engine_effective.max_num_batched_tokens`: the largest step the grids cover.
    pub max_num_batched_tokens: u64,
    /// `engine_effective.max_num_seqs`.
    pub max_num_seqs: u64,
    pub skew: SkewFit,
    /// What the bundle says it measured: `model`, `hardware`, `architecture`,
    /// `architecture_sha256`.
    pub identity: Identity,
}

/// The `meta.yaml` keys that say what was profiled, checked against the run by `identity`.
#[derive(Debug, Clone)]
pub struct Identity {
    /// `model`, e.g. `meta-llama/Llama-3.1-8B`.
    pub model: String,
    /// `hardware`, e.g. `RTX4090` (optional).
    pub hardware: Option<String>,
    /// `architecture`: the stem of the profiler's `models/<architecture>.yaml`.
    pub architecture: String,
    /// `architecture_sha256`: that file's SHA-256, 64 lowercase hex digits (optional).
    pub architecture_sha256: Option<String>,
}

/// The keys this reader uses; LLMServingSim's profiler writes all but `skew_fit` (older
/// bundles) and more (versions, `attention_grid`, ...), which are ignored.
#[derive(Deserialize)]
#[serde(expecting = "a mapping of meta.yaml keys")]
struct MetaYaml {
    model: Option<String>,
    hardware: Option<String>,
    architecture: Option<String>,
    architecture_sha256: Option<String>,
    tp_degrees: Option<Vec<u32>>,
    engine_effective: Option<EngineYaml>,
    skew_fit: Option<SkewFitYaml>,
}

#[derive(Deserialize)]
#[serde(expecting = "a mapping with max_num_batched_tokens and max_num_seqs")]
struct EngineYaml {
    max_num_batched_tokens: Option<u64>,
    max_num_seqs: Option<u64>,
}

#[derive(Deserialize)]
#[serde(expecting = "a mapping")]
struct SkewFitYaml {
    #[serde(default)]
    enabled: bool,
    bucket_axes: Option<AxesYaml>,
    per_tp: Option<serde_yaml_ng::Mapping>,
    alpha_default: Option<f64>,
}

/// `bucket_axes` as written (its informational `pc` entry is ignored).
#[derive(Deserialize)]
#[serde(expecting = "a mapping of bins and labels")]
struct AxesYaml {
    n_bins: Vec<f64>,
    n_labels: Vec<String>,
    skew_rate_bins: Vec<f64>,
    skew_rate_labels: Vec<String>,
    kv_big_bins: Vec<f64>,
    kv_big_labels: Vec<String>,
    kp_bins: Vec<f64>,
    kp_labels: Vec<String>,
}

impl AxesYaml {
    fn resolve(self, at: &str) -> Result<SkewAxes, MetaProblem> {
        Ok(SkewAxes {
            n: BucketAxis::new(&format!("{at}.n_bins"), self.n_bins, self.n_labels)?,
            skew_rate: BucketAxis::new(
                &format!("{at}.skew_rate_bins"),
                self.skew_rate_bins,
                self.skew_rate_labels,
            )?,
            kv_big: BucketAxis::new(
                &format!("{at}.kv_big_bins"),
                self.kv_big_bins,
                self.kv_big_labels,
            )?,
            kp: BucketAxis::new(&format!("{at}.kp_bins"), self.kp_bins, self.kp_labels)?,
        })
    }
}

#[derive(Deserialize)]
#[serde(expecting = "a mapping")]
struct PerTpYaml {
    alpha_default: Option<f64>,
    bucket_table: Option<String>,
    alpha_by_bucket: Option<HashMap<String, f64>>,
    bucket_axes: Option<AxesYaml>,
}

/// Reads `<bundle>/meta.yaml` and resolves the skew fit for `tp`.
pub fn load_meta(bundle: &Path, tp: u32) -> Result<Meta, ProfileError> {
    let path = bundle.join("meta.yaml");
    super::load::regular_file(&path)?;
    let text = match crate::paths::read_text(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ProfileError::MissingFile { path });
        }
        Err(source) => return Err(ProfileError::Io { path, source }),
    };
    let invalid = |field: String, problem| ProfileError::Meta {
        path: path.clone(),
        field,
        problem,
    };
    let meta = parse(&text).map_err(|(field, problem)| invalid(field, problem))?;
    let required = |(field, problem): (String, MetaProblem)| invalid(field, problem);
    let identity = Identity {
        model: present(meta.model, "model").map_err(required)?,
        hardware: meta.hardware,
        architecture: present(meta.architecture, "architecture").map_err(required)?,
        architecture_sha256: meta.architecture_sha256,
    };
    let degrees = present(meta.tp_degrees, "tp_degrees").map_err(required)?;
    if !degrees.contains(&tp) {
        return Err(invalid(
            "tp_degrees".into(),
            MetaProblem::TpNotListed { degrees, tp },
        ));
    }
    let engine = present(meta.engine_effective, "engine_effective").map_err(required)?;
    let max_num_batched_tokens = positive(
        engine.max_num_batched_tokens,
        "engine_effective.max_num_batched_tokens",
    )
    .map_err(required)?;
    let max_num_seqs =
        positive(engine.max_num_seqs, "engine_effective.max_num_seqs").map_err(required)?;
    let skew = match meta.skew_fit {
        Some(fit) if fit.enabled => skew_fit(fit, tp, bundle, &path)?,
        _ => SkewFit::Constant(0.0),
    };
    Ok(Meta {
        max_num_batched_tokens,
        max_num_seqs,
        skew,
        identity,
    })
}

/// The enabled skew fit of `meta.yaml` at `path` for `tp`: its `per_tp` entry (inline alphas
/// or a bucket table inside `bundle`), else the constant `alpha_default`.
fn skew_fit(
    fit: SkewFitYaml,
    tp: u32,
    bundle: &Path,
    path: &Path,
) -> Result<SkewFit, ProfileError> {
    let invalid = |field: String, problem| ProfileError::Meta {
        path: path.to_path_buf(),
        field,
        problem,
    };
    let required = |(field, problem): (String, MetaProblem)| invalid(field, problem);
    let Some(value) = fit.per_tp.as_ref().and_then(|m| tp_entry(m, tp)) else {
        return Ok(SkewFit::Constant(
            alpha(fit.alpha_default, "skew_fit.alpha_default").map_err(required)?,
        ));
    };
    let at = format!("skew_fit.per_tp.{tp}");
    let entry: PerTpYaml = serde_yaml_ng::from_value(value.clone())
        .map_err(|e| invalid(at.clone(), MetaProblem::Syntax(e.to_string())))?;
    let axes = match entry.bucket_axes.or(fit.bucket_axes) {
        Some(axes) => axes
            .resolve("skew_fit.bucket_axes")
            .map_err(|m| invalid(at.clone(), m))?,
        None => SkewAxes::defaults(),
    };
    let alphas = match (entry.alpha_by_bucket, entry.bucket_table) {
        (Some(inline), _) if !inline.is_empty() => {
            for (key, &value) in &inline {
                let field = format!("{at}.alpha_by_bucket.{key}");
                alpha(Some(value), &field).map_err(required)?;
            }
            inline
        }
        (_, Some(table)) => {
            let table =
                inside_bundle(&table).map_err(|m| invalid(format!("{at}.bucket_table"), m))?;
            read_bucket_table(&bundle.join(table))?
        }
        _ => HashMap::new(),
    };
    warn_unknown_buckets(path, tp, &axes, &alphas);
    let default = alpha(entry.alpha_default, &format!("{at}.alpha_default")).map_err(required)?;
    Ok(SkewFit::buckets(axes, alphas, default))
}

/// The YAML text as [`MetaYaml`]; an error is `(field, message)`. An empty file (or one of
/// comments only) and a document that is not a mapping are named as such.
fn parse(text: &str) -> Result<MetaYaml, (String, MetaProblem)> {
    let whole = |problem| ("(file)".to_string(), problem);
    let syntax = |e: &dyn std::fmt::Display| whole(MetaProblem::Syntax(e.to_string()));
    crate::yaml::check_nesting(text).map_err(|deep| syntax(&deep))?;
    let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).map_err(|e| syntax(&e))?;
    match value {
        serde_yaml_ng::Value::Null => Err(whole(MetaProblem::Empty)),
        serde_yaml_ng::Value::Mapping(_) => serde_path_to_error::deserialize(value).map_err(|e| {
            let problem = MetaProblem::Syntax(e.inner().to_string());
            (e.path().to_string(), problem)
        }),
        _ => Err(whole(MetaProblem::NotMapping)),
    }
}

/// The largest skew alpha accepted, either sign. Alphas are fits of
/// `(t_skew − t_mean) / (t_max − t_mean)` and unclamped: LLMServingSim's bundles reach −735.
const MAX_ALPHA: f64 = 1e4;

/// An optional alpha (0 when absent), finite and within [`MAX_ALPHA`].
fn alpha(value: Option<f64>, field: &str) -> Result<f64, (String, MetaProblem)> {
    match value {
        None => Ok(0.0),
        Some(a) if a.is_finite() && a.abs() <= MAX_ALPHA => Ok(a),
        Some(a) => {
            let problem = MetaProblem::AlphaOutOfRange {
                value: a,
                max: MAX_ALPHA,
            };
            Err((field.into(), problem))
        }
    }
}

/// A required key's value; its absence is `(field, missing)`.
fn present<T>(value: Option<T>, field: &str) -> Result<T, (String, MetaProblem)> {
    value.ok_or_else(|| (field.to_string(), MetaProblem::Missing))
}

/// A required count of at least 1.
fn positive(value: Option<u64>, field: &str) -> Result<u64, (String, MetaProblem)> {
    match present(value, field)? {
        0 => Err((field.into(), MetaProblem::Zero)),
        n => Ok(n),
    }
}

/// Warns when bucket keys of the fit for `tp` name labels its axes do not have: those
/// alphas can never apply, which a damaged or mismatched table would otherwise hide.
fn warn_unknown_buckets(path: &Path, tp: u32, axes: &SkewAxes, alphas: &HashMap<String, f64>) {
    let unknown: Vec<&String> = alphas.keys().filter(|k| !axes.knows(k)).collect();
    if let Some(first) = unknown.iter().min() {
        log::warn!(
            "{}: skew fit for tp {tp}: {} of {} bucket keys name labels not in its bucket \
             axes and are never used (first: `{first}`)",
            path.display(),
            unknown.len(),
            alphas.len()
        );
    }
}

/// A `bucket_table` path, relative and without `..`, so that it names a file inside the
/// bundle.
fn inside_bundle(table: &str) -> Result<&Path, MetaProblem> {
    use std::path::Component;
    let path = Path::new(table);
    if path.components().all(|c| matches!(c, Component::Normal(_))) {
        Ok(path)
    } else {
        Err(MetaProblem::OutsideBundle {
            table: table.to_owned(),
        })
    }
}

/// The `per_tp` entry for `tp`, keyed by the integer or its string; an empty entry counts as
/// none (LLMServingSim tests it for truthiness).
fn tp_entry(per_tp: &serde_yaml_ng::Mapping, tp: u32) -> Option<&serde_yaml_ng::Value> {
    use serde_yaml_ng::Value;
    let value = per_tp.iter().find_map(|(k, v)| {
        let matches = match k {
            Value::Number(n) => n.as_u64() == Some(u64::from(tp)),
            Value::String(s) => s.trim() == tp.to_string(),
            _ => false,
        };
        matches.then_some(v)
    })?;
    match value {
        Value::Null => None,
        Value::Mapping(m) if m.is_empty() => None,
        v => Some(v),
    }
}

/// `tp<N>/skew_fit.csv`: alpha by bucket key. The key is the `raw_key` column when present
/// and non-empty, else `pc={int(pc)}|{n_label}|{skew_rate_label}|{kv_big_label}|{kp_label}`.
/// A later row with the same key replaces an earlier one. A missing file is a warning.
fn read_bucket_table(path: &Path) -> Result<HashMap<String, f64>, ProfileError> {
    let csv = match CsvFile::open(path) {
        Ok(csv) => csv,
        Err(ProfileError::MissingFile { path }) => {
            log::warn!(
                "skew fit bucket table {} is missing; using alpha_default",
                path.display()
            );
            return Ok(HashMap::new());
        }
        Err(e) => return Err(e),
    };
    let alpha_col = csv.column("alpha")?;
    let raw_col = csv.find_column("raw_key");
    let parts = [
        "pc",
        "n_label",
        "skew_rate_label",
        "kv_big_label",
        "kp_label",
    ]
    .map(|name| (name, csv.find_column(name)));
    let mut alphas = HashMap::new();
    csv.for_each(|r| {
        let mut key = String::with_capacity(64);
        if let Some(c) = raw_col {
            key.push_str(r.text(c)?);
        }
        if key.is_empty() {
            for (i, (name, col)) in parts.iter().enumerate() {
                let Some(col) = *col else {
                    return Err(ProfileError::Malformed {
                        path: path.to_path_buf(),
                        line: r.line,
                        column: name.to_string(),
                        message: "missing column (and no raw_key)".into(),
                    });
                };
                if i == 0 {
                    // `int(pc)`: whole numbers written as floats are accepted too.
                    let pc = r.finite(col)?.trunc() as i64;
                    key.push_str("pc=");
                    key.push_str(itoa::Buffer::new().format(pc));
                } else {
                    key.push('|');
                    key.push_str(r.text(col)?);
                }
            }
        }
        let value = r.finite(alpha_col)?;
        alpha(Some(value), "alpha").map_err(|(_, m)| r.malformed(alpha_col, m.to_string()))?;
        alphas.insert(key, value);
        Ok(())
    })?;
    Ok(alphas)
}
