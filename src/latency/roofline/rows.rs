//! Row kernels (RMSNorm, fused add + RMSNorm, SiLU-and-mul, rotary embedding) as vLLM
//! launches them: a thread block per row (`csrc/layernorm_kernels.cu`,
//! `activation_kernels.cu`, `pos_encoding_kernels.cu`; up to 1,024 threads, 512 for rotary),
//! priced in SM clocks.
//!
//! The grid runs in waves of one row per SM (a 1,024-thread block is the one resident block
//! on a part of 1,536 threads per SM). Each wave costs the row's bytes at the bytes one thread
//! block moves per SM clock, after a fixed number of clocks (launch, ramp and tail); a block
//! whose threads load 16 bytes at a time (vLLM 0.19's norms and SiLU-and-mul) moves about
//! twice the bytes per clock of one whose threads load one element at a time (its rotary
//! kernel). When the whole working set, read and written, streams slower than that, it sets
//! the time: when it fits the part's L2 (`l2_cache_mb`), at a multiple of the DRAM bandwidth
//! (the kernel tables' working sets are never served from L2 alone: the kernels before them
//! leave part of it in DRAM), else from DRAM at the hardware file's `memory_efficiency`. The
//! constants (`ROW_KERNEL_FIXED_CLOCKS`, `ROW_SCALAR_BYTES_PER_CLOCK`,
//! `ROW_VECTOR_BYTES_PER_CLOCK`, `ROW_L2_OVER_DRAM`) are the medians of per-GPU fits
//! (`scripts/derive_roofline.py`; accuracy guide, "Norms and elementwise kernels by their rows
//! and waves", "The row kernels' L2 as a multiple of DRAM"). The FP8 quantization kernels, row
//! kernels too, stream their L2 at `L2_BYTES_PER_SM_CLOCK` per SM per clock
//! ([`RowKernels::quant_ns`]).

use super::{
    L2_BYTES_PER_SM_CLOCK, ROW_KERNEL_FIXED_CLOCKS, ROW_L2_OVER_DRAM, ROW_SCALAR_BYTES_PER_CLOCK,
    ROW_VECTOR_BYTES_PER_CLOCK,
};
use crate::config::Hardware;

/// How a row kernel's threads load their row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loads {
    /// One element at a time (vLLM's rotary kernel).
    Scalar,
    /// 16 bytes at a time (vLLM 0.19's RMSNorm, fused add + RMSNorm and SiLU-and-mul).
    Vector,
}

/// A part's prices of a row kernel, precomputed from its hardware file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowKernels {
    /// SMs: rows per wave.
    sms: f64,
    /// The fixed clocks, ns.
    fixed_ns: f64,
    /// ns per byte of a row one thread block moves, loading one element at a time.
    ns_per_scalar_byte: f64,
    /// ns per byte of a row one thread block moves, loading 16 bytes at a time.
    ns_per_vector_byte: f64,
    /// L2 size, bytes (0: none known).
    l2_bytes: f64,
    /// The rate at which a norm's, SiLU-and-mul's or rotary's working set that fits L2
    /// streams, bytes per ns: [`ROW_L2_OVER_DRAM`] times the DRAM bandwidth.
    l2_bytes_per_ns: f64,
    /// The same for the FP8 activation quantization: [`L2_BYTES_PER_SM_CLOCK`] on every SM.
    quant_l2_bytes_per_ns: f64,
}

impl RowKernels {
    /// The row kernels of `hardware`; `None` without `sm_count` and `sm_clock_mhz` (the
    /// roofline then prices them as any kernel).
    pub fn new(hardware: &Hardware) -> Option<RowKernels> {
        let sms = f64::from(hardware.sm_count?);
        let clocks_per_ns = hardware.sm_clock_mhz? / 1e3;
        Some(RowKernels {
            sms,
            fixed_ns: ROW_KERNEL_FIXED_CLOCKS / clocks_per_ns,
            ns_per_scalar_byte: 1.0 / (ROW_SCALAR_BYTES_PER_CLOCK * clocks_per_ns),
            ns_per_vector_byte: 1.0 / (ROW_VECTOR_BYTES_PER_CLOCK * clocks_per_ns),
            l2_bytes: hardware.l2_cache_mb.unwrap_or(0.0) * 1e6,
            l2_bytes_per_ns: ROW_L2_OVER_DRAM * hardware.memory_bw_gbps,
            quant_l2_bytes_per_ns: L2_BYTES_PER_SM_CLOCK * sms * clocks_per_ns,
        })
    }

    /// GPU time of a norm, SiLU-and-mul or rotary kernel over `rows` rows moving `bytes` in
    /// all, its threads loading as `loads`, ns (without the launch): the longer of its waves
    /// and its working set's stream, DRAM's at `dram_bytes_per_ns`.
    pub fn ns(&self, bytes: f64, rows: f64, loads: Loads, dram_bytes_per_ns: f64) -> f64 {
        self.time(bytes, rows, loads, self.l2_bytes_per_ns, dram_bytes_per_ns)
    }

    /// GPU time of an FP8 quantization kernel (a linear layer's per-token activation
    /// quantization, or a fused-MoE input's per-tensor maximum and quantization) over `rows`
    /// rows moving `bytes` in all, its threads loading as `loads`, ns (without the launch): as
    /// [`RowKernels::ns`], its L2 at [`L2_BYTES_PER_SM_CLOCK`] per SM per clock.
    pub fn quant_ns(&self, bytes: f64, rows: f64, loads: Loads, dram_bytes_per_ns: f64) -> f64 {
        let l2 = self.quant_l2_bytes_per_ns;
        self.time(bytes, rows, loads, l2, dram_bytes_per_ns)
    }

    /// The longer of the waves and the working set's stream, from L2 at `l2_bytes_per_ns`
    /// when it fits, else from DRAM at `dram_bytes_per_ns`, ns.
    fn time(&self, bytes: f64, rows: f64, loads: Loads, l2_bytes_per_ns: f64, dram: f64) -> f64 {
        let rows = rows.max(1.0);
        let waves = (rows / self.sms).ceil();
        let ns_per_row_byte = match loads {
            Loads::Scalar => self.ns_per_scalar_byte,
            Loads::Vector => self.ns_per_vector_byte,
        };
        let latency = self.fixed_ns + waves * (bytes / rows) * ns_per_row_byte;
        let rate = if bytes <= self.l2_bytes {
            l2_bytes_per_ns
        } else {
            dram
        };
        latency.max(self.fixed_ns + bytes / rate)
    }
}
