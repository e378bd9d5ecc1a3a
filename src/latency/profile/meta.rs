//! `meta.yaml`: the engine limits the bundle was profiled at, and the skew-correction fit.
//!
//! Only the keys LLMServingSim reads are used: `engine_effective.max_num_batched_tokens` and
//! `.max_num_seqs`, `skew_fit.enabled`, `skew_fit.bucket_axes` and
//! `skew_fit.per_tp[<tp>].{alpha_by_bucket | bucket_table, alpha_default, bucket_axes}`.
//!
//! Alpha for a batch comes from the bucket table under the key
//! `pc={pc}|{n_label}|{skew_rate_label}|{kv_big_label}|{kp_label}`, else the TP's
//! `alpha_default`, else 0 (no correction). A missing `bucket_table` file is a warning, as in
//! LLMServingSim, and leaves `alpha_default`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;

use super::ProfileError;
use super::load::CsvFile;

/// What the simulator uses from `meta.yaml`, resolved for one TP degree.
#[derive(Debug, Clone)]
pub(super) struct Meta {
    /// `engine_effective.max_num_batched_tokens`: the largest step the grids cover.
    pub max_num_batched_tokens: Option<u64>,
    /// `engine_effective.max_num_seqs`.
    pub max_num_seqs: Option<u64>,
    pub skew: SkewFit,
}

/// One bucket axis: a value gets label `i` for the first `i` with `value <= bins[i + 1]`
/// (buckets are `(bins[i], bins[i + 1]]`), else the last label.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct BucketAxis {
    bins: Vec<f64>,
    labels: Vec<String>,
}

impl BucketAxis {
    fn new(field: &str, bins: Vec<f64>, labels: Vec<String>) -> Result<BucketAxis, String> {
        if labels.is_empty() || bins.len() != labels.len() + 1 {
            return Err(format!(
                "{field}: {} bins for {} labels (expected one more bin than labels, at least \
                 one label)",
                bins.len(),
                labels.len()
            ));
        }
        Ok(BucketAxis { bins, labels })
    }

    fn defaults(bins: &[f64], labels: &[&str]) -> BucketAxis {
        BucketAxis {
            bins: bins.to_vec(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
        }
    }

    /// `_bucket_label`.
    pub fn label(&self, value: f64) -> &str {
        let i = (0..self.labels.len())
            .find(|&i| value <= self.bins[i + 1])
            .unwrap_or(self.labels.len() - 1);
        &self.labels[i]
    }

    fn longest_label(&self) -> usize {
        self.labels.iter().map(String::len).max().unwrap_or(0)
    }
}

/// The four bucket axes of the skew-fit key.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct SkewAxes {
    pub n: BucketAxis,
    pub skew_rate: BucketAxis,
    pub kv_big: BucketAxis,
    pub kp: BucketAxis,
}

impl SkewAxes {
    /// LLMServingSim's `_DEFAULT_SKEW_AXES`, for fits whose meta predates `bucket_axes`.
    pub fn defaults() -> SkewAxes {
        SkewAxes {
            n: BucketAxis::defaults(
                &[0.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 1e6],
                &[
                    "n<=2", "n<=4", "n<=8", "n<=16", "n<=32", "n<=64", "n<=128", "n>128",
                ],
            ),
            kv_big: BucketAxis::defaults(
                &[0.0, 1024.0, 4096.0, 16384.0, 1e9],
                &["kvB<=1k", "kvB<=4k", "kvB<=16k", "kvB>16k"],
            ),
            skew_rate: BucketAxis::defaults(
                &[-0.01, 0.05, 0.15, 0.40, 0.70, 1.01],
                &["sr<=5%", "sr<=15%", "sr<=40%", "sr<=70%", "sr>70%"],
            ),
            kp: BucketAxis::defaults(&[-1.0, 0.0, 2048.0, 1e9], &["kp=0", "kp<=2k", "kp>2k"]),
        }
    }
}

/// How the skew alpha of a batch is found.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum SkewFit {
    /// The same alpha for every batch: 0 without an enabled fit, or the block-level
    /// `alpha_default` when the fit has no entry for this TP.
    Constant(f64),
    /// A per-bucket table with a fallback.
    Buckets(Box<BucketFit>),
}

