//! The quick workload of BLIS's and vLLM bench's command lines (`--rate R --num-prompts N
//! --prompt-tokens P --output-tokens O`): Poisson arrivals at `R` requests per second, every
//! prompt `P` tokens and every answer `O` tokens, generated as a one-client WorkloadSpec.

use super::{SpecError, WorkloadSpec};

/// The quick workload's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Synthetic {
    /// Requests per second (Poisson arrivals).
    pub rate: f64,
    /// Prompt tokens of every request.
    pub prompt_tokens: u32,
    /// Output tokens of every request.
    pub output_tokens: u32,
}

/// The rate is a finite positive number (never NaN), so equality is total.
impl Eq for Synthetic {}

impl Synthetic {
    /// BLIS's defaults: 512 prompt and 512 output tokens.
    pub const DEFAULT_TOKENS: u32 = 512;
    /// Requests generated when `--num-prompts` is not given (BLIS's default).
    pub const DEFAULT_REQUESTS: u64 = 100;

    /// The spec these settings describe, as YAML text.
    pub fn yaml(&self) -> String {
        format!(
            "version: \"2\"\nseed: 42\ncategory: language\naggregate_rate: {rate}\n\
             num_requests: {n}\nclients:\n  - id: quick\n    rate_fraction: 1.0\n    \
             arrival:\n      process: poisson\n    input_distribution:\n      type: constant\n      \
             params:\n        value: {p}\n    output_distribution:\n      type: constant\n      \
             params:\n        value: {o}\n",
            rate = self.rate,
            n = Synthetic::DEFAULT_REQUESTS,
            p = self.prompt_tokens,
            o = self.output_tokens,
        )
    }

    /// The spec these settings describe.
    pub fn spec(&self) -> Result<WorkloadSpec, SpecError> {
        WorkloadSpec::from_yaml(&self.yaml(), "--rate")
    }
}
