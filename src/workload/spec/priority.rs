//! A client's per-request priority drawn from a distribution (`priority_distribution:
//! {values: [...], weights: [...]}`), each arrival's draw a pure function of the spec's seed,
//! the client and the arrival's id: no random stream is shared with the rest of the
//! generator, so a spec without it draws every other value as before, and a streamed spec
//! draws the same priorities as a listed one.

use serde::Deserialize;

/// Most values a priority distribution lists.
pub const MAX_VALUES: usize = 64;

/// Priorities and their weights, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPriorityDist {
    /// The priorities drawn.
    pub values: Vec<i32>,
    /// Their weights (equal when absent).
    #[serde(default)]
    pub weights: Option<Vec<f64>>,
}

/// What is wrong with a client's `priority_distribution`; each message names the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PriorityError {
    /// No value, or more than [`MAX_VALUES`].
    #[error("priority_distribution.values: give 1 to {MAX_VALUES} priorities, got {values}")]
    ValueCount { values: usize },
    /// Not one weight per value.
    #[error("priority_distribution.weights: {weights} weights for {values} values")]
    WeightCount { weights: usize, values: usize },
    /// A weight that is negative or not finite.
    #[error("priority_distribution.weights: {weight} is not a finite number >= 0")]
    BadWeight { weight: f64 },
    /// Weights that are all 0.
    #[error("priority_distribution.weights: all are 0")]
    AllZero,
    /// A distribution beside a fixed `priority`.
    #[error("give priority or priority_distribution, not both")]
    WithFixed,
}

/// A categorical distribution of priorities.
#[derive(Debug, Clone, PartialEq)]
pub struct PriorityDist {
    values: Vec<i32>,
    /// Cumulative weights, normalised: the last is 1.
    cumulative: Vec<f64>,
}

impl PriorityDist {
    /// Checks `raw` (values given, at most [`MAX_VALUES`]; one finite, non-negative weight per
    /// value, not all 0; equal weights when none given); the error names the field.
    pub fn parse(raw: RawPriorityDist) -> Result<PriorityDist, PriorityError> {
        let n = raw.values.len();
        if n == 0 || n > MAX_VALUES {
            return Err(PriorityError::ValueCount { values: n });
        }
        let weights = raw.weights.unwrap_or_else(|| vec![1.0; n]);
        if weights.len() != n {
            let weights = weights.len();
            return Err(PriorityError::WeightCount { weights, values: n });
        }
        if let Some(&w) = weights.iter().find(|w| !(w.is_finite() && **w >= 0.0)) {
            return Err(PriorityError::BadWeight { weight: w });
        }
        let total: f64 = weights.iter().sum();
        if total <= 0.0 {
            return Err(PriorityError::AllZero);
        }
        let mut sum = 0.0;
        let cumulative = weights
            .iter()
            .map(|w| {
                sum += w;
                sum / total
            })
            .collect();
        Ok(PriorityDist {
            values: raw.values,
            cumulative,
        })
    }

    /// The priority of arrival `id` of client `client` in a spec of `seed`.
    pub fn draw(&self, seed: i64, client: u32, id: u64) -> i32 {
        let key = xxhash_rust::xxh3::xxh3_64_with_seed(b"priority", seed as u64);
        let mut bytes = [0u8; 12];
        bytes[..4].copy_from_slice(&client.to_le_bytes());
        bytes[4..].copy_from_slice(&id.to_le_bytes());
        let h = xxhash_rust::xxh3::xxh3_64_with_seed(&bytes, key);
        // A uniform draw in [0, 1) from the hash's top 53 bits.
        let u = (h >> 11) as f64 / (1u64 << 53) as f64;
        let k = self.cumulative.partition_point(|&c| c <= u);
        self.values[k.min(self.values.len() - 1)]
    }

    /// The cumulative weights, normalised: the last is 1.
    pub fn cumulative(&self) -> &[f64] {
        &self.cumulative
    }
}