/// A per-bucket alpha table.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct BucketFit {
    axes: SkewAxes,
    alphas: HashMap<String, f64>,
    /// The TP's `alpha_default`, for batches whose bucket has no entry.
    default: f64,
    /// Reused buffer for the bucket key, so that a lookup does not allocate.
    key: String,
}

impl SkewFit {
    /// A bucket table; reserves the key buffer for the longest possible key.
    pub fn buckets(axes: SkewAxes, alphas: HashMap<String, f64>, default: f64) -> SkewFit {
        let longest = "pc=".len()
            + 20
            + 4
            + [&axes.n, &axes.skew_rate, &axes.kv_big, &axes.kp]
                .iter()
                .map(|a| a.longest_label())
                .sum::<usize>();
        SkewFit::Buckets(Box::new(BucketFit {
            axes,
            alphas,
            default,
            key: String::with_capacity(longest),
        }))
    }

    /// `_skew_alpha`: the alpha for a batch with prefill chunk `pc`, `n` decodes whose skew rate
    /// is `skew_rate` (clipped to [0, 1] here), longest decode context `kv_big`, and prefill
    /// history `kp`.
    pub fn alpha(&mut self, pc: u64, n: u64, skew_rate: f64, kv_big: u64, kp: u64) -> f64 {
        let fit = match self {
            SkewFit::Constant(alpha) => return *alpha,
            SkewFit::Buckets(fit) => fit,
        };
        let axes = &fit.axes;
        fit.key.clear();
        write!(
            fit.key,
            "pc={pc}|{}|{}|{}|{}",
            axes.n.label(n as f64),
            axes.skew_rate.label(skew_rate.clamp(0.0, 1.0)),
            axes.kv_big.label(kv_big as f64),
            axes.kp.label(kp as f64)
        )
        .expect("writing to a String cannot fail");
        fit.alphas
            .get(fit.key.as_str())
            .copied()
            .unwrap_or(fit.default)
    }
}

#[derive(Deserialize)]
struct MetaYaml {
    engine_effective: Option<EngineYaml>,
    skew_fit: Option<SkewFitYaml>,
}

#[derive(Deserialize)]
struct EngineYaml {
    max_num_batched_tokens: Option<u64>,
    max_num_seqs: Option<u64>,
}

#[derive(Deserialize)]
struct SkewFitYaml {
    #[serde(default)]
    enabled: bool,
    bucket_axes: Option<AxesYaml>,
    per_tp: Option<serde_yaml_ng::Mapping>,
    alpha_default: Option<f64>,
}

