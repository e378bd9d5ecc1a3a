//! Accelerator datasheet specs, read from TOML files.

use super::{ConfigError, Dtype};

/// One accelerator's datasheet numbers plus the efficiency factors the roofline applies.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hardware {
    /// Short name (`H100-SXM`, `RTXPRO6000`, ...).
    pub name: String,
    /// Human description of the part.
    pub description: String,
    /// Peak dense FP16 tensor throughput, TFLOP/s.
    pub peak_tflops_fp16: f64,
    /// Peak dense BF16 tensor throughput, TFLOP/s.
    pub peak_tflops_bf16: f64,
    /// Peak FP32 throughput (TF32 tensor where available), TFLOP/s.
    pub peak_tflops_fp32: f64,
    /// Peak dense FP8 tensor throughput, TFLOP/s, where the part has FP8.
    pub peak_tflops_fp8: Option<f64>,
    /// Peak dense INT8 tensor throughput, TOP/s.
    pub peak_tops_int8: Option<f64>,
    /// Device memory, GiB (2^30 bytes, as LLMServingSim's `mem_size`).
    pub memory_gib: f64,
    /// Device memory bandwidth, GB/s (10^9 bytes/s).
    pub memory_bw_gbps: f64,
    /// Intra-node link bandwidth per GPU per direction, GB/s (NVLink or PCIe).
    pub link_bw_gbps: f64,
    /// Per-hop link latency, ns.
    pub link_latency_ns: f64,
    /// Fraction of peak FLOP/s reached by large kernels (0, 1].
    pub compute_efficiency: f64,
    /// Fraction of peak memory bandwidth reached by streaming kernels (0, 1].
    pub memory_efficiency: f64,
    /// Fraction of link bandwidth reached by collectives (0, 1].
    pub link_efficiency: f64,
    /// Fixed cost per kernel launch, ns.
    pub kernel_launch_ns: f64,
}

impl Hardware {
    /// Resolves `spec` as a bundled hardware name (case-insensitive; `H100` is an alias of
    /// `H100-SXM`) or as a path to a TOML file.
    pub fn resolve(spec: &str) -> Result<Hardware, ConfigError> {
        todo!("{spec}")
    }

    /// Parses and validates a hardware TOML text; `source_name` is used in error messages.
    pub fn from_toml(text: &str, source_name: &str) -> Result<Hardware, ConfigError> {
        todo!("{text}{source_name}")
    }

    /// Names of the bundled hardware, sorted.
    pub fn bundled_names() -> Vec<String> {
        todo!()
    }

    /// The hardware used when none is given: one H100-SXM.
    pub fn default_hardware() -> Hardware {
        todo!()
    }

    /// Peak dense tensor throughput for `dtype`, FLOP/s. Falls back to the 16-bit peak for
    /// 8-bit formats on parts without 8-bit tensor cores.
    pub fn peak_flops(&self, dtype: Dtype) -> f64 {
        todo!("{dtype}")
    }
}
