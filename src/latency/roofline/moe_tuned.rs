//! The fused-MoE tiles vLLM reads from its tuned config files instead of its defaults.
//!
//! `try_get_optimal_moe_config` looks for `fused_moe/configs/E=<E>,N=<N>,device_name=<GPU>.json`
//! (`E` the experts on the GPU, `N` one expert's width on it, `w2`'s last dimension; bf16
//! weights have no `dtype` suffix) and, when it exists, takes the entry whose batch key is
//! nearest to the tokens entering the kernel (`min(keys, key=lambda k: abs(k - M))`: on a tie
//! the smaller key, the file's first). Only without a file does it fall back to
//! `get_default_config`, whose tiles the roofline's constants were fitted on. The entries below
//! are copied from vLLM's files (data, one per batch key; `num_warps`, `GROUP_SIZE_M` and split-K
//! do not enter the pricing), for the parts whose hardware file names the GPU the file was tuned
//! on. `benchmark_moe.py` on an H100 (vLLM PR #24700, 2025-09-11, the `E=8,N=7168` file,
//! Mixtral-8x7B at TP 2) measures the MoE block less its router at 144 / 435 / 471 / 487 /
//! 483 / 491 / 537 µs for 1 / 8 / 16 / 32 / 64 / 128 / 256 tokens: from 16 to 128 tokens, every
//! expert's 176 MB at 0.85–0.89 of the 3,350 GB/s peak, where the default tiles priced 0.61
//! (691 µs at 32 tokens).

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

/// One tuned config file: the hardware file it applies to, its `E` and `N`, its entries.
struct TunedFile {
    hardware: &'static str,
    experts: u64,
    width: u64,
    tiles: &'static [TunedTile],
}

const fn tile(tokens: u32, block_m: u32, block_n: u32, block_k: u32, stages: u32) -> TunedTile {
    TunedTile {
        tokens,
        block_m,
        block_n,
        block_k,
        stages,
    }
}

/// vLLM's `E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json` (Mixtral-8x7B at TP 2; tuned in
/// vLLM PR #3389; the repository's file at commit 4652ef5d).
const H100_E8_N7168: &[TunedTile] = &[
    tile(1, 16, 64, 128, 4),
    tile(2, 16, 128, 128, 4),
    tile(4, 16, 32, 256, 4),
    tile(8, 16, 128, 128, 4),
    tile(16, 16, 128, 128, 4),
    tile(24, 16, 128, 128, 4),
    tile(32, 16, 128, 128, 4),
    tile(48, 32, 128, 128, 4),
    tile(64, 32, 128, 128, 4),
    tile(96, 32, 128, 128, 4),
    tile(128, 64, 128, 128, 4),
    tile(256, 64, 128, 128, 4),
    tile(512, 64, 256, 64, 4),
    tile(1024, 128, 256, 64, 4),
    tile(1536, 128, 256, 64, 4),
    tile(2048, 128, 256, 64, 4),
    tile(3072, 128, 256, 64, 4),
    tile(4096, 128, 256, 64, 4),
];

/// vLLM's `E=8,N=3584,device_name=NVIDIA_H100_80GB_HBM3.json` (Mixtral-8x7B at TP 4; the
/// repository's file at commit 702e0e20).
const H100_E8_N3584: &[TunedTile] = &[
    tile(1, 16, 64, 256, 4),
    tile(2, 16, 256, 64, 4),
    tile(4, 16, 64, 256, 4),
    tile(8, 16, 64, 128, 4),
    tile(16, 16, 64, 128, 4),
    tile(24, 16, 64, 128, 4),
    tile(32, 16, 64, 128, 4),
    tile(48, 32, 128, 128, 4),
    tile(64, 32, 128, 128, 4),
    tile(96, 32, 128, 128, 4),
    tile(128, 64, 128, 128, 4),
    tile(256, 128, 256, 64, 4),
    tile(512, 64, 128, 64, 4),
    tile(1024, 64, 256, 64, 4),
    tile(1536, 128, 256, 64, 4),
    tile(2048, 128, 256, 64, 4),
    tile(3072, 128, 256, 64, 4),
    tile(4096, 128, 256, 64, 4),
];

/// The tuned files bundled, by the hardware file they apply to (`H100-SXM`: vLLM's
/// `NVIDIA_H100_80GB_HBM3`, what `torch.cuda.get_device_name` calls an H100 SXM5 80GB).
const FILES: &[TunedFile] = &[
    TunedFile {
        hardware: "H100-SXM",
        experts: 8,
        width: 7168,
        tiles: H100_E8_N7168,
    },
    TunedFile {
        hardware: "H100-SXM",
        experts: 8,
        width: 3584,
        tiles: H100_E8_N3584,
    },
];

/// The name under which the bundled files know the part of hardware file `hardware`, if any
/// file is for it.
pub fn device(hardware: &str) -> Option<&'static str> {
    FILES
        .iter()
        .find(|f| f.hardware == hardware)
        .map(|f| f.hardware)
}

/// The tuned tiles vLLM runs for `experts` experts of `width` on `device` ([`device`]), if one
/// of the bundled files is for them.
pub fn tuned_tiles(device: &str, experts: u64, width: u64) -> Option<&'static [TunedTile]> {
    FILES
        .iter()
        .find(|f| f.hardware == device && f.experts == experts && f.width == width)
        .map(|f| f.tiles)
}

/// The entry vLLM picks for `tokens`: the key nearest to them, the smaller on a tie (`None`
/// only for no entries).
pub fn nearest(tiles: &[TunedTile], tokens: f64) -> Option<TunedTile> {
    let gap = |t: &TunedTile| (f64::from(t.tokens) - tokens).abs();
    tiles
        .iter()
        .copied()
        .reduce(|best, t| if gap(&t) < gap(&best) { t } else { best })
}