/// `bucket_axes` as written (its informational `pc` entry is ignored).
#[derive(Deserialize)]
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
    fn resolve(self, at: &str) -> Result<SkewAxes, String> {
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
struct PerTpYaml {
    alpha_default: Option<f64>,
    bucket_table: Option<String>,
    alpha_by_bucket: Option<HashMap<String, f64>>,
    bucket_axes: Option<AxesYaml>,
}

/// Reads `<bundle>/meta.yaml` and resolves the skew fit for `tp`.
pub(super) fn load_meta(bundle: &Path, tp: u32) -> Result<Meta, ProfileError> {
    let path = bundle.join("meta.yaml");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ProfileError::MissingFile { path });
        }
        Err(source) => return Err(ProfileError::Io { path, source }),
    };
    let invalid = |field: String, message: String| ProfileError::Meta {
        path: path.clone(),
        field,
        message,
    };
    let meta: MetaYaml =
        serde_path_to_error::deserialize(serde_yaml_ng::Deserializer::from_str(&text))
            .map_err(|e| invalid(e.path().to_string(), e.inner().to_string()))?;

    let (max_num_batched_tokens, max_num_seqs) = meta
        .engine_effective
        .map_or((None, None), |e| (e.max_num_batched_tokens, e.max_num_seqs));
    let skew = match meta.skew_fit {
        Some(fit) if fit.enabled => {
            let entry = fit.per_tp.as_ref().and_then(|m| tp_entry(m, tp));
            match entry {
                None => SkewFit::Constant(fit.alpha_default.unwrap_or(0.0)),
                Some(value) => {
                    let at = format!("skew_fit.per_tp.{tp}");
                    let entry: PerTpYaml = serde_yaml_ng::from_value(value.clone())
                        .map_err(|e| invalid(at.clone(), e.to_string()))?;
                    let axes = match entry.bucket_axes.or(fit.bucket_axes) {
                        Some(axes) => axes
                            .resolve("skew_fit.bucket_axes")
                            .map_err(|m| invalid(at.clone(), m))?,
                        None => SkewAxes::defaults(),
                    };
                    let alphas = match (entry.alpha_by_bucket, entry.bucket_table) {
                        (Some(inline), _) if !inline.is_empty() => inline,
                        (_, Some(table)) => read_bucket_table(&bundle.join(table))?,
                        _ => HashMap::new(),
                    };
                    SkewFit::buckets(axes, alphas, entry.alpha_default.unwrap_or(0.0))
                }
            }
        }
        _ => SkewFit::Constant(0.0),
    };
    Ok(Meta {
        max_num_batched_tokens,
        max_num_seqs,
        skew,
    })
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
        alphas.insert(key, r.finite(alpha_col)?);
        Ok(())
    })?;
    Ok(alphas)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(bins: &[f64], labels: &[&str]) -> BucketAxis {
        BucketAxis::defaults(bins, labels)
    }

    #[test]
    fn a_bucket_includes_its_upper_edge_and_the_last_label_takes_the_overflow() {
        let n = SkewAxes::defaults().n;
        assert_eq!(n.label(2.0), "n<=2");
        assert_eq!(n.label(3.0), "n<=4");
        assert_eq!(n.label(128.0), "n<=128");
        assert_eq!(n.label(129.0), "n>128");
        assert_eq!(n.label(2e6), "n>128");
        let kp = SkewAxes::defaults().kp;
        assert_eq!(kp.label(0.0), "kp=0");
        assert_eq!(kp.label(1.0), "kp<=2k");
    }

    fn fit(alphas: &[(&str, f64)], default: f64) -> SkewFit {
        SkewFit::buckets(
            SkewAxes::defaults(),
            alphas.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            default,
        )
    }

    #[test]
    fn alpha_comes_from_the_bucket_of_the_batch() {
        let mut f = fit(&[("pc=0|n<=4|sr<=15%|kvB<=4k|kp=0", 0.25)], 0.05);
        // n 3, skew rate 0.1, kv_big 2000, no prefill.
        assert_eq!(f.alpha(0, 3, 0.1, 2000, 0), 0.25);
        // kv_big 5000 is another bucket → default.
        assert_eq!(f.alpha(0, 3, 0.1, 5000, 0), 0.05);
    }

    #[test]
    fn a_prefill_chunk_off_the_profiled_grid_misses_the_table_and_takes_the_default() {
        let mut f = fit(&[("pc=16|n<=4|sr<=5%|kvB<=1k|kp<=2k", 0.5)], 0.07);
        assert_eq!(f.alpha(16, 4, 0.0, 1000, 100), 0.5);
        assert_eq!(f.alpha(17, 4, 0.0, 1000, 100), 0.07);
    }

    #[test]
    fn a_skew_rate_outside_zero_to_one_is_clipped_before_bucketing() {
        let mut f = fit(&[("pc=0|n<=2|sr>70%|kvB<=1k|kp=0", 0.9)], 0.0);
        assert_eq!(f.alpha(0, 2, 1.7, 10, 0), 0.9);
    }

    #[test]
    fn a_constant_fit_ignores_the_batch() {
        assert_eq!(SkewFit::Constant(0.0).alpha(16, 8, 0.5, 100, 0), 0.0);
    }

    #[test]
    fn bucket_axes_need_one_more_bin_than_labels() {
        assert!(BucketAxis::new("x", vec![0.0, 1.0], vec!["a".into()]).is_ok());
        let err = BucketAxis::new("x", vec![0.0, 1.0], vec!["a".into(), "b".into()]);
        assert!(err.unwrap_err().contains("2 bins for 2 labels"));
        assert_eq!(axis(&[0.0, 1.0, 2.0], &["a", "b"]).label(1.5), "b");
    }
}
