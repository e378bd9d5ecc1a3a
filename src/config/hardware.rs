//! Accelerator datasheet specs, read from TOML files.

use std::path::Path;

use super::{Bound, ConfigError, Dtype, Problem};
use crate::embedded::HARDWARE;

/// One accelerator's datasheet numbers plus the efficiency factors the roofline applies.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
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
    /// The part's architecture generation (`ampere`, `ada`, `hopper`, `blackwell`, ...):
    /// Hopper's attention kernels run 128-row tiles. Absent: a non-Hopper part.
    #[serde(default)]
    pub architecture: Option<String>,
    /// The part's memory technology, as its datasheet names it: a GEMM streams its weights at
    /// the share of the datasheet bandwidth its class reaches (the roofline's
    /// `GEMM_MEMORY_EFFICIENCY_*`: HBM2e, HBM3 and HBM3e, GDDR). Absent: the GDDR class's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_type: Option<MemoryType>,
    /// Whether the part runs its GDDR with in-band ECC (data-centre GDDR parts, such as the
    /// A40, ship with ECC on; GeForce and RTX workstation parts with it off): the check bits
    /// share the data's bursts, and a GEMM's weight stream takes the roofline's
    /// `GDDR_IN_BAND_ECC_SHARE` of its class's rate. Absent: false; refused on an HBM part
    /// (whose ECC bits are side-band).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_band_ecc: bool,
    /// Streaming multiprocessors (or the part's equivalent compute units): prefill
    /// attention's tiles run in waves of one per SM (`prefill_waves`); with `sm_clock_mhz`,
    /// the fused-MoE kernel's limits below. Absent: no waves, no such limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_count: Option<u32>,
    /// The SM clock at which the datasheet's tensor peak is quoted, MHz: the fused-MoE
    /// kernel streams its experts' weights at full rate only with enough thread blocks to keep
    /// the peak's bytes per clock in flight over the memory latency (see the roofline's
    /// `MOE_LATENCY_CLOCKS`), and its large tile streams at most a fixed number of bytes per
    /// SM per clock (`MOE_LARGE_TILE_BYTES_PER_CLOCK`). Absent (or without `sm_count`): no
    /// such limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<f64>,
    /// Shared memory per SM, KiB (the CUDA C++ Programming Guide's table by compute
    /// capability): how many of decode attention's split-KV thread blocks an SM holds, so how
    /// many waves its grid takes (the roofline's `decode` module). Absent: one block per SM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_memory_per_sm_kib: Option<u32>,
    /// L2 cache, MB (10^6 bytes; the datasheet's): a row kernel (norms, SiLU-and-mul, rotary)
    /// whose working set, read and written, fits it streams at the L2's rate (the roofline's
    /// `rows` module). Absent: from DRAM at any size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_cache_mb: Option<f64>,
    /// The part's CUDA compute capability, `major.minor` as vLLM spells it
    /// (`DeviceCapability.as_version_str`: `9.0` Hopper, `10.0` B200): vLLM 0.19's size
    /// limits of its custom and symmetric-memory all-reduces are tables by it
    /// (`all_reduce_utils.py`). Absent: no vLLM all-reduce dispatch (the ring alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_capability: Option<String>,
    /// What joins the GPUs of a tensor-parallel instance ([`TpFabric`]), as vLLM's all-reduce
    /// dispatch reads it; on a part without peer-to-peer access NCCL stages its collectives
    /// through host memory, priced by [`crate::latency::host_staged`] instead of the ring over
    /// `link_bw_gbps`. Absent: no vLLM all-reduce dispatch, the ring over the link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp_fabric: Option<TpFabric>,
    /// What kind of accelerator the part is ([`Accelerator`]): a TPU's step is one compiled
    /// XLA program, priced by the roofline's `tpu` module instead of its CUDA kernels.
    /// Absent: a GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator: Option<Accelerator>,
    /// Side of the part's square matrix unit (a TPU's MXU: 256 on v6e), in elements: a
    /// matmul's contraction and output widths are padded to whole tiles of it. Required with
    /// `accelerator = "tpu"`; read by nothing else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mxu_dim: Option<u32>,
    /// The host side of a step (`[host]`; defaults when absent: [`HostSpec::default`]).
    #[serde(default)]
    pub host: HostSpec,
    /// This part's own values of the roofline's kernel constants (`[kernels]`), where they
    /// were measured or calibrated; absent keys take the constants derived over eight GPUs.
    #[serde(default, skip_serializing_if = "KernelSpec::is_empty")]
    pub kernels: KernelSpec,
    /// How `blis-cosim calibrate` fitted this file, when it did (`[calibrated]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibrated: Option<Calibration>,
}

