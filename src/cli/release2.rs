//! LLMServingSim 2.0's flags of its `main.py` that its v1.1 renamed or dropped, so that 2.0's
//! command lines (`evaluation/validation.sh`) run unchanged. Its renamed flags are aliases of
//! ours (`--num-req` of `--num-requests`, `--max-batch` of `--max-num-seqs`, `FAST` of the
//! expert routing policy `RAND`); those here take a conversion, a warning or a refusal.

use crate::config::{ConfigError, Dtype, Problem};
use clap::Args;

/// 2.0's flags without a same-named one here (flattened into the main job's flags).
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "LLMServingSim 2.0's flags")]
pub struct Release2Args {
    /// LLMServingSim 2.0's width of its numbers, bits: 16 is --dtype bfloat16 (2-byte
    /// weights, activations and KV, as its models' torch_dtype), 32 is --dtype float32.
    #[arg(long, value_name = "BITS", conflicts_with = "dtype", value_parser = parse_fp)]
    pub fp: Option<Dtype>,

    /// LLMServingSim 2.0's attention predictor in place of its profile lookups: a warning,
    /// nothing else (every latency backend here prices each step's attention from its own
    /// shape).
    #[arg(long)]
    pub enable_attn_prediction: bool,

    /// LLMServingSim 2.0's start of every request past its prefill: refused (not modelled).
    #[arg(long = "gen")]
    pub skip_prefill: bool,

    /// LLMServingSim 2.0's prefill-only steps while prompts wait: refused (not modelled).
    #[arg(long)]
    pub prioritize_prefill: bool,
}

impl Release2Args {
    /// Refuses the flags not modelled, and warns of the one that changes nothing.
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.skip_prefill {
            let what = "LLMServingSim 2.0's --gen (every request starting in its decode phase, \
                        its prompt's KV already in place)";
            let hint = "remove it: requests run their prefill here";
            return Err(ConfigError::flag(
                "--gen",
                Problem::unsupported(what, Some(hint)),
            ));
        }
        if self.prioritize_prefill {
            let what = "LLMServingSim 2.0's --prioritize-prefill (steps of waiting prompts only, \
                        the running decodes paused)";
            let hint = "remove it: steps here mix prefill and decode as vLLM's scheduler does";
            return Err(ConfigError::flag(
                "--prioritize-prefill",
                Problem::unsupported(what, Some(hint)),
            ));
        }
        if self.enable_attn_prediction {
            log::warn!(
                "--enable-attn-prediction (LLMServingSim 2.0) changes nothing here: every \
                 latency backend prices each step's attention from its own shape"
            );
        }
        Ok(())
    }
}

/// `--fp BITS`: 16 or 32; 8 is refused, having no equivalent (2.0 would make the
/// activations 8-bit too).
fn parse_fp(s: &str) -> Result<Dtype, Problem> {
    match s.trim() {
        "16" => Ok(Dtype::Bfloat16),
        "32" => Ok(Dtype::Float32),
        "8" => Err(Problem::unsupported(
            "--fp 8 (8-bit weights, activations and KV cache)",
            Some("the nearest is --dtype fp8 --kv-cache-dtype fp8, whose activations stay 16-bit"),
        )),
        other => Err(Problem::not_one_of(format!("`{other}`"), &["16", "32"])),
    }
}
