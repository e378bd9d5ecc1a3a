//! The skew correction's alpha: LLMServingSim's `_skew_alpha` and `_bucket_label`.
//!
//! A batch whose decodes have different contexts is priced between the grid at the mean
//! context and the grid at the longest one, `t_mean + alpha·(t_max − t_mean)`. Alpha is read
//! from a per-bucket table under the key
//! `pc={pc}|{n_label}|{skew_rate_label}|{kv_big_label}|{kp_label}`, else the TP's
//! `alpha_default`; a bundle without an enabled fit has alpha 0.

use super::MetaProblem;
use std::collections::HashMap;
use std::fmt::Write as _;

/// One bucket axis: a value gets label `i` for the first `i` with `value <= bins[i + 1]`
/// (buckets are `(bins[i], bins[i + 1]]`), else the last label.
#[derive(Debug, Clone, PartialEq)]
pub struct BucketAxis {
    bins: Vec<f64>,
    labels: Vec<String>,
}

impl BucketAxis {
    /// An axis from `meta.yaml`; `field` names it in the error.
    pub fn new(
        field: &str,
        bins: Vec<f64>,
        labels: Vec<String>,
    ) -> Result<BucketAxis, MetaProblem> {
        if labels.is_empty() || bins.len() != labels.len() + 1 {
            return Err(MetaProblem::AxisShape {
                axis: field.to_owned(),
                bins: bins.len(),
                labels: labels.len(),
            });
        }
        Ok(BucketAxis { bins, labels })
    }

    /// An axis from built-in bins and labels (unchecked).
    pub fn defaults(bins: &[f64], labels: &[&str]) -> BucketAxis {
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
pub struct SkewAxes {
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

impl SkewAxes {
    /// Whether `key` is a bucket these axes can produce: `pc=<integer>` and one label of each
    /// axis, in key order.
    pub fn knows(&self, key: &str) -> bool {
        let mut parts = key.split('|');
        let pc_ok = parts
            .next()
            .and_then(|pc| pc.strip_prefix("pc="))
            .is_some_and(|pc| pc.parse::<i64>().is_ok());
        let labels_ok = [&self.n, &self.skew_rate, &self.kv_big, &self.kp]
            .iter()
            .all(|axis| {
                parts
                    .next()
                    .is_some_and(|l| axis.labels.iter().any(|a| a == l))
            });
        pc_ok && labels_ok && parts.next().is_none()
    }
}

/// How the skew alpha of a batch is found.
#[derive(Debug, Clone, PartialEq)]
pub enum SkewFit {
    /// The same alpha for every batch: 0 without an enabled fit, or the block-level
    /// `alpha_default` when the fit has no entry for this TP.
    Constant(f64),
    /// A per-bucket table with a fallback.
    Buckets(Box<BucketFit>),
}

/// A per-bucket alpha table.
#[derive(Debug, Clone, PartialEq)]
pub struct BucketFit {
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