/// What joins the GPUs of one tensor-parallel instance, as vLLM 0.19 decides its all-reduce
/// from it (`custom_all_reduce.py`, `symm_mem.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TpFabric {
    /// NVLink through NVSwitch (HGX boards): every pair one NVLink hop apart (NVML's
    /// `is_fully_connected`), with multicast objects from Hopper's NVSwitch on (torch's
    /// symmetric memory needs them).
    Nvswitch,
    /// PCIe (or an NVLink-bridged pair) with peer-to-peer access: vLLM's custom all-reduce
    /// at two GPUs only, no multicast.
    PcieP2p,
    /// PCIe without peer-to-peer access (the driver refuses it, as on GeForce cards): NCCL
    /// alone, over its SHM transport, every transfer staged through pinned host memory.
    PcieNoP2p,
}

/// A part's memory technology (`memory_type`), spelled as datasheets spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub enum MemoryType {
    /// HBM2e (A100, A800).
    #[serde(rename = "HBM2e")]
    Hbm2e,
    /// HBM3 (H100 SXM, H800).
    #[serde(rename = "HBM3")]
    Hbm3,
    /// HBM3e (H200, B200).
    #[serde(rename = "HBM3e")]
    Hbm3e,
    /// GDDR6 (A40, RTX A6000).
    #[serde(rename = "GDDR6")]
    Gddr6,
    /// GDDR6X (RTX 3090, RTX 4090).
    #[serde(rename = "GDDR6X")]
    Gddr6x,
    /// GDDR7 (RTX PRO 6000 Blackwell).
    #[serde(rename = "GDDR7")]
    Gddr7,
}

/// The kind of accelerator a hardware file describes (`accelerator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Accelerator {
    /// A GPU served by vLLM's CUDA path (kernel launches, CUDA graphs, FlashAttention).
    Gpu,
    /// A TPU served by vLLM's TPU path: each step one compiled XLA program per padded shape.
    Tpu,
}

impl Hardware {
    /// Whether the part is a TPU (`accelerator = "tpu"`).
    pub fn is_tpu(&self) -> bool {
        self.accelerator == Some(Accelerator::Tpu)
    }

    /// Whether the GPUs of a TP instance lack peer access, so that NCCL stages collectives
    /// through host memory (`tp_fabric = "pcie-no-p2p"`).
    pub fn stages_collectives_through_host(&self) -> bool {
        self.tp_fabric == Some(TpFabric::PcieNoP2p)
    }
}

/// The part's own values of the roofline's kernel constants; `None`: the constant derived
/// over eight GPUs' kernel tables (`src/latency/roofline.rs`, `scripts/derive_roofline.py`).
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct KernelSpec {
    /// Fraction of peak dense FLOP/s a compute-bound GEMM reaches (also the cap of prefill
    /// attention's rate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gemm_compute_efficiency: Option<f64>,
    /// Fraction of peak memory bandwidth at which a GEMM streams its weights.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gemm_memory_efficiency: Option<f64>,
    /// Fraction of peak memory bandwidth at which decode attention reads the KV cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode_attention_efficiency: Option<f64>,
    /// Fraction of peak memory bandwidth at which the fused-MoE kernel streams the weights
    /// of the experts a batch hits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moe_memory_efficiency: Option<f64>,
    /// Fixed time of every GEMM kernel (ramp-up, tail wave, split-K reduction), ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gemm_fixed_ns: Option<f64>,
}

