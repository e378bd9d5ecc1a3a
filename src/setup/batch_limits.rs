//! The scheduler's two limits (`max_num_batched_tokens`, `max_num_seqs`) of an instance whose
//! flags and cluster-config entry give none: what vLLM 0.19's `vllm serve` (usage context
//! `OPENAI_API_SERVER`) picks for the GPU it runs on, or LLMServingSim's fixed defaults under
//! `--llmservingsim`.
//!
//! vLLM 0.19.0, `vllm/engine/arg_utils.py`, `EngineArgs.get_batch_defaults` and
//! `EngineArgs._set_default_max_num_seqs_and_batched_tokens_args`:
//! - a device with at least 70 GiB of memory whose name does not contain `a100` (vLLM's PR
//!   #17885: the larger budget lowered A100 throughput): 8,192 tokens and 1,024 sequences;
//! - otherwise 2,048 tokens and 256 sequences;
//! - TPU chips keep those sequences with a smaller budget: v6e 1,024, v5e 512, v5p 256 tokens;
//! - with chunked prefill off, the budget is at least the model's maximum length; it is at
//!   most `max_num_seqs ×` that length, and `max_num_seqs` at most the budget.
//!
//! The same in 0.11.1, 0.12.0, 0.13.0, 0.14.0 and 0.16.0-0.18.0 (their `get_batch_defaults`),
//! so these limits do not follow `--vllm-version`.
//!
//! ROCm parts take the GPU rule (MI300X: 192 GB, the large values). vLLM's CPU platform has
//! its own values; no hardware file here describes a CPU.

use crate::config::Hardware;

/// LLMServingSim's `--max-num-seqs` default (`serving/__main__.py`), kept by `--llmservingsim`.
pub const LLMSERVINGSIM_MAX_NUM_SEQS: u32 = 128;
/// LLMServingSim's `--max-num-batched-tokens` default, kept by `--llmservingsim`.
pub const LLMSERVINGSIM_MAX_NUM_BATCHED_TOKENS: u32 = 2048;

/// vLLM's device-memory threshold for the large defaults, GiB.
const LARGE_DEVICE_GIB: f64 = 70.0;

/// A scheduler's step budget and running-request cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    pub max_num_batched_tokens: u32,
    pub max_num_seqs: u32,
}

impl BatchLimits {
    /// `vllm serve`'s defaults on an H100-class GPU (≥ 70 GiB, not an A100).
    pub const VLLM_LARGE_GPU: BatchLimits = BatchLimits {
        max_num_batched_tokens: 8192,
        max_num_seqs: 1024,
    };
    /// `vllm serve`'s defaults on every other GPU.
    pub const VLLM_OTHER_GPU: BatchLimits = BatchLimits {
        max_num_batched_tokens: 2048,
        max_num_seqs: 256,
    };

    /// `vllm serve`'s defaults for `hardware` (its `memory_gib` and `name`), before the
    /// model's length bounds them ([`BatchLimits::resolve`]).
    pub fn vllm_serve(hardware: &Hardware) -> BatchLimits {
        let name = hardware.name.to_ascii_lowercase();
        let large = hardware.memory_gib >= LARGE_DEVICE_GIB && !name.contains("a100");
        let mut limits = if large {
            BatchLimits::VLLM_LARGE_GPU
        } else {
            BatchLimits::VLLM_OTHER_GPU
        };
        if let Some(tokens) = tpu_budget(&name) {
            limits.max_num_batched_tokens = tokens;
        }
        limits
    }

    /// The instance's limits: each given value (`Some`), else this default bounded as vLLM
    /// bounds its defaults by the model's maximum length `max_len`. A given `0` budget means
    /// the model's length, a given `0` cap unlimited (`None`); a given budget is capped at the
    /// model's length (LLMServingSim's rule).
    pub fn resolve(
        self,
        tokens: Option<u32>,
        seqs: Option<u32>,
        chunked_prefill: bool,
        max_len: u32,
    ) -> (u32, Option<u32>) {
        let given_seqs = seqs.map(|n| (n > 0).then_some(n));
        let cap = given_seqs.unwrap_or(Some(self.max_num_seqs));
        let budget = match tokens {
            Some(0) => max_len,
            Some(n) => n.min(max_len),
            None => {
                let floor = if chunked_prefill { 0 } else { max_len };
                let budget = self.max_num_batched_tokens.max(floor);
                cap.map_or(budget, |c| {
                    budget.min(u32::try_from(u64::from(c) * u64::from(max_len)).unwrap_or(u32::MAX))
                })
            }
        };
        let seqs = given_seqs.unwrap_or(Some(self.max_num_seqs.min(budget)));
        (budget, seqs)
    }
}

/// `vllm serve`'s budget on a TPU chip named in `name` (lower case), if any.
fn tpu_budget(name: &str) -> Option<u32> {
    [("v6e", 1024), ("v5e", 512), ("v5p", 256)]
        .into_iter()
        .find(|(chip, _)| name.contains(chip))
        .map(|(_, tokens)| tokens)
}
