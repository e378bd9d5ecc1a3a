//! Numeric formats of weights, activations and KV cache.

use std::fmt;
use std::str::FromStr;

use super::Problem;

/// Numeric format of weights and activations (vLLM's `--dtype` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    Float16,
    Bfloat16,
    Float32,
    Fp8,
    Int8,
}

impl Dtype {
    /// Bytes per element.
    pub fn bytes(self) -> u64 {
        match self {
            Dtype::Float16 | Dtype::Bfloat16 => 2,
            Dtype::Float32 => 4,
            Dtype::Fp8 | Dtype::Int8 => 1,
        }
    }

    /// The dtype of activations, norms and attention when serving in `self`: vLLM's FP8
    /// (`--quantization fp8`) quantizes the linear layers' and experts' weights alone and
    /// keeps the rest, the KV cache included unless `--kv-cache-dtype fp8`, in 16 bits
    /// (bfloat16 here); every other dtype is its own.
    pub fn activations(self) -> Dtype {
        match self {
            Dtype::Fp8 => Dtype::Bfloat16,
            other => other,
        }
    }

    /// The bytes per element of each part of what an instance serving in `self`, with its
    /// KV cache in `kv_cache`, moves ([`ServedBytes`]).
    pub fn served(self, kv_cache: Dtype) -> ServedBytes {
        ServedBytes {
            weights: self.bytes(),
            activations: self.activations().bytes(),
            kv: kv_cache.bytes(),
        }
    }

    /// Short name used in profile-bundle variant folders (`bf16`, `fp16`, ...).
    pub fn short_name(self) -> &'static str {
        match self {
            Dtype::Float16 => "fp16",
            Dtype::Bfloat16 => "bf16",
            Dtype::Float32 => "fp32",
            Dtype::Fp8 => "fp8",
            Dtype::Int8 => "int8",
        }
    }
}

/// Bytes per element of the parts of a step as an instance serves them, the one place every
/// backend, the ET generation and memory sizing take their widths from: under FP8 only the
/// linear layers' and experts' weights are one byte ([`Dtype::activations`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServedBytes {
    /// Weights of the linear layers and the experts.
    pub weights: u64,
    /// Activations and collectives, and the weights no quantization reaches (embedding,
    /// norms, router, LM head).
    pub activations: u64,
    /// The KV cache.
    pub kv: u64,
}

impl FromStr for Dtype {
    type Err = Problem;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "float16" | "fp16" | "half" => Ok(Dtype::Float16),
            "bfloat16" | "bf16" => Ok(Dtype::Bfloat16),
            "float32" | "fp32" | "float" => Ok(Dtype::Float32),
            "fp8" | "float8" | "float8_e4m3fn" => Ok(Dtype::Fp8),
            "int8" => Ok(Dtype::Int8),
            other => Err(Problem::not_one_of(
                format!("`{other}`"),
                &["float16", "bfloat16", "float32", "fp8", "int8"],
            )),
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dtype::Float16 => "float16",
            Dtype::Bfloat16 => "bfloat16",
            Dtype::Float32 => "float32",
            Dtype::Fp8 => "fp8",
            Dtype::Int8 => "int8",
        })
    }
}

/// How the KV cache is stored (`--kv-cache-dtype`): in the model's dtype, or in fp8.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    strum::EnumIter,
    strum::EnumMessage,
    strum::IntoStaticStr,
)]
#[strum(serialize_all = "lowercase")]
pub enum KvCacheDtype {
    /// The activations' dtype (bfloat16 under fp8 weights).
    #[default]
    Auto,
    /// One byte per value.
    Fp8,
}

impl crate::choice::Choice for KvCacheDtype {
    const WHAT: &'static str = "KV-cache dtype";
    fn name(&self) -> &'static str {
        self.into()
    }
}
