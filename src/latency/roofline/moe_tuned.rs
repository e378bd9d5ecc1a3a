//! The fused-MoE tiles vLLM 0.19 reads from its tuned config files instead of its defaults.
//!
//! `try_get_optimal_moe_config` looks for `fused_moe/configs/E=<E>,N=<N>,device_name=<GPU>.json`
//! (`E` the experts on the GPU, `w2`'s first dimension; `N` one expert's width on it, `w2`'s
//! last; bf16 and fp16 weights have no `dtype` suffix, per-tensor FP8 ones `,dtype=fp8_w8a8`,
//! [`fp8_files`]) and, when it exists, takes the entry
//! whose batch key is nearest to the tokens entering the kernel (`min(keys, key=lambda k:
//! abs(k - M))`: on a tie the first key of the file, which lists them ascending). Without a
//! file it calls `get_default_config`; the roofline then prices vLLM 0.10.2's default tiles
//! (unchanged through 0.16; 0.17 made them grow with the batch), those its constants were fitted on (0.19's, read the same way, fit worse held out:
//! `docs/src/accuracy.md`, "Every bundled part's tuned files"). The files that apply to the
//! bundled parts and MoE shapes are data ([`files`]: one entry per batch key, the fields the
//! pricing reads). `benchmark_moe.py` on an H100 (vLLM PR #24700, 2025-09-11, the `E=8,N=7168`
//! file, Mixtral-8x7B at TP 2) measures the MoE block less its router at 144 / 435 / 471 / 487
//! / 483 / 491 / 537 µs for 1 / 8 / 16 / 32 / 64 / 128 / 256 tokens: from 16 to 128 tokens,
//! every expert's 176 MB at 0.85–0.89 of the 3,350 GB/s peak, where vLLM 0.10's default tiles
//! priced 0.61 (691 µs at 32 tokens).

mod files;
mod fp8_files;

use crate::config::Dtype;

/// One entry of a tuned config file: the tile vLLM runs for batches nearest `tokens`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TunedTile {
    /// The entry's batch key (tokens entering the kernel).
    pub tokens: u32,
    /// `BLOCK_SIZE_M`, `BLOCK_SIZE_N`, `BLOCK_SIZE_K`: rows, columns and K step of a tile.
    pub block_m: u32,
    pub block_n: u32,
    pub block_k: u32,
    /// `num_stages`: Triton's software pipeline keeps `stages − 1` K steps loading ahead.
    pub stages: u32,
}

impl TunedTile {
    /// Weight bytes one thread block keeps in flight: `stages − 1` K steps of a
    /// `block_k × block_n` weight tile in `fp`-byte values.
    pub fn bytes_in_flight(&self, fp: f64) -> f64 {
        f64::from(self.stages.saturating_sub(1) * self.block_k * self.block_n) * fp
    }
}

/// One tuned config file: the name vLLM gives its part, its `E` and `N`, its entries.
struct TunedFile {
    device: &'static str,
    experts: u64,
    width: u64,
    tiles: &'static [TunedTile],
}

/// A file's entry, as the data modules write it: batch key, `BLOCK_SIZE_M`, `_N`, `_K`,
/// `num_stages`.
const fn t(tokens: u32, block_m: u32, block_n: u32, block_k: u32, stages: u32) -> TunedTile {
    TunedTile {
        tokens,
        block_m,
        block_n,
        block_k,
        stages,
    }
}

/// A file, as the data modules write it: the part's vLLM name, `E`, `N`, its entries.
const fn file(
    device: &'static str,
    experts: u64,
    width: u64,
    tiles: &'static [TunedTile],
) -> TunedFile {
    TunedFile {
        device,
        experts,
        width,
        tiles,
    }
}

/// The name `get_config_file_name` gives the part of hardware file `hardware`:
/// `torch.cuda.get_device_name` with spaces as underscores (every H200 variant as
/// `NVIDIA_H200`). `None` for a part not bundled here (a user's own hardware file).
pub fn vllm_device(hardware: &str) -> Option<&'static str> {
    Some(match hardware {
        "H100-SXM" => "NVIDIA_H100_80GB_HBM3",
        "H200" => "NVIDIA_H200",
        "A100-80G" => "NVIDIA_A100-SXM4-80GB",
        "B200" => "NVIDIA_B200",
        "RTXPRO6000" => "NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition",
        "RTX4090" => "NVIDIA_GeForce_RTX_4090",
        _ => return None,
    })
}

/// The tuned tiles vLLM runs for `experts` experts of `width` on `device` ([`vllm_device`]),
/// if it ships a file for them in bf16 or fp16 (the bundled files, [`files`]).
pub fn tuned_tiles(device: &str, experts: u64, width: u64) -> Option<&'static [TunedTile]> {
    tuned_tiles_in(Dtype::Bfloat16, device, experts, width)
}

/// [`tuned_tiles`] for experts served in `dtype`: the files without a `dtype` in their name
/// for 16-bit weights ([`files`]), those with `dtype=fp8_w8a8` for FP8 ([`fp8_files`]); none
/// for other dtypes.
pub fn tuned_tiles_in(
    dtype: Dtype,
    device: &str,
    experts: u64,
    width: u64,
) -> Option<&'static [TunedTile]> {
    let files = match dtype {
        Dtype::Bfloat16 | Dtype::Float16 => files::FILES,
        Dtype::Fp8 => fp8_files::FILES,
        Dtype::Float32 | Dtype::Int8 => return None,
    };
    files
        .iter()
        .find(|f| f.device == device && f.experts == experts && f.width == width)
        .map(|f| f.tiles)
}

/// The entry vLLM picks for `tokens`: the key nearest to them, the first on a tie (`None`
/// only for no entries).
pub fn nearest(tiles: &[TunedTile], tokens: f64) -> Option<TunedTile> {
    let gap = |t: &TunedTile| (f64::from(t.tokens) - tokens).abs();
    tiles
        .iter()
        .copied()
        .reduce(|best, t| if gap(&t) < gap(&best) { t } else { best })
}