impl KernelSpec {
    /// Every efficiency as `(key, value)`.
    pub fn efficiencies(&self) -> [(&'static str, Option<f64>); 4] {
        [
            (
                "kernels.gemm_compute_efficiency",
                self.gemm_compute_efficiency,
            ),
            (
                "kernels.gemm_memory_efficiency",
                self.gemm_memory_efficiency,
            ),
            (
                "kernels.decode_attention_efficiency",
                self.decode_attention_efficiency,
            ),
            ("kernels.moe_memory_efficiency", self.moe_memory_efficiency),
        ]
    }

    /// Whether no constant is set (the section is then left out of a written file).
    pub fn is_empty(&self) -> bool {
        self.gemm_fixed_ns.is_none() && self.efficiencies().iter().all(|(_, v)| v.is_none())
    }
}

/// Largest share of the datasheet's peak a kernel constant may claim: a part that sustains a
/// boost clock above the datasheet's runs its GEMMs a little over 1 (RTX 4090: 1.02).
pub const MAX_KERNEL_EFFICIENCY: f64 = 1.1;
/// Host times (per launch or step), ns: a second of host time is no physical host.
const HOST_NS: Bound = Bound::closed(0.0, 1e9, "ns");
/// A GEMM's fixed time, ns.
const GEMM_FIXED_NS: Bound = Bound::closed(0.0, 1e6, "ns");

/// What `blis-cosim calibrate` fitted a hardware file to.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// The date of the fit, `YYYY-MM-DD` (UTC).
    pub date: String,
    /// The hardware file the fit started from (a bundled name or a path).
    pub base: String,
    /// The fitted keys, as written in this file (`kernels.gemm_memory_efficiency`, ...).
    pub fitted: Vec<String>,
    /// The fit's residual: the root mean square of `validate`'s 15 Diff% numbers over the
    /// runs fitted, in percentage points.
    pub residual_pct: f64,
    /// The same before the fit (the base file's constants).
    pub initial_residual_pct: f64,
    /// Where the real runs' TTFT and latency start (`validate --vllm-arrival`).
    pub vllm_arrival: String,
    /// The runs fitted.
    pub runs: Vec<CalibrationRun>,
}

/// One real run a hardware file was fitted to.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct CalibrationRun {
    /// Its `requests.jsonl`, as given.
    pub path: String,
    /// SHA-256 of that file, hex.
    pub sha256: String,
    /// Its requests.
    pub requests: u64,
}

impl Calibration {
    /// The fitted run whose `requests.jsonl` has SHA-256 `sha256`, if any.
    pub fn run_with_sha256(&self, sha256: &str) -> Option<&CalibrationRun> {
        self.runs
            .iter()
            .find(|r| r.sha256.eq_ignore_ascii_case(sha256))
    }
}

/// What the host (CPU) spends on a step of vLLM, ns: the launches it issues per mode and the
/// CPU work of the step. The defaults are public measurements (see `hardware/*.toml` and
/// the guide's host-model section, docs/src/modelling.md, for the sources).
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HostSpec {
    /// One driver launch: a CUDA graph (or graph piece), or a kernel or memset that an eager
    /// op's C++ launches after its first, ns.
    pub launch_ns: f64,
    /// One kernel of the compiled model launched without a graph (Inductor's Python wrapper
    /// plus the driver launch), ns.
    pub compiled_kernel_ns: f64,
    /// One eagerly launched PyTorch op (Python dispatch plus the launch), ns.
    pub eager_op_ns: f64,
    /// One bare PyTorch op called from a Python function of tensor ops (no module call or
    /// layer glue between ops, as PhiMoE's `sparsemixer` or a decoder layer's residual add),
    /// ns.
    pub torch_op_ns: f64,
    /// One launch of vLLM's fused-MoE Triton kernel outside a graph (`invoke_fused_moe_kernel`'s
    /// Python and Triton's launcher), ns; a fused-MoE layer makes two.
    pub triton_launch_ns: f64,
    /// The CPU work of a step outside the forward pass (scheduling, input preparation,
    /// output processing), ns.
    pub step_cpu_ns: f64,
    /// The same work per scheduled request, ns.
    pub seq_cpu_ns: f64,
}

impl Default for HostSpec {
    fn default() -> HostSpec {
        HostSpec {
            launch_ns: 3_000.0,
            compiled_kernel_ns: 7_000.0,
            eager_op_ns: 22_600.0,
            torch_op_ns: 10_500.0,
            triton_launch_ns: 50_100.0,
            step_cpu_ns: 400_000.0,
            seq_cpu_ns: 12_700.0,
        }
    }
}

impl HostSpec {
    /// Every field as `(key, value)`, for validation.
    fn fields(&self) -> [(&'static str, f64); 7] {
        [
            ("host.launch_ns", self.launch_ns),
            ("host.compiled_kernel_ns", self.compiled_kernel_ns),
            ("host.eager_op_ns", self.eager_op_ns),
            ("host.torch_op_ns", self.torch_op_ns),
            ("host.triton_launch_ns", self.triton_launch_ns),
            ("host.step_cpu_ns", self.step_cpu_ns),
            ("host.seq_cpu_ns", self.seq_cpu_ns),
        ]
    }
}

impl Hardware {
    /// Resolves `spec` as a path to a TOML file (an existing file, or any name ending in
    /// `.toml`) or as a bundled hardware name (case-insensitive; `H100` is an alias of
    /// `H100-SXM`, `A100` of `A100-80G`, `TPU-v6e` and `v6e` of `TPU-v6e-1`).
    pub fn resolve(spec: &str) -> Result<Hardware, ConfigError> {
        let path = Path::new(spec);
        if path.is_file() || spec.ends_with(".toml") {
            let text = crate::paths::read_text(path).map_err(|source| ConfigError::Io {
                path: path.to_path_buf(),
                source,
            })?;
            return Hardware::from_toml(&text, spec);
        }
        let wanted = ALIASES
            .iter()
            .find(|(alias, _)| alias.eq_ignore_ascii_case(spec))
            .map_or(spec, |(_, name)| name);
        match bundled().find(|(name, _)| name.eq_ignore_ascii_case(wanted)) {
            Some((name, text)) => Hardware::from_toml(text, &format!("hardware/{name}.toml")),
            None => Err(ConfigError::Unknown {
                kind: "hardware",
                name: spec.to_string(),
                known: Hardware::bundled_names().join(", "),
                hint: "hardware TOML file",
            }),
        }
    }

    /// Parses and validates a hardware TOML text; `source_name` is used in error messages.
    /// Syntax, type, missing-key and unknown-key errors carry field `(toml)` and toml's
    /// message (which names the key and its line and column).
    pub fn from_toml(text: &str, source_name: &str) -> Result<Hardware, ConfigError> {
        let invalid = |field: &str, problem| ConfigError::invalid(source_name, field, problem);
        let hw: Hardware =
            toml::from_str(text.strip_prefix('\u{feff}').unwrap_or(text)).map_err(|e| {
                invalid(
                    "(toml)",
                    Problem::Syntax(crate::serde_messages::in_user_terms(&e.to_string())),
                )
            })?;
        if hw.name.trim().is_empty() {
            return Err(invalid("name", Problem::Empty));
        }
        let positive = [
            ("peak_tflops_fp16", Some(hw.peak_tflops_fp16)),
            ("peak_tflops_bf16", Some(hw.peak_tflops_bf16)),
            ("peak_tflops_fp32", Some(hw.peak_tflops_fp32)),
            ("peak_tflops_fp8", hw.peak_tflops_fp8),
            ("peak_tops_int8", hw.peak_tops_int8),
            ("memory_gib", Some(hw.memory_gib)),
            ("memory_bw_gbps", Some(hw.memory_bw_gbps)),
            ("link_bw_gbps", Some(hw.link_bw_gbps)),
        ];
        let non_negative = [
            ("link_latency_ns", hw.link_latency_ns),
            ("kernel_launch_ns", hw.kernel_launch_ns),
        ];
        let efficiencies = [
            ("compute_efficiency", hw.compute_efficiency),
            ("memory_efficiency", hw.memory_efficiency),
            ("link_efficiency", hw.link_efficiency),
        ];
        // A second of host time per launch or step is no physical host.
        let checks = (positive.into_iter().map(|(f, v)| (f, v, Bound::Positive)))
            .chain(
                (non_negative.into_iter().chain(hw.host.fields()))
                    .map(|(f, v)| (f, Some(v), HOST_NS)),
            )
            .chain(
                efficiencies
                    .into_iter()
                    .map(|(f, v)| (f, Some(v), Bound::fraction_up_to(1.0))),
            )
            .chain([
                (
                    "kernels.gemm_fixed_ns",
                    hw.kernels.gemm_fixed_ns,
                    GEMM_FIXED_NS,
                ),
                (
                    "sm_count",
                    hw.sm_count.map(f64::from),
                    Bound::closed(1.0, 100_000.0, ""),
                ),
                (
                    "sm_clock_mhz",
                    hw.sm_clock_mhz,
                    Bound::closed(1.0, 100_000.0, ""),
                ),
                (
                    "shared_memory_per_sm_kib",
                    hw.shared_memory_per_sm_kib.map(f64::from),
                    Bound::closed(1.0, 100_000.0, ""),
                ),
                (
                    "l2_cache_mb",
                    hw.l2_cache_mb,
                    Bound::closed(0.001, 100_000.0, ""),
                ),
                (
                    "mxu_dim",
                    hw.mxu_dim.map(f64::from),
                    Bound::closed(1.0, 65_536.0, ""),
                ),
            ])
            .chain(
                (hw.kernels.efficiencies().into_iter())
                    .map(|(f, v)| (f, v, Bound::fraction_up_to(MAX_KERNEL_EFFICIENCY))),
            );
        for (field, value, bound) in checks {
            if let Some(v) = value {
                bound.check(v).map_err(|p| invalid(field, p))?;
            }
        }
        if hw.is_tpu() && hw.mxu_dim.is_none() {
            return Err(invalid(
                "mxu_dim",
                Problem::disagrees(
                    "absent",
                    "a TPU (accelerator = \"tpu\") needs its matrix unit's side, e.g. 256",
                ),
            ));
        }
        let hbm = matches!(
            hw.memory_type,
            Some(MemoryType::Hbm2e | MemoryType::Hbm3 | MemoryType::Hbm3e)
        );
        if hw.in_band_ecc && hbm {
            return Err(invalid(
                "in_band_ecc",
                Problem::disagrees(
                    "true",
                    "HBM keeps its ECC bits side-band; in-band ECC is a GDDR setting",
                ),
            ));
        }
        if let Some(cc) = &hw.compute_capability
            && hw.capability().is_none()
        {
            return Err(invalid(
                "compute_capability",
                Problem::disagrees(cc, "a compute capability is `major.minor`, e.g. \"9.0\""),
            ));
        }
        Ok(hw)
    }

    /// Names of the bundled hardware, sorted.
    pub fn bundled_names() -> Vec<String> {
        let mut names: Vec<String> = bundled().map(|(name, _)| name.to_string()).collect();
        names.sort();
        names
    }

    /// The hardware used when none is given: one H100-SXM.
    pub fn default_hardware() -> Hardware {
        Hardware::resolve("H100-SXM").expect("bundled H100-SXM is valid")
    }

    /// SM clocks the whole part ticks per ns (SMs × clock), when the file gives `sm_count` and
    /// `sm_clock_mhz`: what the roofline's per-SM-per-clock constants scale by.
    pub fn sm_clocks_per_ns(&self) -> Option<f64> {
        Some(f64::from(self.sm_count?) * self.sm_clock_mhz? / 1e3)
    }

    /// Whether the part is of NVIDIA's Hopper generation (sm_90: H100, H800, H200, ...), whose
    /// attention kernels run 128-row tiles (the roofline's `PREFILL_TILE_ROWS_HOPPER`).
    pub fn is_hopper(&self) -> bool {
        self.architecture
            .as_deref()
            .is_some_and(|a| a.eq_ignore_ascii_case("hopper"))
    }

    /// The compute capability as `(major, minor)`, when the file gives a well-formed one.
    pub fn capability(&self) -> Option<(u32, u32)> {
        let (major, minor) = self.compute_capability.as_deref()?.split_once('.')?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        (digits(major) && digits(minor)).then_some(())?;
        Some((major.parse().ok()?, minor.parse().ok()?))
    }

    /// Peak dense tensor throughput for `dtype`, FLOP/s. FP32 uses the TF32 tensor peak;
    /// 8-bit formats fall back to the BF16 peak on parts without 8-bit tensor cores.
    pub fn peak_flops(&self, dtype: Dtype) -> f64 {
        let tflops = match dtype {
            Dtype::Float16 => self.peak_tflops_fp16,
            Dtype::Bfloat16 => self.peak_tflops_bf16,
            Dtype::Float32 => self.peak_tflops_fp32,
            Dtype::Fp8 => self.peak_tflops_fp8.unwrap_or(self.peak_tflops_bf16),
            Dtype::Int8 => self.peak_tops_int8.unwrap_or(self.peak_tflops_bf16),
        };
        tflops * 1e12
    }
}

/// Short names accepted for bundled hardware: (alias, bundled name).
const ALIASES: &[(&str, &str)] = &[
    ("H100", "H100-SXM"),
    ("A100", "A100-80G"),
    ("TPU-v6e", "TPU-v6e-1"),
    ("v6e", "TPU-v6e-1"),
];

/// Bundled hardware as (name, TOML text); the name is the file stem under `hardware/`.
pub fn bundled() -> impl Iterator<Item = (&'static str, &'static str)> {
    HARDWARE
        .iter()
        .map(|(rel, text)| (rel.strip_suffix(".toml").unwrap_or(rel), *text))
}
