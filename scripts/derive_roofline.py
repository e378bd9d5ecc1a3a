#!/usr/bin/env python3
"""Derives the roofline's constants from every kernel table in the shared data, and checks
each one leave-one-GPU-out.

The tables (`scripts/roofline_tables.py` reads them): LLMServingSim's profile bundles (RTX 4090,
RTX PRO 6000), Frontier's operator profiles (A100, A40, A800, H100, H800, RTX PRO 6000) and
collective timings (DGX A100, DGX H100, NVLink-bridged pairs), and our H200 measurement. No
validation run is read.

For every GPU the script fits what its own tables say (a GEMM's fixed time, weight-streaming
and compute efficiencies and how much of the shorter of the two the longer hides; attention's
fixed time and efficiencies; the fused-MoE kernel's, with the memory latency in SM clocks
that sets how many thread blocks its grouped GEMMs need to stream at full rate, the bytes
per SM per clock its large tile streams at most, and the SM clocks a thread block of its grid
takes when it does no MMA work; the least time of a kernel; a row kernel's (norms,
SiLU-and-mul, rotary: a thread block per token) fixed SM clocks, the bytes per clock one
thread block moves along its row, and the rate its grid streams from L2, as a multiple of DRAM
bandwidth (the norms', SiLU-and-mul's and rotary's) and in bytes per SM per clock (the FP8
activation quantization's); an all-reduce's
fixed time and link efficiency). A constant
of the roofline is the median of a family's per-GPU values over the GPUs that have it; the
weight-streaming efficiency of GEMMs is the median within the architecture class (Ampere, sm_8x
before Ada; later parts), the one constant whose per-GPU values split by class. Then, for
each GPU in turn, the constants are derived again without it and the roofline's kernel times
are compared with its tables: the held-out error per op family, printed as a table (`--loo`,
the table of docs/src/accuracy.md), and for every fused-MoE table its error with the other
GPUs' constants and with the other tables' (its own GPU's other tables included).

FP8 GEMM rows (H800's Llama-3.1-405B table, the only FP8 table) are priced as
src/latency/roofline/fp8.rs prices vLLM's FP8 linear layers: the input's per-token quantization
as a row kernel, then the GEMM at the FP8 peak times GEMM_FP8_COMPUTE_EFFICIENCY, a public
H100 measurement written below; no FP8 constant is fitted to any table.

The last lines ("constants held by src/latency/roofline.rs") print the constants derived from
every GPU, rounded as the code rounds them; `tests/accuracy/derive_roofline.rs` checks that the two
agree. Before them, the host model's eager launch costs (`scripts/host_launch.py`: an eager op,
and a launch of the fused-MoE Triton kernel, fitted on H800's pairs and checked on RTX PRO
6000's) and the defaults `HostSpec` holds ("constants held by the host model's defaults").

Usage: scripts/derive_roofline.py [DATA_DIR] [--loo] [--flat-large-tile] [--frontier-shapes]
                                  [--vllm019-default-tiles] [--moe-cap-from-latency] [--moe-smem-bound]
                                  [--mixed-table] [--gemm-rows=GPU] [--row-kernels] [--gemm-fixed]
                                  [--llmservingsim-v0=DIR]
                                  (DATA_DIR default ../shared/data)
       scripts/derive_roofline.py --custom-allreduce
       scripts/derive_roofline.py --tpu[=DIR] [--tpu-m-tile=N]
`--tpu[=DIR]` prints only the TPU step's constants (src/latency/roofline/tpu.rs), derived from
LLMServingSim 2.0's per-layer tables of a TPU v6e chip (scripts/derive_tpu.py says which files
and how they are read) in DIR, a checkout of LLMServingSim 2.0 or a bare git mirror of it
(default: $LLMSERVINGSIM_REPO, skipped, said, when unset); it reads no data directory and
prints that it skipped where DIR has no such tables. `--tpu-m-tile=N` pads the matmuls' token rows
to N in their MMA work as well, a what-if (docs/src/accuracy.md, "TPU v6e").
`--custom-allreduce` prints only the held-out check of vLLM's custom all-reduce by GPU
generation (also part of `--loo`), from public timings written in this script; it reads no
data directory.
`--flat-large-tile` fits, instead of the large fused-MoE tile's bytes per SM per clock, a flat
share of the small tile's streaming rate (the what-if of an earlier session, which RTX PRO 6000's
table refutes; docs/src/accuracy.md).
`--frontier-shapes` shapes Frontier's GEMM rows as its profiler built them (each model's own
head dimension, Step2Mini's and Step3's query projections; the QKV projections timed with
their QK-norm kernels left out; `roofline_tables.linear_shapes`), a what-if: only H800's tables
change, and the constants it derives are not the code's (docs/src/accuracy.md, "H800's GEMMs").
`--vllm019-default-tiles` reads LLMServingSim's fused-MoE table (vLLM 0.19, no tuned file) on
vLLM 0.19's default tiles instead of 0.10.2's, a what-if that held out does worse; with
`--loo` it also prints that table's rows of the same tiles and MMA work, measured and priced
(docs/src/accuracy.md, "Every bundled part's tuned files").
`--moe-cap-from-latency`: where no table of a derivation measures the large fused-MoE tile's
bytes per SM per clock (H800 held out), one thread block's weight bytes in flight per memory
latency, a what-if (docs/src/accuracy.md, "Few large experts held out").
`--moe-smem-bound`: the large fused-MoE tile's MMA work at most what its operands' shared-memory
traffic allows (`mma_smem_flops`), a what-if that held out does worse (docs/src/accuracy.md,
"Few large experts: the large tile's shared memory").
`--gemm-rows=GPU` prints, before the constants, every GEMM row of GPU with the roofline's
held-out error (the constants derived from the other GPUs).
`--gemm-fixed` prints, before the constants, what each GPU's GEMMs of at most 16 tokens say of
a GEMM's fixed time beside the hardware quantities it could follow, and the held-out error of
GEMMs of up to 128 tokens with each form of it tried (docs/src/accuracy.md, "A GEMM's fixed
time by the part").
`--row-kernels` prints, before the constants, every row-kernel row (norms, SiLU-and-mul,
rotary) by GPU, table and op with the roofline's held-out error, its tokens, waves and the
row bytes of the kernels it times.
`--llmservingsim-v0=DIR` reads, as a check only (no constant comes from them), LLMServingSim's
v0 per-layer tables in DIR (a checkout of LLMServingSim's repository, or an export of its
`profiler/v0`; kept outside this repository): H100, RTX A6000 and RTX 3090
(`roofline_tables.v0_layers`, `v0_gemms`, `v0_attention`). It prints, before the constants, the
roofline's held-out error on their GEMM rows by regime, per GPU, per model and TP, per op; each
GPU's own fit; H100's GEMMs of the same shape in Frontier's tables beside them; H100's by
prefill tokens and weights per GPU; then, with the code's constants, every op family of every
table (the embedding, norms, projections, rotary, activation, experts' GEMMs, LM head) by
tokens, as vLLM's kernels and, for the ops v0 runs as Hugging Face's unfused kernels, as those
kernels; the attention rows by regime, as vLLM's kernels on the part and as FlashAttention-2
tiles of the kernel v0 ran; and decode and prefill steps summed from each setup's rows
(docs/src/accuracy.md, "Whole layers and steps on the blind runs' setups").
"""

import heapq
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import derive_tpu  # noqa: E402
import host_launch  # noqa: E402
from linear_solve import solve  # noqa: E402
import roofline_tables as tables  # noqa: E402
from roofline_tables import GPUS  # noqa: E402

ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
DATA = ARGS[0] if ARGS else os.path.join(os.path.dirname(__file__), "../../shared/data")
MEASURED_H200 = os.path.join(os.path.dirname(__file__), "../data/measured/H200-2026-11-26.json")

# The roofline's fixed per-kernel overhead under CUDA graphs (`kernel_launch_ns` of every
# hardware file) and the bandwidth efficiency of its elementwise kernels (`memory_efficiency`).
LAUNCH_S = 0.5e-6
ELEMENTWISE_EFFICIENCY = 0.9


def fit(rows, times=None):
    """`t = t0 + x / rate` over (x, t), least squares of the relative error (weights 1/t²,
    `t` from `times` where given: the rows' `t` is then what is left of each time after a
    priced part); returns (t0 seconds, rate per second)."""
    w = [1.0 / (t * t) for t in (times or [t for _, t in rows])]
    sw = sum(w)
    sx = sum(wi * x for wi, (x, _) in zip(w, rows))
    st = sum(wi * t for wi, (_, t) in zip(w, rows))
    sxx = sum(wi * x * x for wi, (x, _) in zip(w, rows))
    sxt = sum(wi * x * t for wi, (x, t) in zip(w, rows))
    slope = (sw * sxt - sx * st) / (sw * sxx - sx * sx)
    return (st - slope * sx) / sw, 1.0 / slope


def best(candidates, error):
    """The candidate with the least sum of squared relative errors."""
    return min(candidates, key=lambda c: sum(e * e for e in error(c)))


def median(values):
    values = list(values)
    return statistics.median(values) if values else float("nan")


def part(gpu):
    """The datasheet numbers of `gpu`: a part whose tables derive the constants, or one only
    LLMServingSim's v0 tables time (`--llmservingsim-v0`, held out by construction)."""
    return GPUS[gpu] if gpu in GPUS else tables.V0_GPUS[gpu]


# Share of a GDDR part's weight stream left where it runs in-band ECC (`ecc_in_band` in the
# GPU tables: the A40, a data-centre part, ships with ECC on; GDDR has no side-band ECC bits,
# so the check bits share the data's bursts). A public measurement, not a fit: Chaos's support
# article "ECC State for Nvidia GPUs" (support.chaos.com, article 24886637113617) measured
# turning ECC on to cost 15% of performance on the RTX 4090 and the A40, and states that ECC is
# on by default on data-centre (Tesla) parts and off on GeForce and RTX workstation parts (the
# RTX A6000 of LLMServingSim's v0 tables). src/latency/roofline.rs: GDDR_IN_BAND_ECC_SHARE.
ECC_IN_BAND_SHARE = 0.85

# The memory classes whose GPUs' fits set each class's weight-streaming efficiency (the
# median; src/latency/roofline.rs, GEMM_MEMORY_EFFICIENCY_<class>).
STREAM_CLASSES = ("HBM2e", "HBM3", "GDDR")


def stream_class(gpu):
    """The memory technology whose weight-streaming efficiency `gpu`'s GEMMs take: `HBM2e`,
    `HBM3` (HBM3 and HBM3e) or `GDDR` (GDDR6, 6X and 7)."""
    mem = part(gpu)["mem"]
    return "GDDR" if mem.startswith("GDDR") else "HBM3" if mem.startswith("HBM3") else "HBM2e"


def ecc_share(gpu):
    """Share of the bandwidth in-band ECC leaves `gpu` (1 where its default is no in-band ECC)."""
    return ECC_IN_BAND_SHARE if part(gpu).get("ecc_in_band") else 1.0


def gemm_eta_m(c, gpu):
    """The share of `gpu`'s datasheet bandwidth a weight-bound GEMM streams at under `c`."""
    return c["gemm_eta_m"][stream_class(gpu)] * ecc_share(gpu)


# ---------------------------------------------------------------------------------------- GEMMs

# Share of the dense FP8 peak a compute-bound FP8 GEMM sustains, from a public measurement on
# another GPU than any FP8 table here (H800's is the only one, and it is held out by this):
# NVIDIA/cutlass issue #1662 (2024-07-30), an HGX H100 SXM (700 W) with cuBLAS 12.5 through
# `torch._scaled_mm`, 1,296.9 TFLOP/s in FP8 against the 1,978.9 TFLOP/s dense FP8 peak (its
# BF16 `torch.matmul` in the same run, 764.9 of 989.4 TFLOP/s, 0.77, is what the BF16 tables fit
# for H100, 0.79). The FP8 tensor cores do twice the BF16 work per clock; under the power limit
# they do not sustain the clock that doubling assumes.
GEMM_FP8_COMPUTE_EFFICIENCY = round(1296.9 / 1978.9, 2)
# Bytes a thread block of vLLM's per-token dynamic FP8 quantization moves per input value
# (`dynamic_per_token_scaled_fp8_quant`, a block per token: the row read for its absolute
# maximum, read again to scale, written in one byte), the kernel `Fp8LinearOp` runs before
# every FP8 GEMM; plus each token's 4-byte scale.
FP8_QUANT_BYTES_PER_VALUE = 5
FP8_QUANT_SCALE_BYTES = 4


def gemm_bytes(r):
    if r["fp8"]:
        return r["K"] * r["N"] + r["M"] * r["K"] + 2 * r["M"] * r["N"]
    return 2 * (r["K"] * r["N"] + r["M"] * r["K"] + r["M"] * r["N"])


def fp8_quant_time(c, r):
    """The per-token activation quantization before an FP8 GEMM, as a row kernel
    (src/latency/roofline/rows.rs): a thread block per token, 16-byte loads."""
    g = GPUS[r["gpu"]]
    rows = r["M"]
    b = rows * (FP8_QUANT_BYTES_PER_VALUE * r["K"] + FP8_QUANT_SCALE_BYTES)
    waves = (c["row_fixed"] + math.ceil(rows / g["sms"]) * b / rows / c["row_vector"]) / g["clock"]
    stream = c["l2_bytes"] * g["sms"] * g["clock"] if b <= g["l2"] else g["bw"] * ELEMENTWISE_EFFICIENCY
    return max(waves, c["row_fixed"] / g["clock"] + b / stream) + LAUNCH_S


# The tiles vLLM 0.19 runs an FP8 GEMM of M tokens, N outputs and depth K on on Hopper
# (`cutlass_gemm_sm90_fp8_dispatch`, csrc/quantization/w8a8/cutlass/c3x/
# scaled_mm_sm90_fp8_dispatch.cuh, vllm-project/vllm c30af86; the 0.19.0 wheel's _C.abi3.so
# instantiates exactly these seven kernels): (tile rows, tile columns, cluster rows, cluster
# columns) in the GEMM's own orientation. Up to 64 tokens the kernels swap A and B, so their
# 16- or 64-wide tile side and the cluster's second extent run along M. A persistent grid of
# one CTA per SM takes whole clusters of tiles, the tiles past M or N included, in turns.
def sm90_fp8_tile(m, n, k):
    if m <= 16:
        return (16, 64, 2, 1) if n <= 1280 else (16, 64, 1, 1)
    if m <= 64:
        return (16, 64, 4, 1) if n <= 1280 else (64, 64, 1, 1)
    if m <= 128:
        return (64, 128, 2, 1)
    if m >= 8192 and k >= 6144:
        return (256, 128, 2, 1)
    return (128, 128, 2, 1)


def fp8_mma_time(r, g):
    """An FP8 GEMM's MMA work: on Hopper its tiles' waves (every SM runs ceil(tiles / SMs)
    whole tiles, each at the SM's share of the FP8 peak times GEMM_FP8_COMPUTE_EFFICIENCY);
    elsewhere its FLOPs at that share of the peak."""
    peak = 2 * g["flops"] * GEMM_FP8_COMPUTE_EFFICIENCY
    m, k, n = r["M"], r["K"], r["N"]
    if g["gen"] != "hopper":
        return 2 * m * k * n / peak
    tm, tn, cm, cn = sm90_fp8_tile(m, n, k)
    tiles = math.ceil(m / (tm * cm)) * cm * math.ceil(n / (tn * cn)) * cn
    return math.ceil(tiles / g["sms"]) * 2 * tm * tn * k / (peak / g["sms"])


def stream_share(gpu):
    """Bytes each SM streams per SM clock when the part reads at its datasheet bandwidth."""
    g = part(gpu)
    return g["bw"] / (g["sms"] * g["clock"])


def gemm_fixed(c, gpu):
    """A GEMM's fixed time on `gpu`: `gemm_fixed_base` + `gemm_fixed_slope` x the bytes each of
    its SMs streams per clock at the datasheet bandwidth ([`gemm_fixed_line`]); `gemm_t0`
    where `c` has no line (a GPU's own fit)."""
    if "gemm_fixed_slope" in c:
        return c["gemm_fixed_base"] + c["gemm_fixed_slope"] * stream_share(gpu)
    return c["gemm_t0"]


def gemm_time(c, r):
    """A GEMM as src/latency/roofline.rs prices it: fixed time + the longer of its MMA work and
    weight stream + the unhidden share of the shorter + the launch; an FP8 GEMM (weights and
    input in one byte, output in two) after its activation's quantization ([`fp8_quant_time`]),
    its MMA work by [`fp8_mma_time`], on Hopper with the unhidden share of a GEMM whose waves
    are priced (`gemm_fp8_unhidden`)."""
    g = part(r["gpu"])
    eta_m = gemm_eta_m(c, r["gpu"])
    memory = gemm_bytes(r) / (g["bw"] * eta_m)
    if r["fp8"]:
        compute = fp8_mma_time(r, g)
        unhidden = c["gemm_fp8_unhidden"] if g["gen"] == "hopper" else c["gemm_unhidden"]
    else:
        compute = 2 * r["M"] * r["K"] * r["N"] / (g["flops"] * c["gemm_eta_c"])
        unhidden = c["gemm_unhidden"]
    t = gemm_fixed(c, r["gpu"]) + max(compute, memory) + unhidden * min(compute, memory) + LAUNCH_S
    return t + fp8_quant_time(c, r) if r["fp8"] else t


def gemm_fits(rows, gpus=GPUS):
    """Per GPU of `gpus`: t0 and weight-streaming efficiency from its GEMMs of <= 16 tokens, then
    the compute efficiency and the unhidden share from the rest (grid, relative least squares)."""
    out = {}
    for gpu in gpus:
        mine = [r for r in rows if r["gpu"] == gpu and not r["fp8"]]
        small = [(gemm_bytes(r), r["t"]) for r in mine if r["M"] <= 16]
        if len(small) < 3:
            continue
        t0, rate = fit(small)
        f = {"t0": t0, "eta_m": rate / part(gpu)["bw"], "n": len(mine)}
        rest = [r for r in mine if r["M"] > 16]
        # Every GPU weighs alike: at most ~2,000 rows each, every k-th in table order.
        rest = rest[::max(1, len(rest) // 2000)]
        if any(r["M"] >= 1024 for r in rest):
            eta = f["eta_m"] / ecc_share(gpu)
            base = {"gemm_t0": t0, "gemm_eta_m": dict.fromkeys(STREAM_CLASSES, eta)}

            def error(ck):
                c = dict(base, gemm_eta_c=ck[0], gemm_unhidden=ck[1])
                return [gemm_time(c, r) / r["t"] - 1 for r in rest]
            grid = [(e / 100, k / 20) for e in range(50, 111) for k in range(21)]
            f["eta_c"], f["unhidden"] = best(grid, error)
        out[gpu] = f
    return out


# The GEMM tables whose kernels spread a partial wave over the SMs instead of running it
# alone: our H200 table (cuBLAS of CUDA 13 through PyTorch 2.11), whose rows climb smoothly
# through the token counts where a grid of 128-row tiles fills a wave and starts the next
# (docs/src/accuracy.md, "H100's GEMMs at the blind cases' shapes": the unhidden share the
# roofline prices is mostly wave quantization where a table's kernels run whole waves). Its
# unhidden share is the transition's cost with no wave quantization in it.
WAVELESS_GEMM_TABLES = ["H200"]


def gemm_constants(fits, gpus, held_out=None):
    """The GEMM constants from the per-GPU fits of `gpus`; the weight-streaming efficiency of
    each architecture class from that class's GPUs."""
    have = [g for g in gpus if g in fits]
    full = [g for g in have if "eta_c" in fits[g]]
    return {
        "gemm_t0": median(fits[g]["t0"] for g in have),
        **gemm_fixed_line(fits, have),
        "gemm_eta_m": {k: median(fits[g]["eta_m"] / ecc_share(g) for g in have if stream_class(g) == k)
                       for k in STREAM_CLASSES},
        "gemm_eta_c": median(fits[g]["eta_c"] for g in full),
        "gemm_unhidden": median(fits[g]["unhidden"] for g in full),
        # With its waves priced (FP8 on Hopper, `fp8_mma_time`), a GEMM's unhidden share is
        # what is left of the transition once wave quantization is out: what the tables whose
        # kernels run no whole waves fit (WAVELESS_GEMM_TABLES), else the median.
        "gemm_fp8_unhidden": median(fits[g]["unhidden"] for g in full if g in WAVELESS_GEMM_TABLES)
        if any(g in WAVELESS_GEMM_TABLES for g in full) else median(fits[g]["unhidden"] for g in full),
    }


def theil_sen(points):
    """Median-of-pairwise-slopes line through (x, y) points: (intercept, slope)."""
    slopes = [(y2 - y1) / (x2 - x1) for i, (x1, y1) in enumerate(points) for x2, y2 in points[i + 1:] if x2 != x1]
    slope = median(slopes)
    return median(y - slope * x for x, y in points), slope


# A memory-bound GEMM's fixed time grows with the bytes each SM must stream per clock for the
# part to read at its bandwidth (2.9-4.8 on the GDDR parts, 13.4-13.9 on A100 and H100, 19.9 on
# the H200): to stream at that rate every SM keeps that share times the memory latency in
# flight (Little's law), so the pipeline's ramp at the start and the SMs' uneven drain at the
# end, while fewer SMs stream, cost more time the more each SM carries. The fixed time is a
# line in that share through the GPUs' own fits (their t0 beside their share), drawn by the
# median of the pairwise slopes (Theil-Sen: one GPU's odd fit moves no constant far); the
# per-GPU fits and the other forms tried are printed by `--gemm-fixed`.
def gemm_fixed_line(fits, gpus):
    base, slope = theil_sen([(stream_share(g), fits[g]["t0"]) for g in gpus])
    return {"gemm_fixed_base": base, "gemm_fixed_slope": slope}


def gemm_regime(r):
    m = r["M"]
    return "GEMM M<=16" if m <= 16 else "GEMM 17-128" if m <= 128 else "GEMM 129-1024" if m <= 1024 else "GEMM >1024"


# ------------------------------------------------------------------------------------ attention

# Query rows and KV rows of one thread block of a prefill attention kernel (head dim <= 128).
# Hopper's kernels (FlashAttention-3, FlashInfer's sm90 path, cuDNN) run two warpgroups of 64
# query rows on 128-row tiles; FlashAttention-2's mma.sync kernels, which other parts run, a
# 64 x 64 tile for causal attention (`run_mha_fwd_hdim128`). Taken from the kernels' sources,
# not fitted (`scripts/derive_roofline.py` compares both sizes on every GPU). vLLM's paged
# launch runs FA2's split-KV kernel, whose KV tile is 128 tokens at head dim 128
# (`run_mha_fwd_splitkv_dispatch`); the waves are counted in KV tiles of 64 all the same (128
# was tried: docs/src/accuracy.md, "FlashAttention-2's tiles by their clocks").
PREFILL_TILE_ROWS_HOPPER = 128
PREFILL_TILE_ROWS = 64
PREFILL_KV_TILE = 64
# A prefill tile is priced by the kernel family vLLM 0.19 picks by architecture
# (docs/src/accuracy.md, "FlashAttention-2's tiles by their clocks"): FlashAttention-3 on
# Hopper (sm_90; FlashInfer's sm90 path and cuDNN, whose tables stand in for it here, are
# warp-specialised wgmma kernels likewise), FlashAttention-2 on sm_8x and sm_12x (FA3 is
# Hopper-only). FA3's producer and consumer warpgroups overlap the softmax with the MMA: its
# tiles reach a share of peak FLOP/s (`prefill_eta`, the median over the Hopper GPUs). FA2's
# paged varlen kernel (`run_mha_fwd_splitkv_dispatch`, 4 warps, 80 KiB of shared memory at
# head dim 128) has one warp per SM sub-partition where an SM holds one block (the 100 KiB
# parts): while that warp computes its softmax, rescales and loads, the sub-partition's
# tensor pipe has no other warp to run. So an FA2 tile costs its MMA at the tensor peak plus
# its scores' other work, a number of SM clocks per query-key score (`prefill_score_clocks`,
# the median over the FA2 GPUs) on pipes that sm_89 and sm_120 have alike (128 FP32 lanes, 16
# SFUs per SM), where their tensor peaks differ twofold (512 and 1,024 dense FLOP per SM per
# clock with FP32 accumulation). An SM that holds b blocks (`decode_blocks_per_sm`: the same
# kernel; sm_80's 164 KiB holds two) overlaps one block's softmax with another's MMA: it
# spends max(MMA, (MMA + score clocks) / b) clocks per score. vllm-project/flash-attention
# 6f27a05 (vLLM 0.19's pin) and 617264c.


def prefill_tile_rows(gpu):
    return PREFILL_TILE_ROWS_HOPPER if part(gpu)["gen"] == "hopper" else PREFILL_TILE_ROWS


def fa2(gpu):
    """Whether `gpu`'s prefill tiles are priced as FlashAttention-2's: vLLM runs FA2 on every
    part but Hopper, which runs FA3."""
    return part(gpu)["gen"] != "hopper"


def mma_clocks_per_score(gpu, head_dim):
    """SM clocks of one query-key score's MMA work (QK^T and PV: 4 x head_dim FLOPs) at the
    tensor peak of one SM."""
    g = part(gpu)
    return 4.0 * head_dim * g["sms"] * g["clock"] / g["flops"]


def prefill_clocks_per_score(c, gpu, head_dim):
    """SM clocks an SM of FA2 `gpu` spends per query-key score: its MMA at the tensor peak and
    `prefill_score_clocks`, the `decode_blocks_per_sm` blocks it holds overlapping one's
    softmax with another's MMA up to the tensor peak."""
    mma = mma_clocks_per_score(gpu, head_dim)
    return max(mma, (mma + c["prefill_score_clocks"]) / decode_blocks_per_sm(gpu, head_dim))


def prefill_efficiency(c, gpu, head_dim):
    """Share of peak FLOP/s a prefill tile's MMA work takes on `gpu`: the Hopper kernels'
    `prefill_eta`; FA2's MMA at the tensor peak over `prefill_clocks_per_score`."""
    if not fa2(gpu):
        return c["prefill_eta"]
    return fa2_efficiency(c, gpu, head_dim)


def fa2_efficiency(c, gpu, head_dim):
    """Share of peak FLOP/s FlashAttention-2's tiles take on `gpu` (any part: the Hopper ones
    too, where vLLM runs FA3 but `--llmservingsim-v0`'s tables time FA2)."""
    return mma_clocks_per_score(gpu, head_dim) / prefill_clocks_per_score(c, gpu, head_dim)


def prefill_wave_flops(items, heads, head_dim, sms, tile_rows, kv_tile=PREFILL_KV_TILE):
    """The MMA work of a causal varlen prefill as its waves pay it, FLOPs at full occupancy.

    Each of the `heads` query heads of each sequence (`(chunk, prefix)` in `items`) splits its
    chunk into query tiles of `tile_rows`; a tile computes its full rows against every KV tile
    up to its last query row (causal: the diagonal's tile is computed whole, and a short chunk
    over a long prefix pays whole tiles of mostly empty rows). Tiles run longest first, `sms`
    at a time (one block per SM): each wave lasts as long as its longest tile, so the time is
    the sum over waves of their first tile. With `n(x)` the tiles that reach KV position `x`,
    that sum is `kv_tile x sum over KV tiles of ceil(n / sms)`; times `sms` it is the work the
    whole GPU would do in that time. `sms` = None: no waves (the padded tiles' total work)."""
    if not items:
        return 0.0
    top = max(math.ceil((p + c) / kv_tile) for c, p in items)
    waves = 0
    for m in range(1, top + 1):
        reach = (m - 1) * kv_tile  # a tile reaches KV tile m when its last row's extent > reach
        n = 0
        for c, p in items:
            tiles = math.ceil(c / tile_rows)
            if p + c > reach:
                n += heads * (tiles - max(0, (reach - p) // tile_rows))
        waves += math.ceil(n / sms) if sms else n
    return waves * kv_tile * tile_rows * head_dim * 4.0 * (sms or 1)


def attention_wave_flops(r):
    """`prefill_wave_flops` of a prefill row (kept in the row: every fit and held-out GPU
    reads it)."""
    if "waves" not in r:
        r["waves"] = prefill_wave_flops([(r["chunk"], r["prefix"])], r["q_heads"], r["head_dim"],
                                        part(r["gpu"])["sms"], prefill_tile_rows(r["gpu"]))
    return r["waves"]


def attention_fits(rows):
    """Per GPU: `t = t0 + x / rate` over its pure-decode rows (x: KV bytes; rate / peak
    bandwidth: the decode efficiency), kept only where the work of at least a third of the
    rows takes longer than the fitted fixed time (else the table measures the fixed time
    alone; the intercept is a mixed batch's fixed time, `ATTENTION_FIXED_NS`), and on those
    GPUs the pure-decode kernel model (`decode_fit`); and over its prefill rows (x: the waves'
    MMA work, `prefill_wave_flops`; rate / peak FLOP/s: the prefill efficiency)."""
    out = {}
    for gpu in GPUS:
        f = {}
        decodes = [r for r in rows if r["gpu"] == gpu and r["kind"] == "decode"]
        mine = [(r["x"], r["t"]) for r in decodes]
        if len(mine) >= 3:
            t0, rate = fit(mine)
            if rate > 0 and sum(1 for x, _ in mine if x / rate > t0) >= len(mine) / 3:
                f["decode"] = (t0, rate / GPUS[gpu]["bw"])
                f["decode_kernels"] = decode_fit(decodes)
        prefills = [r for r in rows if r["gpu"] == gpu and r["kind"] == "prefill"]
        if len(prefills) >= 3 and fa2(gpu):
            # What is left after the MMA at the tensor peak: t0 and the scores' clocks, both
            # over the blocks an SM holds (exact while they do not reach the tensor peak).
            g = GPUS[gpu]
            blocks = [decode_blocks_per_sm(gpu, r["head_dim"]) for r in prefills]
            at_peak = [attention_wave_flops(r) / g["flops"] / b for r, b in zip(prefills, blocks)]
            scores = [attention_wave_flops(r) / (4.0 * r["head_dim"] * g["sms"] * g["clock"]) / b
                      for r, b in zip(prefills, blocks)]
            t0, rate = fit([(x, r["t"] - m) for x, r, m in zip(scores, prefills, at_peak)],
                           [r["t"] for r in prefills])
            f["prefill"] = (t0, 1.0 / rate)
        elif len(prefills) >= 3:
            t0, rate = fit([(attention_wave_flops(r), r["t"]) for r in prefills])
            f["prefill"] = (t0, rate / GPUS[gpu]["flops"])
        if f:
            out[gpu] = f
    return out


def attention_constants(fits, gpus):
    have = [g for g in gpus if g in fits]
    kernels = [fits[g]["decode_kernels"] for g in have if "decode_kernels" in fits[g]]
    c = {
        "attention_t0": median(fits[g]["decode"][0] for g in have if "decode" in fits[g]),
        "prefill_t0": median(fits[g]["prefill"][0] for g in have if "prefill" in fits[g]),
        "prefill_eta": median(fits[g]["prefill"][1] for g in have if "prefill" in fits[g] and not fa2(g)),
        "prefill_score_clocks": median(fits[g]["prefill"][1] for g in have if "prefill" in fits[g] and fa2(g)),
    }
    for name in DECODE_CONSTANTS:
        c[name] = median(k[name] for k in kernels if name in k)
    return c


def attention_time(c, r):
    """Decode: the kernels the row's backend launches and the split-KV grid's waves, in SM
    clocks, plus the KV bytes at the decode efficiency (`decode_time`). Prefill: the waves'
    MMA work at the kernel family's share of peak FLOP/s (`prefill_efficiency`)."""
    g = part(r["gpu"])
    if r["kind"] == "decode":
        return decode_time(c, r)
    return c["prefill_t0"] + attention_wave_flops(r) / (g["flops"] * prefill_efficiency(c, r["gpu"], r["head_dim"]))


# ------------------------------------------------------------------------ pure-decode attention

# A pure-decode batch runs FlashAttention's split-KV kernel (FA2's `flash_fwd_splitkv_kernel`;
# vLLM's fork, `csrc/flash_attn/flash_api.cpp`): with one query token per sequence the GQA
# group is packed into the query rows of one tile of 64 rows (`seqlenq_ngroups_swapped`), so
# the grid has one thread block per sequence, KV head and split of the KV, and
# `num_splits_heuristic` picks the splits. Each block streams its split of the KV in tiles of
# `decode_kv_block` tokens; its shared memory holds the 64-row query tile and one K and one V
# tile (`Flash_fwd_kernel_traits<d, 64, kBlockN, 4>`), which sets how many blocks an SM holds.
DECODE_TILE_ROWS = 64
DECODE_MAX_SPLITS = 128
# The constants of the decode model, per GPU from its own rows (`decode_fit`), the median over
# the GPUs: the clocks of a small kernel (the KV-cache write, a transposing copy), of the
# attention kernel's first wave, of the split-KV combine kernel and of each further wave of the
# grid; and the share of peak bandwidth at which the KV streams.
DECODE_CONSTANTS = ["decode_small_clocks", "decode_attention_clocks", "decode_combine_clocks",
                    "decode_wave_clocks", "decode_eta"]


def decode_kv_block(head_dim):
    """KV tokens per tile of FA2's split-KV kernel (`run_mha_fwd_splitkv_dispatch`)."""
    return 256 if head_dim <= 64 else 128 if head_dim <= 128 else 64


def decode_splits(blocks, slots, kv_tiles, max_splits=DECODE_MAX_SPLITS):
    """How many splits of the KV FlashAttention-2 gives each of `blocks` thread blocks on
    `slots` resident blocks when the KV is `kv_tiles` tiles long (`num_splits_heuristic`):
    none when the blocks nearly fill the slots; else the fewest splits whose waves are at
    least 0.85 as full as the fullest, counting only split counts that change the tiles per
    split."""
    if blocks >= 0.8 * slots:
        return 1
    top = min(max_splits, slots, kv_tiles)
    def eligible(s):
        return s == 1 or -(-kv_tiles // s) != -(-kv_tiles // (s - 1))
    def fill(s):
        waves = blocks * s / slots
        return waves / math.ceil(waves)
    fills = {s: fill(s) for s in range(1, top + 1) if eligible(s)}
    best = max(fills.values())
    return next(s for s in sorted(fills) if fills[s] >= 0.85 * best)


def decode_blocks_per_sm(gpu, head_dim):
    """Split-KV thread blocks one SM holds: its shared memory over a block's query tile and
    one K and one V tile (16-bit values)."""
    block = (DECODE_TILE_ROWS + 2 * decode_kv_block(head_dim)) * head_dim * 2
    return max(1, part(gpu)["smem"] * 1024 // block)


def decode_grid(r):
    """(splits, waves, small kernels) of a pure-decode row: FA2's heuristic on twice the SMs
    (it assumes two 128-thread blocks per SM), the waves of its grid over the blocks the SMs
    hold, and the small kernels its backend launches beside the attention kernel: vLLM's
    FlashAttention-2 path writes the KV cache, copies the query into the packed layout and
    the output back (both transposes; the query's is a view with one sequence or one KV head)
    and, without splits, the softmax statistics likewise; FlashInfer's writes the KV cache, and
    so does FlashAttention-3's (`fa3`: vLLM on Hopper packs the group inside its kernel);
    PyTorch's SDPA launches none. Splits add the combine kernel."""
    g = part(r["gpu"])
    b, kvh, d = r["batch"], r["kv_heads"], r["head_dim"]
    m_blocks = -(-max(1, r["q_heads"] // kvh) // DECODE_TILE_ROWS)
    kv_tiles = -(-(r["context"] + 1) // decode_kv_block(d))
    splits = decode_splits(b * kvh * m_blocks, 2 * g["sms"], kv_tiles)
    blocks = b * kvh * m_blocks * splits
    waves = -(-blocks // (g["sms"] * decode_blocks_per_sm(r["gpu"], d)))
    if r["path"] == "fa2-vllm":
        transposes = 1 + (splits == 1) if b >= 2 and kvh >= 2 else 0
        small = 2 + transposes
    else:
        small = 1 if r["path"] in ("flashinfer", "fa3") else 0
    return splits, waves, small


def decode_terms(r):
    """The decode model's terms of a row, in the order of `DECODE_CONSTANTS`: seconds per
    clock of each kernel term, then KV bytes over peak bandwidth."""
    g = part(r["gpu"])
    splits, waves, small = decode_grid(r)
    clock = g["clock"]
    return [small / clock, 1 / clock, (splits > 1) / clock, (waves - 1) / clock, r["x"] / g["bw"]]


def decode_time(c, r):
    terms = decode_terms(r)
    values = [c[name] for name in DECODE_CONSTANTS[:4]] + [1 / c["decode_eta"]]
    return sum(t * v for t, v in zip(terms, values))


def decode_fit(rows):
    """One GPU's decode constants: least squares of the relative error of `decode_time` over
    its pure-decode rows; a term no row has (no small kernels, no splits) is left out."""
    terms = [decode_terms(r) for r in rows]
    used = [j for j in range(len(DECODE_CONSTANTS)) if any(t[j] for t in terms)]
    a = [[sum(t[i] * t[j] / (r["t"] * r["t"]) for t, r in zip(terms, rows)) for j in used] for i in used]
    b = [sum(t[i] / r["t"] for t, r in zip(terms, rows)) for i in used]
    x = dict(zip(used, solve(a, b)))
    out = {DECODE_CONSTANTS[j]: x[j] for j in used if j < 4}
    if 4 in x:
        out["decode_eta"] = 1 / x[4]
    return out


# ------------------------------------------------------ mixed-batch attention by its kernel

# A mixed batch's decodes priced as the launch vLLM 0.19 makes on the parts with mixed rows.
# Its attention backend there is FLASH_ATTN (`_get_backend_priorities`, vllm/platforms/cuda.py:
# FlashInfer first only on compute capability 10), FlashAttention-2 on sm_89 and sm_120. With a
# query of more than one token `mha_varlen_fwd` packs no GQA group and, paged, takes no split
# of the KV (vllm-project/flash-attention 617264c, csrc/flash_attn/flash_api.cpp; vLLM passes
# `num_splits` 0 without CUDA graphs), yet runs the split-KV kernel (`force_split_kernel`) on a
# grid of ceil(longest query / 64) query tiles x sequences x query heads
# (`run_mha_fwd_splitkv_dispatch`). So every decode has one working block per query head, a
# whole 64-row query tile (one row used) computed against its KV head's cache like a prefill
# tile, and ceil(chunk / 64) - 1 blocks per query head that find no query rows and return
# (`compute_attn_1rowblock_splitkv`). A working block computes whole KV tiles of the split
# kernel's `kBlockN` (128 tokens at head dimension 128, `decode_kv_block`), its last one masked,
# over the decode's cached tokens and its new one, as a prefill's query tile computes them up to
# its last row: the same kernel's blocks, each `mixed_block_clocks` besides its tiles, issued in
# blockIdx order (`mixed_working_clocks`). `--mixed-table`, a what-if, checks the efficiency table
# (`MIXED_DECODE_EFFICIENCY`, which the code keeps for parts without `sm_count` or
# `sm_clock_mhz`) instead.
MIXED_TABLE = "--mixed-table" in sys.argv
MIXED_TILE_ROWS = 64


def mixed_kernel_extra(c, gpu, q_heads, kv_heads, head_dim, chunk, decodes, context, prefix=0):
    """Seconds `decodes` decodes reading `context` KV tokens each (the new token included) add
    to a varlen launch of one prefill `chunk` over `prefix`: the grid's idle blocks, one memory
    latency each (`moe_latency` clocks: they read the sequence lengths and return), on the
    blocks the SMs hold; then the longer of the working blocks (`mixed_working_clocks`: the
    list schedule of the grid's blocks in blockIdx order) and their KV from DRAM at the decode
    efficiency: once per KV head where one head's KV of every sequence fits L2, else once per
    window of `slots` blocks in flight that a GQA group's heads span (a sequence's blocks of
    consecutive heads are a sequence count of working blocks apart in blockIdx order; heads in
    flight together share a read): group x sequences / slots reads, at least one and at most
    one per query head."""
    g = GPUS[gpu]
    slots = g["sms"] * decode_blocks_per_sm(gpu, head_dim)
    query_tiles = -(-chunk // MIXED_TILE_ROWS)
    idle = (query_tiles - 1) * decodes * q_heads
    kv_tile = decode_kv_block(head_dim)
    tile_clocks = MIXED_TILE_ROWS * kv_tile * prefill_clocks_per_score(c, gpu, head_dim)
    working = mixed_working_clocks([(chunk, prefix)], q_heads, decodes, context, slots, kv_tile,
                                   c["mixed_block_clocks"], tile_clocks) / g["clock"]
    group, sequences, head_bytes = q_heads // max(kv_heads, 1), decodes + 1, context * head_dim * 2 * 2
    reads = 1 if sequences * head_bytes <= g["l2"] else max(1, min(group, group * sequences / slots))
    dram = decodes * head_bytes * kv_heads * reads
    return idle * c["moe_latency"] / (slots * g["clock"]) + max(working, dram / (c["decode_eta"] * g["bw"]))


# Block starts one list schedule takes at most: a larger grid is scheduled as every `k`-th
# query head on `slots / k` slots (heads are alike, so the span scales with both).
MIXED_SCHEDULE_BLOCKS = 1024


def mixed_working_clocks(prefills, heads, decodes, context, slots, kv_tile, block_clocks, tile_clocks):
    """SM clocks `decodes` working decode blocks (reading `context` KV tokens each) add to the
    span of a varlen launch beside `prefills` ((chunk, prefix) each): the grid's working blocks
    in blockIdx order (query tile fastest, then sequence, query head slowest: a head's prefill
    tiles, then its decodes' tiles), each started on the first of `slots` to come free (a list
    schedule), less the same schedule without the decodes. Every block, prefill or decode,
    takes `block_clocks` and `tile_clocks` per KV tile of `kv_tile` tokens it computes (a
    prefill tile up to its last row, causal; a decode's over its KV): the same kernel's
    blocks."""
    kv = kv_tile
    def clocks(tiles):  # whole clocks, rounded half up, as the code rounds them
        return math.floor(block_clocks + tiles * tile_clocks + 0.5)
    prefill = [clocks(-(-(min((m + 1) * MIXED_TILE_ROWS, ch) + p) // kv))
               for ch, p in prefills for m in range(-(-ch // MIXED_TILE_ROWS))]
    decode = [clocks(math.ceil(context / kv))] * decodes
    return list_span(prefill + decode, heads, slots) - list_span(prefill, heads, slots)


def list_span(blocks, heads, slots):
    """End of the list schedule of `heads` copies of `blocks` (SM clocks each) on `slots`
    slots, every block started on the slot that comes free first; past
    `MIXED_SCHEDULE_BLOCKS` block starts, every `k`-th head on `slots / k` slots."""
    k = max(1, -(-heads * len(blocks) // MIXED_SCHEDULE_BLOCKS))
    heads, slots = -(-heads // k), max(1, round(slots / k))
    free = [0] * slots
    end = 0
    for _ in range(heads):
        for b in blocks:
            t = heapq.heappop(free) + b
            end = max(end, t)
            heapq.heappush(free, t)
    return end


def mixed_block_fits(extras, attention):
    """Per GPU with mixed tables: the SM clocks a working block of the varlen kernel takes
    besides its KV tiles, the median over its tables of the waves of working blocks at 16 KV
    tokens beside a 16-token chunk (64 and 128 decodes: every block one KV tile, the prefill's
    32 blocks among them), per wave, less one KV tile's clocks at the GPU's own clocks per score
    (`prefill_clocks_per_score` of its own fit)."""
    per = {}
    for (gpu, model), cells in extras.items():
        g = GPUS[gpu]
        q_heads = next(q for g2, m, _, q in tables.MIXED_SOURCES if (g2, m) == (gpu, model))
        slots = g["sms"] * decode_blocks_per_sm(gpu, 128)
        per.setdefault(gpu, []).extend(
            e * g["clock"] / (-(-(nd + 1) * q_heads // slots) - 1)
            for nd in (64, 128) for pc, _, e in cells.get((nd, 16), []) if pc == 16)
    own = {gpu: {"prefill_score_clocks": attention[gpu]["prefill"][1]} for gpu in per}
    return {gpu: median(w) - MIXED_TILE_ROWS * decode_kv_block(128) * prefill_clocks_per_score(own[gpu], gpu, 128)
            for gpu, w in per.items()}


def mixed_kernel_errors(c, gpu, q_heads, kv_heads, cells):
    """Per (decodes, KV) cell of `cells` (`tables.mixed_extras`): the median over its prefill
    shapes of the priced extra time over the median measured, less 1 (a decode of `kv` cached
    tokens reads `kv` + 1)."""
    out = []
    for (nd, kv), shapes in sorted(cells.items()):
        priced = median(mixed_kernel_extra(c, gpu, q_heads, kv_heads, 128, pc, nd, kv + 1, kp) for pc, kp, _ in shapes)
        out.append(priced / median(e for _, _, e in shapes) - 1)
    return out


def print_mixed_kernel_fits(data):
    """What each mixed table says of the kernel's terms on its own (medians over the prefill
    shapes): the clocks an idle block takes (the extra time of chunks of 512 or more tokens
    over 16-token ones at 16-64 KV tokens, per idle block), a wave of working blocks' clocks at
    16 KV tokens beside a 16-token chunk (no idle blocks), and the share of peak FLOP/s their
    MMA work reaches from 512 to 1,024 KV tokens at 16-32 decodes (their KV in L2)."""
    print("mixed batches, FlashAttention-2's varlen grid, per table (medians over prefill shapes):")
    for (gpu, model), cells in data.mixed_extras.items():
        g = GPUS[gpu]
        q_heads = next(q for g2, m, _, q in tables.MIXED_SOURCES if (g2, m) == (gpu, model))
        slots = g["sms"] * decode_blocks_per_sm(gpu, 128)
        tile_flops = 4 * prefill_tile_rows(gpu) * 128 * PREFILL_KV_TILE
        at = {(nd, kv): {(pc, kp): e for pc, kp, e in v} for (nd, kv), v in cells.items()}
        idle = [(e - at[cell][(16, kp)]) * slots * g["clock"] / ((-(-pc // 64) - 1) * cell[0] * q_heads)
                for cell in at if cell[0] >= 32 and cell[1] <= 64
                for (pc, kp), e in at[cell].items() if pc >= 512 and (16, kp) in at[cell]]
        wave = [e * g["clock"] / -(-nd * q_heads // slots) for nd in (64, 128)
                for (pc, _), e in at[(nd, 16)].items() if pc == 16]
        share = [-(-nd * q_heads // slots) * slots * 8 * tile_flops / ((e - at[(nd, 512)][key]) * g["flops"])
                 for nd in (16, 32) for key, e in at[(nd, 1024)].items() if key[0] == 16]
        print(f"  {gpu:11} {model.split('/')[-1]:28} idle block {median(idle):6.0f} clocks, a wave at 16 KV tokens "
              f"{median(wave):6.0f} clocks, MMA {median(share):.3f} of peak FLOP/s")
    blocks = ", ".join(f"{gpu} {f:.0f}" for gpu, f in data.fits["mixed_block"].items())
    print(f"  a working block's SM clocks besides its KV tiles (MIXED_BLOCK_CLOCKS, per GPU): {blocks}")


# ------------------------------------------------------------------------------------ fused MoE

# `--vllm019-default-tiles`: read LLMServingSim's tables (vLLM 0.19) on 0.19's default tiles.
VLLM019_DEFAULT_TILES = "--vllm019-default-tiles" in sys.argv


def moe_tile(r):
    """(rows, columns, weight bytes in flight per thread block, whether its MMA work is whole
    tiles, whether the large tile's bytes-per-clock cap holds) of the tile vLLM's default
    config (no table here ran a tuned file) gives a row's grouped GEMMs. vLLM 0.10.2
    (Frontier's tables; every table unless `--vllm019-default-tiles`): 16 x 32 (K step 64)
    when the batch has no more tokens than the GPU has experts, else 64 x 64 (K step 32),
    Triton's 3 stages, `MOE_BLOCK_BYTES_IN_FLIGHT`; SGLang's copy,
    `fused_moe_triton_config.py`, has the same heuristic. With the flag, LLMServingSim's
    tables (vLLM 0.19) on 0.19's `get_default_config`: BLOCK_SIZE_M 16 / 32 / 64 / 128 up to
    32 / 96 / 512 tokens and above, BLOCK_SIZE_N 64 up to 64 tokens then 128, BLOCK_SIZE_K 128
    up to 64 tokens then 64, 4 stages up to 32 tokens then 3, priced as the roofline prices a
    tuned tile (its own bytes in flight, whole tiles, no cap): a what-if that held out does
    worse (docs/src/accuracy.md, "Every bundled part's tuned files")."""
    if r["src"] == "lss" and VLLM019_DEFAULT_TILES:
        m = r["n"]
        block_m = 16 if m <= 32 else 32 if m <= 96 else 64 if m <= 512 else 128
        block_n, block_k = (64, 128) if m <= 64 else (128, 64)
        stages = 4 if m <= 32 else 3
        return block_m, block_n, (stages - 1) * block_k * block_n * 2, True, False
    if r["n"] <= r["E_loc"]:
        return 16, 32, MOE_BLOCK_BYTES_IN_FLIGHT, False, False
    return 64, 64, MOE_BLOCK_BYTES_IN_FLIGHT, True, True


def moe_tiles(r):
    """Thread blocks (CTAs) of the two grouped GEMMs of a fused-MoE row on its tile
    (`moe_tile`): each expert hit gets ceil(rows / tile rows) tile rows, each as many blocks
    as its GEMM has tile columns (gate and up: 2 x width; down: hidden)."""
    block_m, block_n = moe_tile(r)[:2]
    per_expert = r["routed"] / max(r["active"], 1e-9)
    tile_rows = r["active"] * math.ceil(per_expert / block_m - 1e-9)
    return (max(1.0, tile_rows * math.ceil(2 * r["width"] / block_n)),
            max(1.0, tile_rows * math.ceil(r["hidden"] / block_n)))


def large_tile(r):
    """Whether vLLM 0.10.2's default config runs the row's grouped GEMMs on its 64 x 64 tile
    (more tokens than the GPU has experts), the tile the bytes-per-clock cap holds."""
    return moe_tile(r)[4]


# Weight bytes one thread block of the fused-MoE kernel keeps in flight: vLLM 0.10's default configs
# set no `num_stages`, so Triton's default of 3 pipeline stages applies, 2 K steps loading
# ahead of the one being computed, each a BLOCK_K x BLOCK_N tile of bf16 weights: 64 x 32 on
# the small tile (16 x 32 x 64), 32 x 64 on the large (64 x 64 x 32), 8,192 bytes on both.
MOE_BLOCK_BYTES_IN_FLIGHT = 2 * 64 * 32 * 2


def moe_saturating_blocks(gpu, latency):
    """Thread blocks that saturate `gpu`'s bandwidth by Little's law: the bytes in flight the
    peak needs (bytes per clock x the memory latency of `latency` SM clocks) over a block's
    (`MOE_BLOCK_BYTES_IN_FLIGHT`). 0: no limit."""
    g = GPUS[gpu]
    return latency * g["bw"] / g["clock"] / MOE_BLOCK_BYTES_IN_FLIGHT


def moe_parts(r, eta_m, latency, large_tile_cap=None):
    """(MMA seconds at peak, seconds of weight and activation streaming) of a fused-MoE row.
    The weights of the experts hit stream at `eta_m` of peak bandwidth once each GEMM has the
    thread blocks that keep the bytes in flight a memory latency of `latency` SM clocks needs
    (`moe_saturating_blocks`), and in proportion below (few experts, few tile columns or one
    tile row each leave the GPU's bandwidth unused); the routed rows in and out at `eta_m`. On
    vLLM's large tile the peak is at most `large_tile_cap` (`large_tile_peak`), and the MMA
    work is of whole 64-row tiles per expert hit (`mma_rows`)."""
    g = GPUS[r["gpu"]]
    expert = r["hidden"] * r["width"] * 2
    bw = large_tile_peak(r, large_tile_cap) * eta_m
    full = moe_saturating_blocks(r["gpu"], latency) * MOE_BLOCK_BYTES_IN_FLIGHT / moe_tile(r)[2]
    up, down = (bw * min(1.0, blocks / full) if full else bw for blocks in moe_tiles(r))
    moved = 2 * r["active"] * expert / up + r["active"] * expert / down + 2 * r["routed"] * r["hidden"] * 2 / bw
    flops = mma_rows(r) * 2 * 3 * r["hidden"] * r["width"]
    peak = min(g["flops"], mma_smem_flops(r)) if MOE_SMEM_BOUND and large_tile(r) else g["flops"]
    return flops / peak, moved


# `--moe-smem-bound`: the large tile's MMA work at most what its operands' shared-memory traffic
# allows (a what-if, docs/src/accuracy.md, "Few large experts: the large tile's shared memory").
MOE_SMEM_BOUND = "--moe-smem-bound" in sys.argv
# Bytes per clock one SM's shared memory serves: 32 banks of 4 bytes on every part here
# (Ampere, Hopper, Ada, Blackwell; NVIDIA's CUDA C++ Programming Guide, compute capabilities).
SMEM_BYTES_PER_CLOCK = 128.0


def mma_smem_flops(r):
    """FLOP/s at most of the MMA work of a row's tile (`moe_tile`) with Triton's default 4 warps:
    per 16-wide K slice the block writes its A and B tiles into shared memory (cp.async), and
    with mma.sync each warp reads its A rows and B columns back (ldmatrix), the warps laid out
    as Triton's MMAv2 lays them (`warpsPerTileV2`: double the rows while they are no fewer than
    the columns per warp and at least 16, else the columns). The 64 x 64 tile: warps 2 x 2, per
    slice 4 KiB written and 8 KiB read, 10.7 FLOP per byte, 1,365 FLOP per SM per clock at 128
    bytes per clock: 0.67 of A800's peak, above RTX PRO 6000's. On Hopper a tile of 64 rows or
    more runs wgmma (Triton's MMAv3, one warpgroup of the 4 warps), which reads each operand
    tile once from shared memory: 16 FLOP per byte, 0.5 of H800's peak."""
    g = GPUS[r["gpu"]]
    block_m, block_n = moe_tile(r)[:2]
    warps_m, warps_n = 1, 1
    for _ in range(2):
        if block_m / warps_m >= block_n / warps_n and warps_m < block_m / 16:
            warps_m *= 2
        else:
            warps_n *= 2
    written = (block_m + block_n) * 16 * 2
    read = warps_m * warps_n * (block_m / warps_m + block_n / warps_n) * 16 * 2
    if g["gen"] == "hopper" and block_m >= 64:
        read = written
    return 2 * block_m * block_n * 16 / (written + read) * SMEM_BYTES_PER_CLOCK * g["sms"] * g["clock"]


def mma_rows(r):
    """The rows whose MMA work the grouped GEMMs do: on a tile of whole tiles (`moe_tile`: 0.10's
    large tile, 64 rows) each expert hit computes its routed rows rounded up to the tile's
    (`moe_tiles`'s tile rows), on 0.10's small tile the routed rows."""
    block_m, _, _, whole, _ = moe_tile(r)
    if not whole:
        return r["routed"]
    per_expert = r["routed"] / max(r["active"], 1e-9)
    return r["active"] * block_m * math.ceil(per_expert / block_m - 1e-9)


def large_tile_peak(r, cap):
    """The bandwidth a row's grouped GEMMs can reach at full efficiency. On the large tile
    (64 x 64, K step 32) a thread block keeps fewer weight bytes in flight per clock than on
    the small one, so by Little's law (bytes in flight = rate x latency, the latency about the
    same number of SM clocks on every generation) an SM streams at most `cap` bytes per clock:
    the GPU at most `cap x SMs x clock`. Parts with many bytes per SM per clock at peak (H800
    3350 GB/s over 132 SMs at 1.83 GHz: 13.9; A800 13.4) lose on the large tile, parts with few
    (RTX PRO 6000: 3.2) do not. A float `cap` < 1 is the `--flat-large-tile` what-if: a share of
    the peak. None: no limit."""
    g = GPUS[r["gpu"]]
    if cap is None or not large_tile(r):
        return g["bw"]
    if cap < 1.0:
        return g["bw"] * cap
    return min(g["bw"], cap * g["sms"] * g["clock"])


def moe_grid_rows(r, block_m, a_rows, top_k):
    """Tile rows (`cdiv(EM, BLOCK_SIZE_M)`) of one grouped GEMM's grid, `a_rows` rows of input
    each routed `top_k` times. `moe_align_block_size` sizes the sorted ids for every expert of
    the model, on every EP rank (`numel + E x (BLOCK_SIZE_M - 1)`); vLLM 0.19 (LLMServingSim's
    tables, and the roofline) caps that at `numel x BLOCK_SIZE_M` when there are fewer routed
    rows than experts, vLLM 0.10.2 (Frontier's) does not; `invoke_fused_moe_kernel` caps it at
    `a_rows x top_k x BLOCK_SIZE_M` when `a_rows < BLOCK_SIZE_M`."""
    numel = r["n"] * r["top_k"]
    padded = numel + r["E"] * (block_m - 1)
    if r["src"] == "lss" and numel < r["E"]:
        padded = min(padded, numel * block_m)
    if a_rows < block_m:
        padded = min(padded, a_rows * top_k * block_m)
    return math.ceil(padded / block_m)


def moe_idle_blocks(r):
    """Thread blocks of a row's two grouped GEMMs that do no MMA work: the grid's tile rows
    beyond those of this GPU's experts hit (past `num_tokens_post_padded` they return at once;
    those of other EP ranks' experts write zeros), times the GEMM's tile columns."""
    block_m, block_n = moe_tile(r)[:2]
    real = r["active"] * math.ceil(r["routed"] / max(r["active"], 1e-9) / block_m - 1e-9)
    numel = r["n"] * r["top_k"]
    up = max(0.0, moe_grid_rows(r, block_m, r["n"], r["top_k"]) - real) * math.ceil(2 * r["width"] / block_n)
    down = max(0.0, moe_grid_rows(r, block_m, numel, 1) - real) * math.ceil(r["hidden"] / block_n)
    return up + down


def moe_idle_time(r, clocks):
    """Seconds the idle blocks take: `clocks` SM clocks each, spread over the SMs."""
    g = GPUS[r["gpu"]]
    return moe_idle_blocks(r) * clocks / (g["sms"] * g["clock"])


def moe_time(c, r):
    """The fused-MoE kernel as src/latency/roofline.rs prices it."""
    at_peak, moved = moe_parts(r, c["moe_eta_m"], c["moe_latency"], c["moe_large_tile"])
    compute = at_peak / c["moe_eta_c"]
    busy = max(compute, moved) + c["moe_unhidden"] * min(compute, moved)
    return c["moe_t0"] + busy + moe_idle_time(r, c.get("moe_idle_clocks", 0.0))


# The memory latency in SM clocks that sets the blocks saturating the bandwidth, tried by the
# light rows' fit (0: any number of blocks does).
LATENCY_CLOCKS = [x * 50.0 for x in range(0, 101)]
# Bytes per SM per clock the large tile streams at most, tried by the same fit (None: no
# limit); with `--flat-large-tile`, shares of the peak instead (a what-if: RTX PRO 6000's own
# table shows no such loss, and its bench case's TPOT goes from +0.2% to +11% with a share).
LARGE_TILE_CAPS = [None] + ([x / 20 for x in range(10, 20)] if "--flat-large-tile" in sys.argv
                            else [x / 2 for x in range(8, 41)])


def idling(r):
    """Whether a row's grids launch more idle thread blocks than working ones."""
    return moe_idle_blocks(r) > sum(moe_tiles(r))


def moe_light_fit(light):
    """(t0, eta_m, latency in clocks, large-tile cap or None, SM clocks per idle block) of the
    rows whose weights dominate. For each latency and large-tile cap on the grids the streaming
    time is `x / eta_m`, with `x` the bytes over the bandwidth the blocks reach, so
    `t = t0 + x / eta_m` is fitted as the GEMMs are (least squares of the relative error); the
    pair whose fit has the least median over the GPU's tables of their median |error| wins
    (every table weighs alike, and one table whose kernel behaves otherwise does not decide
    it). The latency is kept (else 0) only where at least a third of the rows then
    stream slower than `eta_m` allows; the cap is tried only where at least a tenth of the
    rows run on the large tile: else the tables do not measure it. Where at least a tenth of
    the rows launch more idle thread blocks than working ones (`idling`), the SM clocks per
    idle block are the median over those rows of what the fit leaves unpriced per idle block
    (`moe_idle_blocks`), and the fixed time and efficiency are fitted again, at the same
    latency and cap, with each row's idle time taken off; else no idle time (the GPU's tables
    do not measure it)."""
    tables_of = {}
    for r in light:
        tables_of.setdefault(r["model"], []).append(r)

    def fit_at(k, q, idle=0.0):
        t0, rate = fit([(moe_parts(r, 1.0, k, q)[1], r["t"] - moe_idle_time(r, idle)) for r in light])
        c = {"moe_t0": t0, "moe_eta_m": rate, "moe_latency": k, "moe_eta_c": 1.0, "moe_unhidden": 0.0,
             "moe_large_tile": q, "moe_idle_clocks": idle}
        err = median(median(abs(moe_time(c, r) / r["t"] - 1) for r in rows) for rows in tables_of.values())
        return err, c
    tiled = [r for r in light if large_tile(r)]
    caps = LARGE_TILE_CAPS if len(tiled) >= len(light) / 10 else [None]

    def search():
        _, c = min((fit_at(k, q) for k in LATENCY_CLOCKS for q in caps), key=lambda f: f[0])
        k, q = c["moe_latency"], c["moe_large_tile"]
        eta = c["moe_eta_m"]
        limited = sum(1 for r in light if moe_parts(r, eta, k, q)[1] > moe_parts(r, eta, 0, q)[1] * 1.05)
        if limited < len(light) / 3:
            _, c = min((fit_at(0.0, q) for q in caps), key=lambda f: f[0])
        return c
    c = search()
    idle_rows = [r for r in light if idling(r)]
    if len(idle_rows) >= len(light) / 10:
        idle = median(max(0.0, r["t"] - moe_time(c, r)) / moe_idle_time(r, 1.0) for r in idle_rows)
        c = fit_at(c["moe_latency"], c["moe_large_tile"], idle)[1]
    return c["moe_t0"], c["moe_eta_m"], c["moe_latency"], c["moe_large_tile"], c["moe_idle_clocks"]


def fused(r):
    """Whether a MoE row times vLLM's fused Triton kernel (every table but Vidur's per-expert
    loop of cuBLAS GEMMs on A100, which `loop_time` prices as GEMMs)."""
    return r["src"] != "frontier-vidur-loop"


def loop_time(c, r):
    """A row of Vidur's per-expert loop (A100 Mixtral-8x7B): per expert hit, its gate-and-up
    and down GEMMs over its routed rows as the roofline prices GEMMs, and the SiLU-and-mul
    between them at the elementwise efficiency."""
    m = r["routed"] / max(r["active"], 1e-9)
    up = gemm_time(c, {"gpu": r["gpu"], "M": m, "K": r["hidden"], "N": 2 * r["width"], "fp8": False})
    down = gemm_time(c, {"gpu": r["gpu"], "M": m, "K": r["width"], "N": r["hidden"], "fp8": False})
    act = 3 * m * r["width"] * 2 / (GPUS[r["gpu"]]["bw"] * ELEMENTWISE_EFFICIENCY) + LAUNCH_S
    return r["active"] * (up + down + act)


def moe_fits(rows):
    """Per GPU: t0, weight-streaming efficiency, the memory latency and the large tile's cap
    from the rows with at most 4 routed rows per expert hit (the weights dominate), the compute
    efficiency from those with at least 256 (the MMA work dominates; median), the unhidden
    share by least squares over all its rows. Only vLLM's fused kernel (`fused`): a per-expert
    cuBLAS loop reaches cuBLAS's compute efficiency, not the Triton kernel's."""
    out = {}
    for gpu in GPUS:
        mine = [r for r in rows if r["gpu"] == gpu and fused(r)]
        light = [r for r in mine if r["routed"] <= 4 * max(r["active"], 1)]
        if len(light) < 3:
            continue
        t0, eta, latency, cap, idle = moe_light_fit(light)
        f = {"t0": t0, "eta_m": eta, "latency": latency, "large_tile": cap, "idle": idle, "n": len(mine),
             "kernel_timed": all(r["src"] in ("lss", "frontier-kernel") for r in mine)}
        heavy = [moe_parts(r, eta, latency, cap)[0] / (r["t"] - t0 - moe_idle_time(r, idle)) for r in mine
                 if r["routed"] >= 256 * max(r["active"], 1) and r["t"] > t0 + moe_idle_time(r, idle)]
        if heavy:
            f["eta_c"] = median(heavy)
            base = {"moe_t0": t0, "moe_eta_m": eta, "moe_eta_c": f["eta_c"], "moe_latency": latency,
                    "moe_large_tile": cap, "moe_idle_clocks": idle}
            f["unhidden"] = best([k / 50 for k in range(51)],
                                 lambda k: [moe_time(dict(base, moe_unhidden=k), r) / r["t"] - 1 for r in mine])
        out[gpu] = f
    return out


# The memory latency in SM clocks that a pointer chase through DRAM measures, one dependent
# load at a time (markdewing/AI_kernels, `latency/README.md`, commit 0d701add; clocks not
# locked): V100 460, RTX 2000 570, A100 SXM 550, RTX 4090 636, H100 SXM 700, GH200 690, RTX 5090
# 936, RTX PRO 6000 864, B200 860, B300 848; the median. A derivation whose GPUs have no table
# that measures the thread-block limit (H800's kernel-only tables are the only ones: H800 held
# out) takes this latency for it rather than none; with H800's tables the limit is H800's fit
# (1,000 clocks: the kernel waits longer per load than an idle pointer chase).
PUBLIC_MEMORY_LATENCY_CLOCKS = 695.0

# `--moe-cap-from-latency`: where no table measures the large tile's cap, one thread block's
# weight bytes in flight per SM per memory latency (a what-if, docs/src/accuracy.md).
MOE_CAP_FROM_LATENCY = "--moe-cap-from-latency" in sys.argv


def moe_constants(fits, gpus):
    have = [g for g in gpus if g in fits]
    full = [g for g in have if "eta_c" in fits[g]]
    latencies = [fits[g]["latency"] for g in have if fits[g]["latency"]]
    caps = [fits[g]["large_tile"] for g in have if fits[g]["large_tile"] is not None]
    idles = [fits[g]["idle"] for g in have if fits[g]["idle"]]
    latency = median(latencies) if latencies else PUBLIC_MEMORY_LATENCY_CLOCKS
    cap = MOE_BLOCK_BYTES_IN_FLIGHT / latency if MOE_CAP_FROM_LATENCY else None
    return {
        # Event-timed and looped tables carry host time in their intercept: the fixed time
        # comes from the kernel-timed ones.
        "moe_t0": median(fits[g]["t0"] for g in have if fits[g]["kernel_timed"]),
        "moe_eta_m": median(fits[g]["eta_m"] for g in have),
        "moe_eta_c": median(fits[g]["eta_c"] for g in full),
        "moe_unhidden": median(fits[g]["unhidden"] for g in full),
        # Without a table that measures it, the public pointer chase's latency.
        "moe_latency": latency,
        # Measured only where a GPU's weight-bound rows run both tiles (H800's tables).
        "moe_large_tile": median(caps) if caps else cap,
        # Measured only where a GPU's rows launch many idle blocks (H800's, A800's Qwen3-Next).
        "moe_idle_clocks": median(idles) if idles else 0.0,
    }


# ------------------------------------------------------------------------ norms and elementwise

NORMS = ("input_layernorm", "layernorm")


def row_launches(r):
    """(bytes, vectorised) of each kernel a row-kernel row times (its time is their mean): a
    thread block per token, loading its row 16 bytes at a time (vectorised) or one element at
    a time, as the row's vLLM launches it (`csrc/layernorm_kernels.cu`,
    `activation_kernels.cu`, `pos_encoding_kernels.cu`; 0.10.2 and 0.19.0):
    - RMSNorm (`rms_norm`) reads and writes the row and reads the weight: scalar in 0.10,
      vectorised in 0.19;
    - fused add + RMSNorm (`fused_add_rms_norm`) reads the row and the residual, writes both
      and reads the weight: vectorised in both. Frontier's `post_attention_layernorm` times it
      (with the residual; Phi-tiny-MoE's `add` times the same call) and `input_layernorm`
      times RMSNorm (a one-layer model, no residual yet); LLMServingSim's `layernorm` is the
      mean of both (vLLM's layerwise profile sums the decoder layer's two `RMSNorm` modules of
      the same name, per invocation);
    - SiLU-and-mul reads two rows of the MLP's width and writes one: scalar in 0.10,
      vectorised in 0.19;
    - rotary reads and writes the query and key heads and one cos/sin row: scalar in both."""
    m, h = r["tokens"], r["h"]
    vector = r["vllm"] != "0.10"
    rms = ((2 * m * h + h) * 2, vector)
    fused = ((4 * m * h + h) * 2, True)
    launches = {"input_layernorm": [rms], "post_attention_layernorm": [fused], "add": [fused],
                "layernorm": [rms, fused]}
    if r["op"] in launches:
        return launches[r["op"]]
    if r["op"] in ("mlp_act", "act_fn"):
        return [(3 * m * r["ffn"] * 2, vector)]
    return [((2 * m * (r["q"] + r["k"]) + m * r["rot"]) * 2, False)]


def row_waves(r):
    """Waves of a row kernel's grid, one thread block per SM at a time (a token each)."""
    return math.ceil(r["tokens"] / part(r["gpu"])["sms"])


def fit_row_rates(rows):
    """`(t - launch) x clock = F + s / scalar + v / vector` over one-wave rows (s, v: the mean
    row bytes a thread block loads one element or 16 bytes at a time), least squares of the
    relative error; (F, scalar, vector), a rate None where no row loads that way."""
    terms, clocks = [], []
    for r in rows:
        launches = row_launches(r)
        s = sum(b for b, vec in launches if not vec) / len(launches) / r["tokens"]
        v = sum(b for b, vec in launches if vec) / len(launches) / r["tokens"]
        terms.append([1.0, s, v])
        clocks.append((r["t"] - LAUNCH_S) * GPUS[r["gpu"]]["clock"])
    used = [i for i in range(3) if any(t[i] for t in terms)]
    a = [[sum(t[i] * t[j] / (y * y) for t, y in zip(terms, clocks)) for j in used] for i in used]
    b = [sum(t[i] / y for t, y in zip(terms, clocks)) for i in used]
    x = dict(zip(used, solve(a, b)))
    return x[0], 1 / x[1] if 1 in x else None, 1 / x[2] if 2 in x else None


def elementwise_fits(rows):
    """Per GPU: the least time of a kernel (the median one-token RMSNorm); a row kernel's
    fixed SM clocks and the bytes per SM clock one thread block moves along its row when it
    loads one element at a time and 16 bytes at a time, fitted over the rows whose grid takes
    one wave (`fit_row_rates`); and, where the tables have grids of several waves, the rate at
    which the part streams a working set that fits its L2 (least squares of the relative
    error), as a multiple of its DRAM bandwidth (`l2_dram`, the norms' own kernels) and in bytes
    per SM per clock (`l2`, the FP8 activation quantization's)."""
    out = {}
    for gpu in GPUS:
        mine = [r for r in rows if r["gpu"] == gpu]
        ones = [r["t"] for r in mine if r["op"] in NORMS and r["tokens"] == 1]
        if not ones:
            continue
        fixed, scalar, vector = fit_row_rates([r for r in mine if row_waves(r) == 1])
        f = {"floor": median(ones), "row_fixed": fixed, "row_scalar": scalar, "row_vector": vector, "l2": None}
        f["l2_dram"] = None
        waves = [r for r in mine if row_waves(r) > 1 and all(b <= GPUS[gpu]["l2"] for b, _ in row_launches(r))]
        if waves:
            rates = {"row_fixed": fixed, "row_scalar": scalar or vector, "row_vector": vector or scalar}

            def error(l2, key):
                return [row_kernel_time({**rates, key: l2}, r) / r["t"] - 1 for r in waves]
            f["l2"] = best([x / 8 for x in range(4, 400)], lambda l2: error(l2, "l2_bytes"))
            f["l2_dram"] = best([x / 100 for x in range(50, 800)], lambda l2: error(l2, "l2_dram"))
        out[gpu] = f
    return out


def row_kernel_time(c, r):
    """A row-kernel row as src/latency/roofline/rows.rs prices each of its kernels (the mean
    of them): its waves of one row per SM, each paying the row's bytes at a thread block's
    bytes per clock (scalar or vectorised loads), after the fixed clocks; or, if longer, the
    fixed clocks and the whole working set streamed from L2 (when it fits: at `l2_dram` times
    the DRAM bandwidth, or where `c` holds no `l2_dram`, at `l2_bytes` per SM per clock) or
    DRAM; plus the launch."""
    g = part(r["gpu"])
    times = []
    for b, vector in row_launches(r):
        rate = c["row_vector"] if vector else c["row_scalar"]
        waves = (c["row_fixed"] + row_waves(r) * b / r["tokens"] / rate) / g["clock"]
        l2 = c["l2_dram"] * g["bw"] if "l2_dram" in c else c["l2_bytes"] * g["sms"] * g["clock"]
        stream = l2 if b <= g["l2"] else g["bw"] * ELEMENTWISE_EFFICIENCY
        times.append(max(waves, c["row_fixed"] / g["clock"] + b / stream) + LAUNCH_S)
    return sum(times) / len(times)


def elementwise_constants(fits, gpus):
    def over(key):
        return median(fits[g][key] for g in gpus if g in fits and fits[g][key] is not None)
    return {"floor": over("floor"), "row_fixed": over("row_fixed"), "row_scalar": over("row_scalar"),
            "row_vector": over("row_vector"), "l2_bytes": over("l2"), "l2_dram": over("l2_dram")}


def print_row_kernels(data):
    """Every row-kernel row's held-out error (the constants derived from the other GPUs), in
    groups by GPU, table and op, with each group's median |error| and signed median; a row's
    line gives its tokens, waves, its kernels' row bytes (s: scalar loads, v: vectorised),
    the measured and priced times."""
    groups = {}
    for gpu in sorted({r["gpu"] for r in data.elementwise}):
        c = data.constants([g for g in GPUS if g != gpu])
        for r in data.elementwise:
            if r["gpu"] == gpu:
                groups.setdefault((gpu, r["table"], r["op"]), []).append((r, row_kernel_time(c, r)))
    for (gpu, table, op), rs in groups.items():
        errors = [p / r["t"] - 1 for r, p in rs]
        print(f"{gpu} {table} {op}: {len(rs)} rows, held out {median(abs(e) for e in errors):.1%} "
              f"({median(errors):+.1%})")
        for r, p in rs:
            kinds = " + ".join(f"{b / r['tokens']:.0f} {'v' if vec else 's'}" for b, vec in row_launches(r))
            print(f"  {r['tokens']:5} tokens, {row_waves(r):2} waves, row bytes {kinds}: {r['t'] * 1e6:7.2f} us, "
                  f"priced {p * 1e6:7.2f} ({p / r['t'] - 1:+.1%})")


# ------------------------------------------------------------------------------------ all-reduce

def ring_bytes(r):
    """Bytes each GPU sends in a ring all-reduce of the row's message."""
    return 2 * (r["n"] - 1) / r["n"] * r["bytes"]


def allreduce_fits(rows):
    """Per system: the link efficiency, `t = t0 + ring bytes / (eta x link)` fitted over
    messages of at least 16 MiB; the time of messages up to 64 KiB (whose ring bytes take
    under 0.5 µs); and per GPU count the floor, the intercept of the same fit over 1-64 MiB
    messages (NCCL's Simple and LL128 protocols, those of a prefill's all-reduces). Frontier
    timed each all-reduce as an eager op between CUDA events: the floor holds a pair of
    events (`EVENT_COST_S`, measured on our H200) and the host's issue of one op, which runs
    ahead of the GPU once the GPU is busy; the rest is the GPU's (launch, the protocol's
    handshakes between ranks). The least small-message time of any system (7 µs, the bridged
    H100 pair) bounds events and host together, while the 1-64 MiB floors are 17-53 µs: most
    of a floor is the GPU's."""
    out = {}
    for system in sorted({r["system"] for r in rows}):
        mine = [r for r in rows if r["system"] == system]
        t0 = median(r["t"] for r in mine if r["bytes"] <= 65536)
        big = [(ring_bytes(r), r["t"]) for r in mine if r["bytes"] >= 16 << 20]
        _, rate = fit(big)
        floors = {}
        for n in sorted({r["n"] for r in mine}):
            medium = [(ring_bytes(r), r["t"]) for r in mine if r["n"] == n and 1 << 20 <= r["bytes"] <= 64 << 20]
            if len(medium) >= 3:
                floors[n] = fit(medium)[0]
        out[system] = {"gpu": mine[0]["gpu"], "t0": t0, "eta": rate / mine[0]["link"], "floors": floors}
    return out


def allreduce_constants(fits, gpus):
    have = [f for f in fits.values() if f["gpu"] in gpus]
    return {"allreduce_eta": median(f["eta"] for f in have)}


def allreduce_time(c, r, small_message_s):
    """A message of at least 1 MiB: the system's measured small-message time (the same
    eager-op and event overhead is in every row) plus the ring at the derived efficiency."""
    return small_message_s + ring_bytes(r) / (r["link"] * c["allreduce_eta"])


def print_allreduce_floor(data, c):
    """The roofline's all-reduce against Frontier's by message size, at 4 GPUs, with and
    without a GPU-side floor: the median 1-64 MiB intercept less a pair of events. Each row
    holds a pair of events (`EVENT_COST_S`), added to both; the roofline's own fixed time is
    `2 (n - 1)` hops of 1 µs (the bundled NVLink parts' `link_latency_ns`)."""
    floor = median(t for f in data.fits["all_reduce"].values() for t in f["floors"].values()) - tables.EVENT_COST_S
    print(f"all-reduce at 4 GPUs, median signed error by message size; floor {floor * 1e6:.1f} us "
          "(median 1-64 MiB intercept less a pair of events)")
    for system in ("h100_dgx", "a100_dgx"):
        mine = [r for r in data.all_reduce if r["system"] == system and r["n"] == 4]
        cells = []
        for lo, hi in ((0, 1), (1, 4), (4, 16), (16, 64)):
            part = [r for r in mine if lo << 20 <= r["bytes"] < hi << 20]
            ring = [ring_bytes(r) / (r["link"] * c["allreduce_eta"]) for r in part]
            plain = median((tables.EVENT_COST_S + 6e-6 + x) / r["t"] - 1 for r, x in zip(part, ring))
            floored = median((tables.EVENT_COST_S + max(6e-6, floor) + x) / r["t"] - 1 for r, x in zip(part, ring))
            cells.append(f"{lo}-{hi} MiB {plain * 100:+5.1f}% -> {floored * 100:+5.1f}%")
        print(f"  {system:9}: " + ", ".join(cells))
        # A prefill chunk's sizes: 2,048 tokens x hidden 4,096 / 8,192 x 2 bytes = 16 / 32 MiB.
        at = {r["bytes"]: r for r in mine}
        sizes = [(mib, at[mib << 20]) for mib in (1, 4, 8, 16, 32, 64) if mib << 20 in at]
        print(f"  {'':9}  measured / roofline with the events (us): " + ", ".join(
            f"{mib} MiB {r['t'] * 1e6:.0f} / {(tables.EVENT_COST_S + 6e-6 + ring_bytes(r) / (r['link'] * c['allreduce_eta'])) * 1e6:.0f}"
            for mib, r in sizes))


# Message-size bands of the step-latency check: decode sizes, vLLM's custom all-reduce at 4
# GPUs on Hopper (two-shot from 512 KiB to 8 MiB), symmetric memory and NCCL above.
ALLREDUCE_BANDS = (("<= 1 MiB", 0, 1 << 20), ("1-8 MiB", (1 << 20) + 1, 8 << 20), (">= 8 MiB", (8 << 20) + 1, 1 << 40))

# vLLM's benchmark of its communicators at 4 GPUs (PR #24532, benchmark_device_communicators.py;
# the GPU is not named there): message MB -> (two-shot custom all-reduce, NCCL) in us.
VLLM_PR24532_TP4_US = {0.5: (17, 21), 1: (18, 23), 1.5: (25, 25), 2: (26, 28), 3: (35, 33), 4: (42, 39)}


def allreduce_steps_fit(fits, systems):
    """`floor - events = F + S x steps` over the 1-64 MiB intercepts (per system and GPU count)
    of `systems`, a ring all-reduce taking `2 (n - 1)` steps: the fixed GPU time of one
    collective (launch and its handshakes) and the latency of one algorithm step, least
    squares. Returns (F, S) in seconds."""
    pts = [(2 * (n - 1), t - tables.EVENT_COST_S) for s in systems for n, t in fits[s]["floors"].items()]
    mx, my = statistics.mean(x for x, _ in pts), statistics.mean(y for _, y in pts)
    slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    return my - slope * mx, slope


def allreduce_band_errors(data):
    """Leave-one-table-out, per band of message size (from 64 KiB): the code's ring (2 (n - 1)
    hops of 1 us, the ring bytes at the median efficiency of the other tables) against the
    candidate that adds a fixed GPU time and a per-step latency fitted on the other tables'
    intercepts (`allreduce_steps_fit`). Both add the pair of events every row holds."""
    fits = data.fits["all_reduce"]
    out = {}
    for held in sorted(fits):
        others = [s for s in fits if s != held]
        eta = median(fits[s]["eta"] for s in others)
        fixed, step = allreduce_steps_fit(fits, others)
        for r in data.all_reduce:
            if r["system"] != held or r["bytes"] < 64 << 10:
                continue
            band = next(name for name, lo, hi in ALLREDUCE_BANDS if lo <= r["bytes"] <= hi)
            ring = tables.EVENT_COST_S + ring_bytes(r) / (r["link"] * eta)
            steps = 2 * (r["n"] - 1)
            cell = out.setdefault((held, band), ([], []))
            cell[0].append((ring + steps * 1e-6) / r["t"] - 1)
            cell[1].append((ring + fixed + steps * step) / r["t"] - 1)
    return out


def print_allreduce_bands(data):
    fits = data.fits["all_reduce"]
    fixed, step = allreduce_steps_fit(fits, list(fits))
    print(f"all-reduce, one table held out, by message size: median |error| (signed), the code's ring -> "
          f"ring + fixed GPU time + per-step latency (all tables: {fixed * 1e6:.1f} us + {step * 1e6:.2f} us a step)")
    errors = allreduce_band_errors(data)
    for system in sorted(fits):
        f, s = allreduce_steps_fit(fits, [o for o in fits if o != system])
        cells = []
        for band, _, _ in ALLREDUCE_BANDS:
            if (system, band) in errors:
                before, after = errors[(system, band)]
                cells.append(f"{band} {summary(before)} -> {summary(after)}")
        print(f"  {system:21} (F {f * 1e6:4.1f} us, S {s * 1e6:.2f} us): " + ", ".join(cells))
    pooled = []
    for band, _, _ in ALLREDUCE_BANDS:
        before = [e for (_, b), (x, _) in errors.items() if b == band for e in x]
        after = [e for (_, b), (_, y) in errors.items() if b == band for e in y]
        pooled.append(f"{band} {summary(before)} -> {summary(after)} [{len(before)}]")
    print("  pooled: " + ", ".join(pooled))
    # vLLM's two-shot kernel, priced as the candidate prices it on H100's link (450 GB/s): two
    # steps, the ring's bytes (reduce-scatter then all-gather).
    eta = median(g["eta"] for g in fits.values())
    cells = []
    for mb, (two_shot, nccl) in VLLM_PR24532_TP4_US.items():
        moved = 1.5 * mb * 1e6 / (450e9 * eta)
        cells.append(f"{mb} MB {two_shot} / {(2e-6 + moved) * 1e6:.0f} / {(fixed + 2 * step + moved) * 1e6:.0f}")
    print("  vLLM PR #24532 two-shot at 4 GPUs, measured / two steps of 1 us + bytes / + fixed time (us): "
          + ", ".join(cells))


# vLLM's custom all-reduce kernels timed alone, each algorithm forced, by vLLM's own
# `benchmarks/kernels/benchmark_device_communicators.py` (bf16, a (tokens, 8192) tensor, so
# 32 tokens = 0.5 MiB; the PR's "MB" are MiB; its ms written here in us). Columns ca_1stage
# (one-shot) and ca_2stage (two-shot). Two GPU generations:
# - H100 (NVLink 4, 450 GB/s a direction): vLLM PR #24111 description, "Isolated primitives
#   benchmark results, H100", the TP=4 and TP=6 tables, rows 0.5-4 MiB (its TP=2 and TP=8
#   tables and the rows from 16 MiB were not readable here; the TP=4 and TP=6 parts were read
#   without their heading, and are taken as H100's as the only GPU the PR names: its pynccl
#   column at 4 GPUs and 4 MiB, 37 us, is Frontier's DGX H100 all-reduce less its events, 38).
# - B300 (NVLink 5, 900 GB/s a direction): vLLM PR #37756 description (SM 10.3), the one
#   table with ca_1stage and ca_2stage readable here, 16 KiB-128 MiB; its world size is not in
#   the readable part and is taken as 6 from the PR's own limits: at 6 it sets the custom
#   all-reduce's limit to 8 MiB and symmetric memory's to 32 MiB (8: 4 and 64 MiB), and in
#   this table ca_2stage beats pynccl up to 8 MiB (74 / 80 us) and not at 16 MiB (136 / 83),
#   symm_mem_multimem beats pynccl up to 32 MiB and not at 64 MiB, and beats two-shot at
#   32 MiB, which the PR says holds at 6 and 8 GPUs, not at 2 and 4. Only rows up to 8 MiB
#   are used (vLLM's custom buffer, `max_size`, is 8 MiB).
# The same H100 tables' torch symmetric-memory columns, `symm_mem_multimem` ("mm") and
# `symm_mem_two_shot` ("ts"), which time the communicator's copy in and out with the kernel.
CUSTOM_AR_US = {
    ("H100", 4): {"sizes_kib": (512, 1024, 1536, 2048, 3072, 4096),
                  "one": (10, 15, 19, 22, 30, 38), "two": (17, 18, 27, 27, 35, 43),
                  "mm": (16, 18, 21, 23, 28, 33), "ts": (18, 19, 19, 23, 25, 29)},
    ("H100", 6): {"sizes_kib": (512, 1024, 1536, 2048, 3072, 4096),
                  "one": (13, 21, 30, 38, 53, 70), "two": (15, 17, 20, 26, 29, 37),
                  "mm": (13, 16, 18, 21, 25, 31), "ts": (17, 21, 24, 29, 35, 41)},
    ("B300", 6): {"sizes_kib": (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192),
                  "one": (7, 8, 8, 8, 9, 11, 17, 26, 45, 80), "two": (19, 20, 21, 22, 22, 23, 23, 36, 49, 74)},
}
CUSTOM_AR_LINK_GBPS = {"H100": 450.0, "B300": 900.0}


def custom_ar_rows():
    """The custom all-reduce rows: gpu, n, algorithm, message bytes, time (s), link (bytes/s)."""
    rows = []
    for (gpu, n), t in CUSTOM_AR_US.items():
        for alg in ("one", "two"):
            for kib, us in zip(t["sizes_kib"], t[alg]):
                rows.append({"gpu": gpu, "n": n, "alg": alg, "bytes": kib * 1024, "t": us * 1e-6,
                             "link": CUSTOM_AR_LINK_GBPS[gpu] * 1e9})
    return rows


def custom_ar_terms(r, rate):
    """The physics of vLLM's two kernels: one-shot, one step, each GPU reading the other
    `n - 1` GPUs' whole message; two-shot, two steps (reduce-scatter, all-gather), the ring's
    `2 (n - 1) / n` of it. Returns (steps, seconds of bytes at `rate` bytes/s)."""
    n = r["n"]
    if r["alg"] == "one":
        return 1, (n - 1) * r["bytes"] / rate
    return 2, 2 * (n - 1) / n * r["bytes"] / rate


def custom_ar_fit(rows, kernel_rate, fixed):
    """`t = F + steps x S + bytes / rate` over `rows`, least squares of the relative error.
    The rate is the link's at an efficiency (`kernel_rate` False) or one rate in bytes/s
    whatever the link (True: the kernel's 36 thread blocks, not the link, set it); `fixed`
    False holds F at 0. Returns (F s, S s, efficiency or rate)."""
    def x(r):
        steps, inv = custom_ar_terms(r, 1.0 if kernel_rate else r["link"])
        return ([1.0] if fixed else []) + [steps, inv]
    xs = [[v / r["t"] for v in x(r)] for r in rows]
    k = len(xs[0])
    c = solve([[sum(a[i] * a[j] for a in xs) for j in range(k)] for i in range(k)],
              [sum(a[i] for a in xs) for i in range(k)])
    if not fixed:
        c = [0.0] + c
    return c[0], c[1], 1.0 / c[2]


def custom_ar_time(c, r, kernel_rate):
    fixed, step, rate = c
    steps, seconds = custom_ar_terms(r, rate if kernel_rate else r["link"] * rate)
    return fixed + steps * step + seconds


def code_ring_time(r):
    """Today's TP all-reduce on a hardware file's link: `2 (n - 1)` hops of 1 us and the ring's
    bytes at the bundled `link_efficiency` (0.654), whatever vLLM dispatches."""
    n = r["n"]
    return 2 * (n - 1) * 1e-6 + 2 * (n - 1) / n * r["bytes"] / (r["link"] * 0.654)


CUSTOM_AR_FORMS = (("link rate, F free", False, True), ("link rate, F = 0", False, False),
                   ("kernel rate, F free", True, True), ("kernel rate, F = 0", True, False))


def print_custom_allreduce_held_out():
    """Issue 34 items 1 and 4: vLLM's custom all-reduce priced by its physics, the constants
    derived on one GPU generation's table and checked on the other's, both ways, against the
    code's ring on the same rows (median |error|, signed median, rows)."""
    rows = custom_ar_rows()
    print("vLLM custom all-reduce (one-shot / two-shot, benchmark_device_communicators), derived on one "
          "generation, held out on the other; the code's ring on the same rows")
    for derive, held in (("H100", "B300"), ("B300", "H100")):
        mine = [r for r in rows if r["gpu"] == held]
        ring = [f"{alg}-shot {summary([code_ring_time(r) / r['t'] - 1 for r in mine if r['alg'] == alg])}"
                for alg in ("one", "two")]
        print(f"  derived on {derive}, held out {held}: code's ring {summary([code_ring_time(r) / r['t'] - 1 for r in mine])} "
              f"[{len(mine)}]; " + ", ".join(ring))
        for name, kernel_rate, fixed in CUSTOM_AR_FORMS:
            c = custom_ar_fit([r for r in rows if r["gpu"] == derive], kernel_rate, fixed)
            rate = f"{c[2] / 1e9:.0f} GB/s" if kernel_rate else f"eta {c[2]:.3f}"
            cells = []
            for alg in ("one", "two"):
                part = [r for r in mine if r["alg"] == alg]
                cells.append(f"{alg}-shot {summary([custom_ar_time(c, r, kernel_rate) / r['t'] - 1 for r in part])}")
            pooled = summary([custom_ar_time(c, r, kernel_rate) / r["t"] - 1 for r in mine])
            print(f"    {name:19} (F {c[0] * 1e6:5.1f} us, S {c[1] * 1e6:4.1f} us, {rate}): {pooled}; " + ", ".join(cells))
    for (gpu, n), t in CUSTOM_AR_US.items():
        mine = [r for r in rows if r["gpu"] == gpu and r["n"] == n and r["bytes"] >= 512 << 10]
        for alg in ("one", "two"):
            pts = [(custom_ar_terms(r, 1.0)[1], r["t"]) for r in mine if r["alg"] == alg]
            t0, rate = fit(pts)
            share = rate / (CUSTOM_AR_LINK_GBPS[gpu] * 1e9)
            print(f"  {gpu} {n} GPUs {alg}-shot, 0.5-{t['sizes_kib'][-1] // 1024} MiB alone: "
                  f"{t0 * 1e6:4.1f} us + its bytes at {rate / 1e9:.0f} GB/s ({share:.2f} of the link)")


# ------------------------------------------------- the code's peer-memory all-reduce kernels
# src/latency/collective/peer.rs: vLLM's one-shot and two-shot kernels, torch's multimem and
# two-shot ones, each `rounds x PEER_ROUND_NS + bytes into a GPU / (PEER_LINK_EFFICIENCY x
# link)`, the two constants shared by the four kernels and derived on H100's 4- and 6-GPU
# tables above (vLLM PR #24111). Held out: each world size on the other's constants; H100's
# multimem at 8 GPUs from vLLM PR #42324 (the last SM 9.0 table of its description, read
# without its heading and taken as 8 GPUs: the last of its 2 / 4 / 6 / 8 tables, and NCCL
# overtakes multimem at 64 MiB, SM 9.0's 8-GPU limit), 0.5-128 MiB, us with the copies;
# B300's one-shot and two-shot at 6 GPUs (above).
PEER_KERNELS = {"one": (1, lambda n: n - 1), "two": (2, lambda n: 2 * (n - 1) / n),
                "ts": (2, lambda n: 2 * (n - 1) / n), "mm": (2, lambda n: (n + 1) / n)}
MULTIMEM_8_H100_US = ((0.5, 11), (1, 14), (1.5, 16), (2, 18), (3, 23), (4, 27), (8, 46), (16, 87),
                      (32, 165), (47.84, 244), (64, 320), (128, 631))
# The symmetric-memory communicator's copy in and out, as src/latency/collective/dispatch.rs
# prices them on H100-SXM: each reads and writes the message at 0.9 x 3,350 GB/s, plus 0.5 us.
H100_COPY_BYTES_PER_S = 0.9 * 3350e9
H100_COPY_LAUNCH_S = 0.5e-6


def peer_rows():
    """H100's peer-memory kernel rows: gpu, n, alg, bytes, kernel seconds (the symmetric-memory
    columns less their two copies), link bytes/s."""
    rows = []
    for (gpu, n), t in CUSTOM_AR_US.items():
        if gpu != "H100":
            continue
        for alg in PEER_KERNELS:
            for kib, us in zip(t["sizes_kib"], t.get(alg, ())):
                rows.append({"gpu": gpu, "n": n, "alg": alg, "bytes": kib * 1024,
                             "t": us * 1e-6 - peer_copies(alg, kib * 1024), "link": CUSTOM_AR_LINK_GBPS[gpu] * 1e9})
    return rows


def peer_copies(alg, size):
    """Seconds of the symmetric-memory communicator's two copies of `size` bytes (none for
    vLLM's custom kernel, which reads a registered buffer in a graph)."""
    if alg not in ("mm", "ts"):
        return 0.0
    return 2 * (2 * size / H100_COPY_BYTES_PER_S + H100_COPY_LAUNCH_S)


def peer_time(c, r):
    rounds, share = PEER_KERNELS[r["alg"]]
    return rounds * c[0] + share(r["n"]) * r["bytes"] / (c[1] * r["link"])


def peer_fit(rows):
    """(round seconds, link efficiency): least squares of the relative error of `peer_time`."""
    xs = [[PEER_KERNELS[r["alg"]][0] / r["t"], PEER_KERNELS[r["alg"]][1](r["n"]) * r["bytes"] / r["link"] / r["t"]]
          for r in rows]
    c = solve([[sum(a[i] * a[j] for a in xs) for j in range(2)] for i in range(2)],
              [sum(a[i] for a in xs) for i in range(2)])
    return c[0], 1.0 / c[1]


def peer_constants():
    """The code's PEER_ROUND_NS and PEER_LINK_EFFICIENCY, rounded as it holds them."""
    r, eta = peer_fit(peer_rows())
    return round(r * 1e7) * 100, round(eta, 2)


def print_peer_kernels_held_out():
    rows = peer_rows()
    ring = lambda r: code_ring_time(r)  # noqa: E731
    errors = lambda c, part: summary([peer_time(c, r) / r["t"] - 1 for r in part])  # noqa: E731
    print("the code's peer-memory all-reduce kernels (src/latency/collective/peer.rs): rounds x R + bytes into a "
          "GPU / (eta x link), H100 tables (PR #24111) less the symmetric-memory copies; median |error| (signed)")
    for n in sorted({r["n"] for r in rows}):
        mine, others = [r for r in rows if r["n"] == n], [r for r in rows if r["n"] != n]
        c = peer_fit(others)
        cells = [f"{alg} {errors(c, [r for r in mine if r['alg'] == alg])}" for alg in PEER_KERNELS]
        print(f"  {n} GPUs held out (R {c[0] * 1e6:.1f} us, eta {c[1]:.3f}): {errors(c, mine)} "
              f"[{len(mine)}], the ring {summary([ring(r) / r['t'] - 1 for r in mine])}; " + ", ".join(cells))
    c = peer_fit(rows)
    print(f"  all rows (R {c[0] * 1e6:.2f} us, eta {c[1]:.3f}): {errors(c, rows)} [{len(rows)}], the ring "
          f"{summary([ring(r) / r['t'] - 1 for r in rows])}")
    mm8 = [{"gpu": "H100", "n": 8, "alg": "mm", "bytes": mib * (1 << 20), "link": 450e9,
            "t": us * 1e-6 - peer_copies("mm", mib * (1 << 20))} for mib, us in MULTIMEM_8_H100_US]
    print(f"  held out, H100 multimem at 8 GPUs (PR #42324) [{len(mm8)}]: {errors(c, mm8)}, the ring "
          f"{summary([ring(r) / r['t'] - 1 for r in mm8])}; by size " +
          ", ".join(f"{r['bytes'] / (1 << 20):g} MiB {(peer_time(c, r) / r['t'] - 1) * 100:+.0f}%" for r in mm8))
    b300 = [r for r in custom_ar_rows() if r["gpu"] == "B300"]
    print(f"  held out, B300 at 6 GPUs (PR #37756) [{len(b300)}]: {errors(c, b300)} (one-shot "
          f"{errors(c, [r for r in b300 if r['alg'] == 'one'])}, two-shot {errors(c, [r for r in b300 if r['alg'] == 'two'])}), "
          f"the ring {summary([ring(r) / r['t'] - 1 for r in b300])}")
    ns, eta = peer_constants()
    print(f"  held by the code: PEER_ROUND_NS = {ns}, PEER_LINK_EFFICIENCY = {eta}")


# NCCL's own model of what a ring moves per NVLink link and direction, GB/s (NCCL
# src/graph/topo.h: SM80_NVLINK_BW 20.0, SM90_NVLINK_BW 20.6), and the links per GPU of each
# system (NVLink 3 and 4 links carry 25 GB/s a direction: DGX A100 12, DGX H100 18, one
# 600 GB/s bridge 12). NCCL's ring latency on NVLink, us: base + per step (src/graph/tuning.cc
# baseLat and hwLat[NVLINK][RING]: Simple 8.4 + 3.4, LL128 14.0 + 1.9), the same on every
# architecture.
NCCL_NVLINK_GBPS = {"A100": 20.0, "H100": 20.6}
NCCL_LINKS = {"a100_dgx": 12, "h100_dgx": 18, "a100_pairwise_nvlink": 12, "h100_pairwise_nvlink": 12}
NCCL_RING_LATENCY_US = {"Simple": (8.4, 3.4), "LL128": (14.0, 1.9)}


def allreduce_fits_by_ranks(rows, smallest):
    """Per (system, GPU count): `t = t0 + ring bytes / (eta x link)` over messages of at least
    `smallest` bytes up to 64 MiB; returns {(system, n): (t0 seconds, eta)}."""
    out = {}
    for system, n in sorted({(r["system"], r["n"]) for r in rows}):
        mine = [r for r in rows if r["system"] == system and r["n"] == n and smallest <= r["bytes"] <= 64 << 20]
        t0, rate = fit([(ring_bytes(r), r["t"]) for r in mine])
        out[(system, n)] = (t0, rate / mine[0]["link"])
    return out


def allreduce_transfer_errors(data):
    """The all-reduce row of the leave-one-GPU-out table (rows of at least 1 MiB, each system's
    own small-message time as the fixed part) with the efficiency taken as: the code's (median
    of the other GPU's systems), the held-out system's own (what is left when the efficiency
    transfers perfectly), NCCL's own per-link rate (no fit), and the other GPU's systems at the
    same GPU count, fitted from 16, 8, 4 and 1 MiB."""
    fits = data.fits["all_reduce"]
    ways = {
        "code": lambda r, others: median(fits[s]["eta"] for s in others),
        "own": lambda r, others: fits[r["system"]]["eta"],
        "NCCL per link": lambda r, others: NCCL_LINKS[r["system"]] * NCCL_NVLINK_GBPS[r["gpu"]] * 1e9 / r["link"],
    }
    for mib in (16, 8, 4, 1):
        by_ranks = allreduce_fits_by_ranks(data.all_reduce, mib << 20)
        ways[f"same count {mib}+ MiB"] = lambda r, others, b=by_ranks: median(
            e for (s, n), (_, e) in b.items() if s in others and n == r["n"])
    out = {}
    for gpu in sorted({f["gpu"] for f in fits.values()}):
        others = [s for s in fits if fits[s]["gpu"] != gpu]
        for r in data.all_reduce:
            if r["gpu"] != gpu or r["bytes"] < 1 << 20:
                continue
            for way, eta in ways.items():
                t = fits[r["system"]]["t0"] + ring_bytes(r) / (r["link"] * eta(r, others))
                out.setdefault((way, gpu), []).append(t / r["t"] - 1)
    return out


def print_allreduce_transfer(data):
    print("all-reduce held out by GPU (rows >= 1 MiB, own small-message time), the link efficiency taken as:")
    errors = allreduce_transfer_errors(data)
    for way in dict.fromkeys(w for w, _ in errors):
        cells = [f"{gpu} {summary(e)}" for (w, gpu), e in errors.items() if w == way]
        pooled = [x for (w, _), e in errors.items() if w == way for x in e]
        print(f"  {way:20}: " + ", ".join(cells) + f", pooled {median(abs(x) for x in pooled) * 100:.1f}%")
    wide = allreduce_fits_by_ranks(data.all_reduce, 1 << 20)
    for (system, n), (t0, eta) in allreduce_fits_by_ranks(data.all_reduce, 16 << 20).items():
        t1, eta1 = wide[(system, n)]
        simple, ll128 = ((b + 2 * (n - 1) * s) for b, s in NCCL_RING_LATENCY_US.values())
        print(f"  {system:21} {n} GPUs: eta {eta:.3f} (16-64 MiB) / {eta1:.3f} (1-64 MiB); intercept less events "
              f"{(t0 - tables.EVENT_COST_S) * 1e6:5.1f} / {(t1 - tables.EVENT_COST_S) * 1e6:5.1f} us "
              f"(NCCL's ring latency: Simple {simple:.1f}, LL128 {ll128:.1f} us)")


def summary(errors):
    return f"{median(abs(e) for e in errors) * 100:4.1f}% ({median(errors) * 100:+5.1f})"


def print_tp_prefill_gemms(data, rows=None, gpus=("H100", "A100", "A40"), what=""):
    """Issue 34 part 4: whether the GEMMs of a tensor-parallel prefill (weights split `tp`
    ways, so a quarter as many values per GPU at TP 4) are priced worse than whole ones: the
    held-out GEMM error on H100, A100 and A40 (the GPUs with tables of every shape) by prefill
    tokens (the transition regime's 64-511 and a chunk's 512 up) and weight values per GPU (a Llama-3.1-70B layer's GEMMs hold 67-470 M values at
    TP 1, 17-117 M at TP 4; Llama-3.1-8B's 17-117 M and 4-29 M). `rows`: other GEMM rows than
    the derivation's (`what` names them), held out the same way."""
    print(f"GEMMs of prefill chunks{what}, held out, by weight values per GPU: median signed error (rows)")
    for gpu in gpus:
        c = data.constants([g for g in GPUS if g != gpu])
        for lo_m, hi_m in ((64, 129), (129, 512), (512, 2048), (2048, 1 << 30)):
            cells = []
            for lo, hi in ((0, 4), (4, 16), (16, 64), (64, 1 << 20)):
                e = [gemm_time(c, r) / r["t"] - 1 for r in (data.gemms if rows is None else rows)
                     if r["gpu"] == gpu and not r["fp8"] and lo_m <= r["M"] < hi_m
                     and lo * 1e6 <= r["K"] * r["N"] < hi * 1e6]
                cells.append(f"{lo}-{hi if hi < 1 << 20 else ''} M {median(e) * 100:+5.1f}% ({len(e)})" if e else "")
            tokens = f"{lo_m}-{hi_m - 1}" if hi_m < 1 << 30 else f">={lo_m}"
            print(f"  {gpu} {tokens:>9} tokens: " + ", ".join(cells))


def print_transition_gemms(data):
    """Issue 34 part 4: where H100's prefill-sized GEMMs lose the time the roofline misses.
    Held out, the GEMMs of more than 128 tokens whose MMA work outlasts their weight stream,
    by waves of 128 x 128 output tiles over the SMs (tile and wave quantization would make
    the error largest below one wave and fall as waves grow) and by K (a longer K loop of the
    same tiles). A model by waves would transfer only if the error followed the waves on
    every GPU."""
    print("compute-bound GEMMs of > 128 tokens, held out: median signed error by waves of 128x128 tiles, then by K")
    waves = ((0, 1), (1, 2), (2, 4), (4, 8), (8, 1 << 30))
    depths = ((0, 2048), (2048, 4096), (4096, 8192), (8192, 1 << 30))
    for gpu in ("H100", "A100", "A40", "RTXPRO6000", "A800"):
        c = data.constants([g for g in GPUS if g != gpu])
        g = GPUS[gpu]
        rows = []
        for r in data.gemms:
            if r["gpu"] != gpu or r["fp8"] or r["M"] <= 128:
                continue
            compute = 2 * r["M"] * r["K"] * r["N"] / (g["flops"] * c["gemm_eta_c"])
            eta_m = gemm_eta_m(c, gpu)
            if compute > gemm_bytes(r) / (g["bw"] * eta_m):
                w = math.ceil(r["M"] / 128) * math.ceil(r["N"] / 128) / g["sms"]
                rows.append((w, r["K"], gemm_time(c, r) / r["t"] - 1))

        def cells(key, bounds, unit):
            out = []
            for lo, hi in bounds:
                e = [x[2] for x in rows if lo <= x[key] < hi]
                label = f"{lo}-{hi}" if hi < 1 << 30 else f">={lo}"
                out.append(f"{label}{unit} {median(e) * 100:+5.1f}% ({len(e)})" if e else "")
            return ", ".join(x for x in out if x)
        print(f"  {gpu:10} waves {cells(0, waves, '')}")
        print(f"  {'':10} K     {cells(1, depths, '')}")


def print_transition_gemm_misses(data):
    """Issue 34 part 4: the transition regime's miss in microseconds, not per cent. A miss that
    stays the same few microseconds from the smallest to the largest weights is a time added
    to every GEMM (an extra kernel or a gap in how the table was timed), not an efficiency; one
    that grows with the kernel is an efficiency."""
    print("GEMMs of prefill chunks, held out, by weight values per GPU: median kernel time, median "
          "measured - priced (signed error, rows)")
    for gpu in ("H100", "A100", "A40"):
        c = data.constants([g for g in GPUS if g != gpu])
        for lo_m, hi_m in ((129, 512), (512, 1025)):
            cells = []
            for lo, hi in ((0, 4), (4, 16), (16, 64), (64, 1 << 20)):
                rows = [r for r in data.gemms if r["gpu"] == gpu and not r["fp8"]
                        and lo_m <= r["M"] < hi_m and lo * 1e6 <= r["K"] * r["N"] < hi * 1e6]
                if not rows:
                    continue
                t = median(r["t"] for r in rows) * 1e6
                miss = median(r["t"] - gemm_time(c, r) for r in rows) * 1e6
                e = median(gemm_time(c, r) / r["t"] - 1 for r in rows) * 100
                label = f"{lo}-{hi if hi < 1 << 20 else ''} M"
                cells.append(f"{label} {t:.0f} us, {miss:+.1f} us ({e:+.1f}%, {len(rows)})")
            print(f"  {gpu} {lo_m}-{hi_m - 1} tokens: " + ", ".join(cells))


# ------------------------------------------------------------------------------ leave one out

FAMILIES = ["GEMM M<=16", "GEMM 17-128", "GEMM 129-1024", "GEMM >1024", "GEMM FP8",
            "prefill attn", "decode attn", "mixed attn", "fused MoE", "MoE expert loop", "norms/elementwise",
            "all-reduce"]


class Data:
    def __init__(self):
        t = tables.Tables(DATA, MEASURED_H200)
        self.tables = t
        self.gemms = tables.gemms(t, "--frontier-shapes" in sys.argv)
        self.attention = tables.attention(t)
        self.moe = tables.moe(t)
        self.elementwise = tables.elementwise(t)
        self.all_reduce = tables.all_reduce(t)
        self.mixed_extras = {(gpu, model): tables.mixed_extras(t, gpu, model)
                             for gpu, model, _, _ in tables.MIXED_SOURCES}
        self.fits = {
            "gemm": gemm_fits(self.gemms),
            "attention": attention_fits(self.attention),
            "moe": moe_fits(self.moe),
            "elementwise": elementwise_fits(self.elementwise),
            "all_reduce": allreduce_fits(self.all_reduce),
        }
        self.mixed = {(gpu, model): tables.mixed_decode_grid(t, gpu, model, kv, q)
                      for gpu, model, kv, q in tables.MIXED_SOURCES}
        self.fits["mixed_block"] = mixed_block_fits(self.mixed_extras, self.fits["attention"])

    def constants(self, gpus):
        f = self.fits
        c = {}
        c.update(gemm_constants(f["gemm"], gpus))
        c.update(attention_constants(f["attention"], gpus))
        c.update(moe_constants(f["moe"], gpus))
        c.update(elementwise_constants(f["elementwise"], gpus))
        c.update(allreduce_constants(f["all_reduce"], gpus))
        c["mixed_block_clocks"] = median(f["mixed_block"][g] for g in gpus if g in f["mixed_block"])
        c["mixed"] = mixed_table([grid for (gpu, _), grid in self.mixed.items() if gpu in gpus])
        return c

    def errors(self, gpu, c):
        """Relative errors of the roofline with constants `c` on `gpu`'s tables, by family."""
        out = {f: [] for f in FAMILIES}
        for r in self.gemms:
            if r["gpu"] == gpu:
                out["GEMM FP8" if r["fp8"] else gemm_regime(r)].append(gemm_time(c, r) / r["t"] - 1)
        for r in self.attention:
            if r["gpu"] == gpu:
                out[r["kind"] + " attn"].append(attention_time(c, r) / r["t"] - 1)
        for r in self.moe:
            if r["gpu"] == gpu and fused(r):
                out["fused MoE"].append(moe_time(c, r) / r["t"] - 1)
            elif r["gpu"] == gpu:
                out["MoE expert loop"].append(loop_time(c, r) / r["t"] - 1)
        for r in self.elementwise:
            if r["gpu"] == gpu:
                out["norms/elementwise"].append(row_kernel_time(c, r) / r["t"] - 1)
        for r in self.all_reduce:
            if r["gpu"] == gpu and r["bytes"] >= 1 << 20:
                small = self.fits["all_reduce"][r["system"]]["t0"]
                out["all-reduce"].append(allreduce_time(c, r, small) / r["t"] - 1)
        for g, model, kv_heads, q_heads in tables.MIXED_SOURCES if not MIXED_TABLE else []:
            if g == gpu:
                # The decodes' extra time in a mixed batch, priced by the varlen kernel's grid.
                out["mixed attn"] += mixed_kernel_errors(c, gpu, q_heads, kv_heads, self.mixed_extras[(g, model)])
        for (g, _), grid in self.mixed.items() if MIXED_TABLE else []:
            if g == gpu and c["mixed"]:
                # The decodes' extra time in a mixed batch, predicted from the other GPUs' table.
                out["mixed attn"] += [grid[cell] / c["mixed"][cell] - 1 for cell in grid if cell in c["mixed"]]
        return out


def mixed_table(grids):
    cells = set().union(*grids) if grids else set()
    return {cell: median(g[cell] for g in grids if cell in g) for cell in cells}


def leave_one_out(data):
    """Held-out errors by GPU and family, and the constants derived without each GPU."""
    everyone = list(GPUS)
    table = {}
    for gpu in everyone:
        c = data.constants([g for g in everyone if g != gpu])
        table[gpu] = data.errors(gpu, c)
    return table


def moe_tables(data):
    """The fused-MoE tables: (GPU, model) -> their rows."""
    out = {}
    for r in filter(fused, data.moe):
        out.setdefault((r["gpu"], r["model"]), []).append(r)
    return out


def moe_held_out(data):
    """Per MoE table: (rows, errors with every other GPU's constants, errors with the
    constants of every other table, its own GPU's other tables included)."""
    out = {}
    everyone = list(GPUS)
    for (gpu, model), rows in sorted(moe_tables(data).items()):
        other_gpus = moe_constants(data.fits["moe"], [g for g in everyone if g != gpu])
        others = [r for r in filter(fused, data.moe) if (r["gpu"], r["model"]) != (gpu, model)]
        other_tables = moe_constants(moe_fits(others), everyone)
        out[(gpu, model)] = (len(rows), [moe_time(other_gpus, r) / r["t"] - 1 for r in rows],
                             [moe_time(other_tables, r) / r["t"] - 1 for r in rows])
    return out


def print_moe_held_out(held):
    """Held-out fused-MoE error per table: leave one GPU out, leave one table out."""
    def cell(e):
        return f"{median(abs(x) for x in e) * 100:5.1f}% ({median(e) * 100:+6.1f})"
    print("fused MoE per table: median |error| (signed median) with the constants of the other GPUs, and with")
    print("those of the other tables (its own GPU's other tables included)")
    print(f"{'table':60} | {'rows':>5} | {'GPU held out':>16} | {'table held out':>16}")
    gpu_medians, table_medians = [], []
    for (gpu, model), (n, by_gpu, by_table) in held.items():
        print(f"{gpu + ' ' + model:60} | {n:5} | {cell(by_gpu)} | {cell(by_table)}")
        gpu_medians.append(median(abs(x) for x in by_gpu))
        table_medians.append(median(abs(x) for x in by_table))
    print(f"  median over tables of their held-out median |error|: GPU held out {median(gpu_medians) * 100:.1f}%, "
          f"table held out {median(table_medians) * 100:.1f}%")


def print_moe_same_tiles(data):
    """`--vllm019-default-tiles`: LLMServingSim's rows (vLLM 0.19) whose grouped GEMMs run the
    same tile and the same tile rows per expert hit, so the same weights, grid and MMA work, at
    the fewest and the most routed rows: the measured time against the price with RTX PRO
    6000's own fit. What the price adds is the routed rows' activations alone."""
    f = data.fits["moe"]["RTXPRO6000"]
    c = {"moe_t0": f["t0"], "moe_eta_m": f["eta_m"], "moe_eta_c": f["eta_c"], "moe_unhidden": f["unhidden"],
         "moe_latency": f["latency"], "moe_large_tile": f["large_tile"], "moe_idle_clocks": f["idle"]}
    same = {}
    for r in (r for r in data.moe if r["src"] == "lss"):
        block_m, block_n = moe_tile(r)[:2]
        rows = math.ceil(r["routed"] / r["active"] / block_m - 1e-9)
        same.setdefault((r["active"], block_m, block_n, rows), []).append(r)
    print("fused MoE, LLMServingSim's RTX PRO 6000 rows on vLLM 0.19's tiles with the same tiles and MMA work:")
    print("experts hit, tile, tile rows each: tokens, routed rows per expert hit, us measured, us priced (own fit)")
    for (active, block_m, block_n, rows), group in sorted(same.items()):
        if len(group) < 2:
            continue
        a, b = min(group, key=lambda r: r["n"]), max(group, key=lambda r: r["n"])
        ta, tb, pa, pb = (x * 1e6 for x in (a["t"], b["t"], moe_time(c, a), moe_time(c, b)))
        print(f"  {active:3.0f}, {block_m}x{block_n}, {rows}: {a['n']}->{b['n']}, "
              f"{a['routed'] / active:.0f}->{b['routed'] / active:.0f}, "
              f"{ta:.0f}->{tb:.0f} ({tb - ta:+.0f}), {pa:.0f}->{pb:.0f} ({pb - pa:+.0f})")


def print_loo(table):
    """The held-out table: a row per op family, a column per GPU; each cell the median
    |error| and, in brackets, the signed median (rows of the cell below)."""
    gpus = list(table)
    print("leave-one-GPU-out: median |error| (signed median) of the roofline's kernel times on the held-out")
    print("GPU's tables, every constant derived from the other GPUs; then the rows per cell")
    print(f"{'family':18}" + "".join(f" | {g:>15}" for g in gpus) + " | all rows")
    worst = (0.0, None, None)
    pooled = {}
    for f in FAMILIES:
        cells, counts, rows = "", "", []
        for gpu in gpus:
            e = table[gpu][f]
            rows += e
            if not e:
                cells += f" | {'':>15}"
                counts += f" | {'':>15}"
                continue
            med = median(abs(x) for x in e)
            if med > worst[0]:
                worst = (med, gpu, f)
            cells += f" | {med * 100:5.1f}% ({median(e) * 100:+5.1f})"
            counts += f" | {len(e):>15}"
        pooled[f] = rows
        print(f"{f:18}{cells} | {median(abs(x) for x in rows) * 100:5.1f}%" if rows else f"{f:18}{cells} |")
        print(f"{'':18}{counts} | {len(rows)}")
    for name, members in (("GEMM (BF16)", [f for f in FAMILIES if f.startswith("GEMM") and f != "GEMM FP8"]),
                          ("attention", ["prefill attn", "decode attn", "mixed attn"])):
        e = [x for f in members for x in pooled[f]]
        print(f"  {name}: median held-out |error| over {len(e)} rows: {median(abs(x) for x in e) * 100:.1f}%")
    print(f"  worst cell: {worst[1]}, {worst[2]}: {worst[0] * 100:.1f}%")


def print_fits(data):
    f = data.fits
    print("per-GPU fits (what each GPU's own tables say):")
    for gpu, g in f["gemm"].items():
        extra = f", compute eta {g['eta_c']:.2f}, unhidden {g['unhidden']:.2f}" if "eta_c" in g else ""
        print(f"  GEMM       {gpu:11} {g['n']:6} rows: t0 {g['t0'] * 1e6:5.2f} us, weight eta {g['eta_m']:.3f}{extra}")
    for gpu, g in f["attention"].items():
        for kind in ("decode", "prefill"):
            if kind in g:
                t0, eta = g[kind]
                if kind == "prefill" and fa2(gpu):
                    share = prefill_efficiency({"prefill_score_clocks": eta}, gpu, 128)
                    print(f"  attention  {gpu:11} {kind:8}: t0 {t0 * 1e6:5.1f} us, MMA at peak + {eta:.3f} SM clocks "
                          f"per score (FA2; {share:.3f} of peak FLOP/s in waves at head dim 128)")
                    continue
                unit = "of peak bandwidth" if kind == "decode" else "of peak FLOP/s in waves"
                print(f"  attention  {gpu:11} {kind:8}: t0 {t0 * 1e6:5.1f} us, {eta:.3f} {unit}")
        if "decode_kernels" in g:
            k = g["decode_kernels"]
            clocks = ", ".join(f"{name[7:-7]} {k[name]:.0f}" for name in DECODE_CONSTANTS[:4] if name in k)
            print(f"  attention  {gpu:11} decode kernels (SM clocks): {clocks}; KV at {k['decode_eta']:.3f} of peak bandwidth")
    for gpu, g in f["moe"].items():
        extra = f", compute eta {g['eta_c']:.2f}, unhidden {g['unhidden']:.2f}" if "eta_c" in g else ""
        block = (f", blocks saturate at a {g['latency']:.0f}-clock latency "
                 f"({moe_saturating_blocks(gpu, g['latency']) / GPUS[gpu]['sms']:.2f} per SM)"
                 if g["latency"] else ", blocks never limit")
        if g["idle"]:
            block += f", {g['idle']:.0f} SM clocks per idle block"
        if g["large_tile"] is not None and g["large_tile"] < 1.0:
            block += f", large tile at {g['large_tile']:.2f} of the rate"
        elif g["large_tile"] is not None:
            block += f", large tile at most {g['large_tile']:.1f} bytes per SM per clock"
        print(f"  fused MoE  {gpu:11} {g['n']:6} rows: t0 {g['t0'] * 1e6:5.1f} us, weight eta {g['eta_m']:.3f}{block}{extra}")
    for gpu, g in f["elementwise"].items():
        l2 = f", L2 at {g['l2_dram']:.2f} x DRAM ({g['l2']:.2f} bytes per SM per clock)" if g["l2"] else ""
        rates = ", ".join(f"{name} {rate:.1f}" for name, rate in (("scalar", g["row_scalar"]), ("vectorised", g["row_vector"]))
                          if rate is not None)
        print(f"  rows       {gpu:11} one-token RMSNorm {g['floor'] * 1e6:.2f} us; row kernel {g['row_fixed']:.0f} clocks "
              f"+ row bytes per clock ({rates}){l2}")
    for system, g in sorted(f["all_reduce"].items()):
        floors = ", ".join(f"{n} GPUs {t * 1e6:.1f}" for n, t in g["floors"].items())
        print(f"  all-reduce {system:21}: <= 64 KiB {g['t0'] * 1e6:5.1f} us (event-timed eager op), link eta {g['eta']:.3f}, "
              f"1-64 MiB floor (us) {floors}")
    for reason, n in data.tables.left_out.items():
        print(f"  left out: {reason} ({n} rows)")


def print_gemm_rows(data, gpu):
    """Every GEMM row of `gpu` with the held-out roofline's time and error, one line each
    (comma-separated), sorted by table, op, TP and tokens."""
    if gpu not in GPUS:
        sys.exit(f"--gemm-rows={gpu}: no such GPU (one of {', '.join(GPUS)})")
    c = data.constants([g for g in GPUS if g != gpu])
    print(f"GEMM rows of {gpu}, held out: model,op,tp,fp8,M,K,N,weight MB,measured us,priced us,error %")
    for r in sorted((r for r in data.gemms if r["gpu"] == gpu),
                    key=lambda r: (r["model"], r["op"], r["tp"], r["M"], r["K"], r["N"])):
        t = gemm_time(c, r)
        weight = r["K"] * r["N"] * (1 if r["fp8"] else 2) / 1e6
        print(f"{r['model']},{r['op']},{r['tp']},{int(r['fp8'])},{r['M']},{r['K']},{r['N']},{weight:.1f},"
              f"{r['t'] * 1e6:.2f},{t * 1e6:.2f},{(t / r['t'] - 1) * 100:+.1f}")


# ------------------------------------------------------------- a GEMM's fixed time, by part

# What each GPU's memory is (datasheets, as in `hardware/*.toml`): HBM on the data-centre parts
# (A100 and A800 HBM2e, H100 and H800 HBM3, H200 HBM3e), GDDR on the others (A40 GDDR6, RTX
# 4090 GDDR6X, RTX PRO 6000 GDDR7). A candidate of `--gemm-fixed` only; the code reads no such
# field.
MEMORY_TYPE = {"A100": "HBM2e", "A800": "HBM2e", "A40": "GDDR6", "H100": "HBM3", "H800": "HBM3",
               "H200": "HBM3e", "RTX4090": "GDDR6X", "RTXPRO6000": "GDDR7"}
# How each GPU's GEMM rows were timed (roofline_tables.gemms).
GEMM_TIMING = {"H200": "graph replay between events (ours)", "RTX4090": "kernel-only (LLMServingSim)",
               "RTXPRO6000": "kernel-only (LLMServingSim, Frontier)"}


def small_gemms(data, gpu):
    return [r for r in data.gemms if r["gpu"] == gpu and not r["fp8"] and r["M"] <= 16]


def fixed_at(rows, rate):
    """The fixed time `t0` of `t = t0 + bytes / rate` over `rows` with the rate given (least
    squares of the relative error)."""
    w = [1.0 / (r["t"] * r["t"]) for r in rows]
    return sum(wi * (r["t"] - gemm_bytes(r) / rate) for wi, r in zip(w, rows)) / sum(w)


def split_k(r):
    """A GEMM cuBLAS runs split-K at few tokens: a reduction depth over twice its outputs."""
    return r["K"] > 2 * r["N"]


def fixed_time_forms(data, gpus):
    """Candidate fixed times of a GEMM of `gpu`, each derived from the per-GPU fits of `gpus`:
    name -> function (gpu, row) -> seconds."""
    fits = data.fits["gemm"]
    have = [g for g in gpus if g in fits]
    c = gemm_constants(fits, have)
    const = c["gemm_t0"]
    clocks = median(fits[g]["t0"] * part(g)["clock"] for g in have)
    a, b = theil_sen([(stream_share(g), fits[g]["t0"]) for g in have])
    hbm = median(fits[g]["t0"] for g in have if MEMORY_TYPE[g].startswith("HBM"))
    gddr = median(fits[g]["t0"] for g in have if MEMORY_TYPE[g].startswith("GDDR"))
    split = {}
    for g in have:
        rows = small_gemms(data, g)
        eta = gemm_eta_m(c, g)
        deep = [r for r in rows if split_k(r)]
        if len(deep) >= 3 and len(rows) - len(deep) >= 3:
            rate = part(g)["bw"] * eta
            split[g] = (fixed_at([r for r in rows if not split_k(r)], rate), fixed_at(deep, rate))
    base = median(s[0] for s in split.values())
    extra = median(s[1] - s[0] for s in split.values())
    own = {}
    for g in have:
        rows = small_gemms(data, g)
        rate = part(g)["bw"] * fits[g]["eta_m"]
        shallow = [r for r in rows if not split_k(r)]
        deep = [r for r in rows if split_k(r)]
        own[g] = (fixed_at(shallow, rate), fixed_at(deep, rate) - fixed_at(shallow, rate) if len(deep) >= 3 else None)
    a2, b2 = theil_sen([(stream_share(g), own[g][0]) for g in have])
    r2 = median(own[g][1] for g in have if own[g][1] is not None)
    return {
        f"one fixed time (before), {const * 1e6:.2f} us": lambda gpu, r: const,
        f"fixed SM clocks, {clocks:.0f}": lambda gpu, r: clocks / part(gpu)["clock"],
        f"{a * 1e6:.2f} us + {b * 1e6:.3f} us per byte per SM per clock (the code's)": lambda gpu, r: a + b * stream_share(gpu),
        f"by memory, HBM {hbm * 1e6:.2f} / GDDR {gddr * 1e6:.2f} us":
            lambda gpu, r: hbm if MEMORY_TYPE[gpu].startswith("HBM") else gddr,
        f"split-K, {base * 1e6:.2f} us + {extra * 1e6:.2f} where K > 2N": lambda gpu, r: base + (extra if split_k(r) else 0.0),
        f"{a2 * 1e6:.2f} us + {b2 * 1e6:.3f} us per byte per SM per clock, + {r2 * 1e6:.2f} where K > 2N":
            lambda gpu, r: a2 + b2 * stream_share(gpu) + (r2 if split_k(r) else 0.0),
    }


def print_gemm_fixed(data):
    """A GEMM's fixed time by part: what each GPU's GEMMs of at most 16 tokens say, beside the
    hardware quantities a fixed time could follow, and the held-out error of GEMMs of up to 128
    tokens with each candidate form of it derived from the other GPUs."""
    fits = data.fits["gemm"]
    c = gemm_constants(fits, list(GPUS))
    print("a GEMM's fixed time by part (GEMMs of <= 16 tokens): own fit; at its class's weight eta; in SM clocks;")
    print("bytes per SM per clock at the datasheet bandwidth; memory; how the rows were timed")
    for gpu, f in fits.items():
        rows = small_gemms(data, gpu)
        eta = gemm_eta_m(c, gpu)
        at = fixed_at(rows, part(gpu)["bw"] * eta)
        deep = [r for r in rows if split_k(r)]
        split = ""
        if len(deep) >= 3 and len(rows) - len(deep) >= 3:
            rate = part(gpu)["bw"] * eta
            split = f"; K > 2N {fixed_at(deep, rate) * 1e6:5.2f} vs {fixed_at([r for r in rows if not split_k(r)], rate) * 1e6:5.2f} us"
        print(f"  {gpu:11} {len(rows):4} rows: {f['t0'] * 1e6:5.2f} us at {f['eta_m']:.3f}; {at * 1e6:5.2f} us at {eta:.3f}; "
              f"{f['t0'] * part(gpu)['clock']:6.0f} clocks; {stream_share(gpu):5.1f} B/SM/clk; {MEMORY_TYPE[gpu]:6}; "
              f"{GEMM_TIMING.get(gpu, 'kernel-only (Frontier)')}{split}")
    print("held out, GEMMs of <= 16 and 17-128 tokens: median |error| (signed median), each form derived without the GPU")
    everyone = list(GPUS)
    names = list(fixed_time_forms(data, everyone))
    pooled = {n: {"M<=16": [], "17-128": []} for n in names}
    for gpu in everyone:
        others = [g for g in everyone if g != gpu]
        c = gemm_constants(data.fits["gemm"], others)
        for name, form in zip(names, fixed_time_forms(data, others).values()):
            for r in data.gemms:
                if r["gpu"] == gpu and not r["fp8"] and r["M"] <= 128:
                    fixed = {"gemm_t0": form(gpu, r), "gemm_fixed_slope": None}
                    e = gemm_time({k: v for k, v in dict(c, **fixed).items() if v is not None}, r) / r["t"] - 1
                    pooled[name]["M<=16" if r["M"] <= 16 else "17-128"].append((gpu, e))
    for name in names:
        print(f"  {name} (derived from all eight)")
        for regime, errors in pooled[name].items():
            cells = []
            for gpu in everyone:
                e = [x for g, x in errors if g == gpu]
                if e:
                    cells.append(f"{gpu} {median(abs(x) for x in e) * 100:4.1f}% ({median(e) * 100:+5.1f})")
            print(f"    {regime:7} pooled {median(abs(x) for _, x in errors) * 100:4.1f}%: {', '.join(cells)}")


def v0_root():
    """The directory `--llmservingsim-v0=DIR` names, or None."""
    for arg in sys.argv[1:]:
        if arg.startswith("--llmservingsim-v0="):
            return arg.split("=", 1)[1]
    return None


def regime_cell(e):
    return f"{median(abs(x) for x in e) * 100:5.1f}% ({median(e) * 100:+5.1f}) [{len(e):4}]" if e else " " * 21


def print_v0_gemms(data, rows):
    """The roofline's held-out error on LLMServingSim's v0 GEMM rows (`--llmservingsim-v0`):
    every row priced with the constants derived without its GPU (all of them for A6000 and RTX
    3090, which no table here derives from), by the held-out table's regimes, per GPU, per
    model and TP, and per op; H100's Frontier rows, held out the same way, beside them."""
    regimes = FAMILIES[:4]
    held = {}
    for r in rows:
        if r["gpu"] not in held:
            held[r["gpu"]] = data.constants([g for g in GPUS if g != r["gpu"]])
    errs = [(r, gemm_time(held[r["gpu"]], r) / r["t"] - 1) for r in rows]

    def line(label, keep):
        cells = [[e for r, e in errs if keep(r) and gemm_regime(r) == f] for f in regimes]
        every = [x for c in cells for x in c]
        print(f"  {label:44}" + "".join(f" | {regime_cell(c)}" for c in cells) + f" | {regime_cell(every)}")
    print("LLMServingSim v0 GEMM rows, held out: median |error| (signed median) [rows] by regime")
    print(f"  {'rows':44}" + "".join(f" | {f:>21}" for f in regimes) + f" | {'all':>21}")
    if "H100" in held:
        frontier = data.errors("H100", held["H100"])
        print(f"  {'H100 (Frontier tables, for comparison)':44}" + "".join(f" | {regime_cell(frontier[f])}" for f in regimes))
    for gpu in sorted(held):
        line(gpu, lambda r: r["gpu"] == gpu)
    for gpu, model, tp in sorted({(r["gpu"], r["model"], r["tp"]) for r in rows}):
        line(f"{gpu} {model.split('/')[-1]} TP {tp}", lambda r: (r["gpu"], r["model"], r["tp"]) == (gpu, model, tp))
    for gpu, op in sorted({(r["gpu"], r["op"]) for r in rows}):
        line(f"{gpu} {op}", lambda r: (r["gpu"], r["op"]) == (gpu, op))
    print("  each GPU's own fit to its v0 rows (as the derivation fits a GPU; not used for any constant):")
    for gpu, f in gemm_fits(rows, sorted(held)).items():
        print(f"    {gpu:8}: t0 {f['t0'] * 1e6:5.2f} us, weight eta {f['eta_m']:.3f}, compute eta {f['eta_c']:.2f}, "
              f"unhidden {f['unhidden']:.2f}")


def tile_waves(r, sms, tile_m=128, tile_n=256):
    """Waves of `tile_m` x `tile_n` output tiles over `sms` SMs, one tile per SM at a time."""
    return math.ceil(math.ceil(r["M"] / tile_m) * math.ceil(r["N"] / tile_n) / sms)


def print_v0_pairs(data, rows):
    """H100's GEMMs of one shape (M, K, N) in both Frontier's tables and LLMServingSim's v0
    tables: the median ratio of their times by regime, then, per shape, the share of the dense
    peak each table reaches at 448-640 tokens, where a grid of 128 x 256 tiles over H100's
    132 SMs goes from one wave to two (at N 8,192 between 512 and 520 tokens: a kernel that
    runs its tiles in whole waves takes about twice as long at 520 as at 512)."""
    theirs = {(r["M"], r["K"], r["N"]): r["t"] for r in data.gemms if r["gpu"] == "H100" and not r["fp8"]}
    pairs = [(r, theirs[(r["M"], r["K"], r["N"])]) for r in rows
             if r["gpu"] == "H100" and (r["M"], r["K"], r["N"]) in theirs]
    if not pairs:
        return
    print("H100 GEMMs of the same shape in Frontier's tables and the v0 tables: median time ratio Frontier / v0 (shapes)")
    print("  " + ", ".join(f"{f} {median(t / r['t'] for r, t in pairs if gemm_regime(r) == f):.3f} "
                           f"({sum(1 for r, _ in pairs if gemm_regime(r) == f)})" for f in FAMILIES[:4]))
    print("  share of the dense peak, Frontier / v0, by tokens (waves of 128 x 256 tiles on 132 SMs)")
    sms, peak = GPUS["H100"]["sms"], GPUS["H100"]["flops"]
    for k, n in sorted({(r["K"], r["N"]) for r, _ in pairs}):
        cells = []
        for r, t in sorted(((r, t) for r, t in pairs if (r["K"], r["N"]) == (k, n) and r["M"] in (448, 512, 520, 576, 640)),
                           key=lambda x: x[0]["M"]):
            flops = 2 * r["M"] * r["K"] * r["N"] / peak
            cells.append(f"{r['M']}: {flops / t:.2f} / {flops / r['t']:.2f} ({tile_waves(r, sms)})")
        if len({c.split(":")[0] for c in cells}) == len(cells) and cells:
            print(f"    K {k:5} N {n:5}: " + ", ".join(cells))


# The op families of LLMServingSim's v0 tables (`--llmservingsim-v0`), their scopes, and whether
# the kernels v0 timed are the ones vLLM runs: v0 runs Hugging Face's eager modules, where an
# RMSNorm is eight unfused elementwise kernels (to FP32, pow, mean, add, rsqrt, mul, to FP16, the
# weight's mul), rotary about a dozen (Q and K each: two muls, `rotate_half`'s slices, negation
# and concatenation, an add) and the activation two (SiLU, then the mul); vLLM runs one fused
# kernel for each, as the roofline prices them. The router's `gate` scope (softmax, top-k and
# more) and the MoE layer are left to the fused-MoE model.
V0_FAMILIES = {
    "embedding": (("embedding",), True),
    "norms": (("input_layernorm", "post_layernorm", "final_layernorm"), False),
    "q/k/v proj": (("q_proj", "k_proj", "v_proj"), True),
    "rope": (("rope",), False),
    "o_proj": (("o_proj",), True),
    "gate/up proj": (("gate_proj", "up_proj"), True),
    "act_fn": (("act_fn",), False),
    "down_proj": (("down_proj",), True),
    "expert GEMMs": (("expert.w1", "expert.w3", "expert.w2"), True),
    "lm_head": (("lm_head",), True),
}
V0_FAMILY = {op: fam for fam, (ops, _) in V0_FAMILIES.items() for op in ops}
# The shapes the blind runs' steps see: decode batches at KV tokens per sequence, prefill chunks
# from an empty cache (v0's attention.csv times chunks of at most 1,024).
V0_DECODE_BATCHES = (1, 4, 16, 64)
V0_DECODE_KV = (256, 512, 1024, 2048)
V0_PREFILLS = (128, 256, 512, 1024)
# Decoder layers of the v0 models (their Hugging Face configs' `num_hidden_layers`).
V0_NUM_LAYERS = {"meta-llama/Llama-3.1-8B": 32, "meta-llama/Llama-3.1-70B": 80,
                 "mistralai/Mixtral-8x7B-v0.1": 32, "microsoft/Phi-mini-MoE-instruct": 32}


def v0_model(model, tp):
    """(hidden, query heads, KV heads, head dim, MLP width, expert width) on one GPU at `tp`."""
    h, nh, nkv, hd, ffn, _, expert = tables.V0_MODELS[model]
    return h, nh // tp, max(nkv // tp, 1), hd, ffn // tp, expert


def v0_op_time(c, gpu, model, tp, op, m):
    """The roofline's price of scope `op` of a v0 table at `m` tokens as vLLM runs it (the
    code's constants `c`): a gather of the embedding rows (an elementwise kernel), the norms as
    fused add + RMSNorm, rotary and SiLU-and-mul as row kernels (src/latency/roofline/rows.rs),
    the linear layers as GEMMs; None for a scope it does not price alone."""
    h, q, kvh, hd, ffn, expert = v0_model(model, tp)
    row = {"gpu": gpu, "tokens": m, "h": h, "vllm": "0.19"}
    if op == "embedding":
        return max(c["floor"], 2 * m * h * 2 / (part(gpu)["bw"] * ELEMENTWISE_EFFICIENCY) + LAUNCH_S)
    if V0_FAMILY.get(op) == "norms":
        return row_kernel_time(c, dict(row, op="post_attention_layernorm"))
    if op == "rope":
        return row_kernel_time(c, dict(row, op="rotary", q=q * hd, k=kvh * hd, rot=hd))
    if op == "act_fn":
        return row_kernel_time(c, dict(row, op="act_fn", ffn=ffn or expert))
    shapes = tables.v0_shapes(model, tp)
    if op in shapes:
        k, n = shapes[op]
        return gemm_time(c, {"gpu": gpu, "M": m, "K": k, "N": n, "fp8": False})
    return None


def v0_unfused_kernels(model, tp, op, m):
    """Bytes of each kernel Hugging Face's eager modules launch for scope `op` at `m` tokens
    in v0's FP16 layer (None for a scope of one fused kernel or a GEMM): an RMSNorm's eight
    (the cast to FP32, pow, mean, the epsilon's add and rsqrt per row, the mul, the cast back,
    the weight's mul), Phi-mini-MoE's LayerNorm one (`nn.LayerNorm`: read, write, weight and
    bias); the activation's SiLU of the gate and its mul by the up projection; rotary's five
    per Q and K tensor (`x * cos`, `rotate_half`'s negation of one half and concatenation,
    `* sin`, the add)."""
    h, q, kvh, hd, ffn, expert = v0_model(model, tp)
    e = m * h
    if V0_FAMILY.get(op) == "norms":
        if model.startswith("microsoft/Phi"):
            return [(2 * e + 2 * h) * 2]
        return [6 * e, 8 * e, 4 * e + 4 * m, 8 * m, 8 * m, 8 * e + 4 * m, 6 * e, 4 * e + 2 * h]
    if op == "act_fn":
        width = m * (ffn or expert)
        return [4 * width, 6 * width]
    if op == "rope":
        trig = m * hd * 2
        return [b for x in (m * q * hd, m * kvh * hd) for b in (4 * x + trig, 2 * x, 4 * x, 4 * x + trig, 6 * x)]
    return None


def v0_unfused_time(c, gpu, model, tp, op, m):
    """The roofline's price of v0's unfused kernels of `op` (`v0_unfused_kernels`), each an
    elementwise kernel at the memory efficiency of the hardware files with the least time of a
    kernel (src/latency/roofline.rs, `Work::Kernel`); None where `op` is not one."""
    kernels = v0_unfused_kernels(model, tp, op, m)
    if kernels is None:
        return None
    bw = part(gpu)["bw"] * ELEMENTWISE_EFFICIENCY
    return sum(max(c["floor"], b / bw + LAUNCH_S) for b in kernels)


def v0_attention_time(c, r):
    """The roofline's price of a v0 attention row (`roofline_tables.v0_attention`) as vLLM
    runs attention on the part: FlashAttention-3 on Hopper, vLLM's FlashAttention-2 path
    elsewhere (paged, split-KV decode with the GQA group packed into one query tile)."""
    _, q, kvh, hd, _, _ = v0_model(r["model"], r["tp"])
    row = {**r, "q_heads": q, "kv_heads": kvh, "head_dim": hd}
    if r["kind"] == "decode":
        row.update(x=r["batch"] * (r["context"] + 1) * kvh * hd * 4,
                   path="fa3" if part(r["gpu"])["gen"] == "hopper" else "fa2-vllm")
    return attention_time(c, row)


def v0_kernel_time(c, r):
    """A v0 attention row as the roofline's FlashAttention-2 tiles price the kernel v0 ran
    (`flash_attn_varlen_func` on a contiguous cache: no split of the KV, no GQA packing): a
    prefill's query tiles over its keys; a decode's one query row per query head computed as a
    whole 64-row tile over its sequence's keys, `batch` x query heads tiles."""
    g = part(r["gpu"])
    _, q, _, hd, _, _ = v0_model(r["model"], r["tp"])
    if r["kind"] == "decode":
        item, heads = (1, r["context"]), q * r["batch"]
    else:
        item, heads = (r["chunk"], r["prefix"]), q
    flops = prefill_wave_flops([item], heads, hd, g["sms"], PREFILL_TILE_ROWS)
    return c["prefill_t0"] + flops / (g["flops"] * fa2_efficiency(c, r["gpu"], hd))


def v0_step(c, times, attention, setup, kind, tokens, size):
    """{family: (table, roofline) seconds} of one step of a v0 setup from its own rows, or
    None where a row is missing: `tokens` tokens through the embedding, every layer's ops of
    `V0_FAMILIES` (the MoE block left out) and its attention (`attention`'s row of the step's
    `kind`: decodes of `size` KV tokens each, or a chunk of `size` from an empty cache), then
    the final norm and the LM head on one row per sequence."""
    gpu, model, tp = setup
    layers = V0_NUM_LAYERS[model]
    key = (kind, tokens, size) if kind == "decode" else (kind, size, 0)
    if setup + key not in attention:
        return None
    moe = tables.V0_MODELS[model][6] > 0  # a MoE model's act_fn is its expert's
    per_layer = [op for fam in ("norms", "q/k/v proj", "rope", "o_proj", "gate/up proj", "act_fn", "down_proj")
                 for op in V0_FAMILIES[fam][0] if op != "final_layernorm" and not (moe and op == "act_fn")]
    ops = [("embedding", tokens, 1)] + [(op, tokens, layers) for op in per_layer] + \
        [("final_layernorm", tokens, 1), ("lm_head", tokens if kind == "decode" else 1, 1)]
    ops = [(op, m, n) for op, m, n in ops if setup + (op, m) in times]
    if not any(op == "q_proj" for op, _, _ in ops):
        return None
    row = attention[setup + key]
    sums = {"attention": (layers * row["t"], layers * v0_attention_time(c, row))}
    for op, m, n in ops:
        t, p = sums.get(V0_FAMILY[op], (0.0, 0.0))
        sums[V0_FAMILY[op]] = (t + n * times[setup + (op, m)], p + n * v0_op_time(c, gpu, model, tp, op, m))
    return sums


def print_v0_ops(c, layers, attention):
    """The roofline's error (the code's constants `c`) on every op of LLMServingSim's v0
    tables, by GPU, model and TP, op family and regime of tokens; on their attention rows by
    kind and regime; and on whole decode and prefill steps summed from the tables' own rows."""
    print("LLMServingSim v0 tables, every op priced as vLLM runs it with the code's constants: median |error| "
          "(signed median) [rows] by tokens")
    bands = ((1, 16), (17, 128), (129, 1024), (1025, 2048))
    print(f"  {'setup / op family':44}" + "".join(f" | {f'M {lo}-{hi}':>21}" for lo, hi in bands) + f" | {'all':>21}")
    for setup in sorted({(r["gpu"], r["model"], r["tp"]) for r in layers}):
        print(f"  {setup[0]} {setup[1].split('/')[-1]} TP {setup[2]}")
        mine = [r for r in layers if (r["gpu"], r["model"], r["tp"]) == setup]
        for fam, (ops, kept) in V0_FAMILIES.items():
            lines = [(f"    {fam}" + ("" if kept else " (vLLM's fused kernel)"), v0_op_time)]
            if not kept:
                lines.append((f"    {fam} (v0's unfused kernels)", v0_unfused_time))
            for label, price in lines:
                errs = [(r["M"], price(c, *setup, r["op"], r["M"]) / r["t"] - 1) for r in mine if r["op"] in ops]
                if errs:
                    print(f"  {label:44}" + "".join(f" | {regime_cell([e for m, e in errs if lo <= m <= hi])}"
                                                     for lo, hi in bands) + f" | {regime_cell([e for _, e in errs])}")
    print()
    print_v0_attention(c, attention)
    print()
    print_v0_steps(c, layers, attention)


def v0_attention_regime(r):
    """The regime of a v0 attention row: by chunk (prefill), by batch and KV tokens per
    sequence (decode); None outside the shapes the blind runs see."""
    if r["kind"] == "prefill":
        return "prefill, chunk <= 256" if r["chunk"] <= 256 else "prefill, chunk 257-1024"
    if r["batch"] > 64 or r["context"] >= 2048:
        return None
    return "decode, " + ("1 sequence" if r["batch"] == 1 else "2-16 sequences" if r["batch"] <= 16
                         else "17-64 sequences") + ", KV < 2K"


def print_v0_attention(c, attention):
    """The v0 attention rows priced as vLLM runs attention on the part (`v0_attention_time`)
    and as the roofline's FA2 tiles price the kernel v0 ran (`v0_kernel_time`)."""
    errs = {}
    for r in attention:
        regime = v0_attention_regime(r)
        if regime:
            key = (r["gpu"], r["model"].split("/")[-1], r["tp"], regime)
            e = errs.setdefault(key, ([], []))
            e[0].append(v0_attention_time(c, r) / r["t"] - 1)
            e[1].append(v0_kernel_time(c, r) / r["t"] - 1)
    print("  v0 attention rows (flash_attn's FlashAttention-2 varlen kernel on a contiguous cache): median |error| "
          "(signed) [rows]")
    print(f"    {'setup, regime':62} | {'vLLM kernels on the part':>21} | {'as FA2 tiles (v0 kernel)':>24}")
    for key in sorted(errs):
        label = f"{key[0]} {key[1]} TP {key[2]}, {key[3]}"
        print(f"    {label:62} | {regime_cell(errs[key][0])} | {regime_cell(errs[key][1]):>24}")


def print_v0_steps(c, layers, attention):
    """Summed steps of each v0 setup with attention rows: tables' times against the roofline's
    (the MoE block left out), with and without the ops v0 runs unfused, and by op family at a
    decode of 16 sequences of 1,024 KV tokens and a 1,024-token prefill."""
    times = {(r["gpu"], r["model"], r["tp"], r["op"], r["M"]): r["t"] for r in layers}
    att = {}
    for r in attention:
        key = (r["batch"], r["context"] + 1) if r["kind"] == "decode" else (r["chunk"], r["prefix"])
        att[(r["gpu"], r["model"], r["tp"], r["kind"]) + key] = r
    kept = {fam for fam, (_, k) in V0_FAMILIES.items() if k} | {"attention"}
    print("  summed steps (MoE block left out): table -> roofline ms (error); the same without v0's unfused norms, "
          "rotary and activation")
    for setup in sorted({k[:3] for k in att}):
        print(f"    {setup[0]} {setup[1].split('/')[-1]} TP {setup[2]}:")
        for kind, shapes in (("decode", [(b, kv) for b in V0_DECODE_BATCHES for kv in V0_DECODE_KV]),
                             ("prefill", [(n, n) for n in V0_PREFILLS])):
            for tokens, size in shapes:
                sums = v0_step(c, times, att, setup, kind, tokens, size)
                if not sums:
                    continue
                every = [sum(v[i] for v in sums.values()) * 1e3 for i in (0, 1)]
                fused = [sum(v[i] for f, v in sums.items() if f in kept) * 1e3 for i in (0, 1)]
                what = f"{tokens} x KV {size}" if kind == "decode" else f"{tokens} tokens"
                cells = [f"{a:8.3f} -> {b:8.3f} ({(b / a - 1) * 100:+6.1f}%)" for a, b in (every, fused)]
                print(f"      {kind:7} {what:14} {cells[0]}; {cells[1]}")
                if (kind, tokens, size) in (("decode", 16, 1024), ("prefill", 1024, 1024)):
                    print("        by family, ms: " + ", ".join(f"{f} {t * 1e3:.3f} -> {p * 1e3:.3f}"
                                                           for f, (t, p) in sums.items()))


def main():
    tpu = [a for a in sys.argv[1:] if a == "--tpu" or a.startswith("--tpu=")]
    if tpu:
        # LLMServingSim 2.0's TPU tables (scripts/derive_tpu.py): no data directory is read.
        source = tpu[0].split("=", 1)[1] if "=" in tpu[0] else derive_tpu.default_source()
        m_tile = [int(a.split("=", 1)[1]) for a in sys.argv[1:] if a.startswith("--tpu-m-tile=")]
        derive_tpu.print_tpu(source, m_tile[0] if m_tile else 1)
        return
    if "--custom-allreduce" in sys.argv:
        # Public numbers written in this script: no data directory is read.
        print_custom_allreduce_held_out()
        print()
        print_peer_kernels_held_out()
        return
    # Bad input fails before the derivation.
    root = v0_root()
    v0 = (tables.v0_gemms(root), tables.v0_layers(root), tables.v0_attention(root)) if root else None
    data = Data()
    print_fits(data)
    pairs = tables.moe_pairs(data.tables)
    host = host_launch.host_launches(data.tables, pairs)
    host_launch.print_host_launches(host, pairs)
    for arg in sys.argv[1:]:
        if arg.startswith("--gemm-rows="):
            print()
            print_gemm_rows(data, arg.split("=", 1)[1])
    if "--row-kernels" in sys.argv:
        print()
        print_row_kernels(data)
    if "--gemm-fixed" in sys.argv:
        print()
        print_gemm_fixed(data)
    if v0:
        print()
        print_v0_gemms(data, v0[0])
        print()
        print_v0_pairs(data, v0[0])
        print()
        print_tp_prefill_gemms(data, v0[0], ("H100",), " (LLMServingSim v0 tables)")
        print()
        print_v0_ops(data.constants(list(GPUS)), v0[1], v0[2])
    print()
    print_mixed_kernel_fits(data)
    if "--loo" in sys.argv:
        print()
        print_loo(leave_one_out(data))
        print()
        print_moe_held_out(moe_held_out(data))
        if VLLM019_DEFAULT_TILES:
            print()
            print_moe_same_tiles(data)
        print()
        print_allreduce_floor(data, data.constants(list(GPUS)))
        print()
        print_allreduce_bands(data)
        print()
        print_allreduce_transfer(data)
        print()
        print_custom_allreduce_held_out()
        print()
        print_peer_kernels_held_out()
        print()
        print_tp_prefill_gemms(data)
        print()
        print_transition_gemms(data)
        print()
        print_transition_gemm_misses(data)
    c = data.constants(list(GPUS))
    mixed = [[round(c["mixed"][(nd, kv)], 3) for kv in tables.MIXED_KV] for nd in tables.MIXED_DECODES]
    print()
    for flag in ("--flat-large-tile", "--frontier-shapes", "--vllm019-default-tiles", "--mixed-table",
                 "--moe-smem-bound"):
        if flag in sys.argv:
            print(f"with {flag}, a what-if: src/latency/roofline.rs holds the constants derived without it")
    print("constants held by the host model's defaults (src/config/hardware.rs, HostSpec):")
    print(f"eager_op_ns = {round(host['eager_op'] * 1e7) * 100}")
    print(f"triton_launch_ns = {round(host['triton_launch'] * 1e7) * 100}")
    print("constants held by src/latency/roofline.rs:")
    print(f"GEMM_FIXED_NS = {round(c['gemm_t0'] * 1e8) * 10}")
    print(f"GEMM_FIXED_BASE_NS = {round(c['gemm_fixed_base'] * 1e8) * 10}")
    print(f"GEMM_FIXED_NS_PER_STREAM_BYTE = {round(c['gemm_fixed_slope'] * 1e9)}")
    for k in STREAM_CLASSES:
        print(f"GEMM_MEMORY_EFFICIENCY_{k.upper()} = {c['gemm_eta_m'][k]:.3f}")
    print(f"GDDR_IN_BAND_ECC_SHARE = {ECC_IN_BAND_SHARE:.2f}")
    print(f"GEMM_COMPUTE_EFFICIENCY = {c['gemm_eta_c']:.2f}")
    print(f"GEMM_UNHIDDEN = {c['gemm_unhidden']:.2f}")
    print(f"GEMM_FP8_COMPUTE_EFFICIENCY = {GEMM_FP8_COMPUTE_EFFICIENCY:.2f}")
    print(f"GEMM_FP8_UNHIDDEN_HOPPER = {c['gemm_fp8_unhidden']:.2f}")
    print(f"ATTENTION_FIXED_NS = {round(c['attention_t0'] * 1e7) * 100}")
    print(f"DECODE_ATTENTION_EFFICIENCY = {c['decode_eta']:.3f}")
    for name in DECODE_CONSTANTS[:4]:
        print(f"{name.upper()} = {round(c[name], -1):.0f}")
    print(f"PREFILL_ATTENTION_FIXED_NS = {round(c['prefill_t0'] * 1e7) * 100}")
    print(f"PREFILL_ATTENTION_EFFICIENCY = {c['prefill_eta']:.3f}")
    print(f"PREFILL_SCORE_CLOCKS = {c['prefill_score_clocks']:.3f}")
    print(f"MIXED_BLOCK_CLOCKS = {round(c['mixed_block_clocks'], -1):.0f}")
    print(f"MIXED_DECODE_EFFICIENCY = {', '.join(f'{m:.3f}' for row in mixed for m in row)}")
    print(f"MOE_FIXED_NS = {round(c['moe_t0'] * 1e7) * 100}")
    print(f"MOE_MEMORY_EFFICIENCY = {c['moe_eta_m']:.3f}")
    print(f"MOE_COMPUTE_EFFICIENCY = {c['moe_eta_c']:.2f}")
    print(f"MOE_UNHIDDEN = {c['moe_unhidden']:.2f}")
    print(f"MOE_LATENCY_CLOCKS = {c['moe_latency']:.0f}")
    print(f"MOE_IDLE_BLOCK_CLOCKS = {c['moe_idle_clocks']:.0f}")
    if "--flat-large-tile" in sys.argv:
        print(f"(what-if, not held by the code) MOE_LARGE_TILE_STREAMING = {c['moe_large_tile']:.2f}")
    else:
        print(f"MOE_LARGE_TILE_BYTES_PER_CLOCK = {c['moe_large_tile']:.1f}")
    print(f"KERNEL_FLOOR_NS = {round(c['floor'] * 1e8) * 10}")
    print(f"ROW_KERNEL_FIXED_CLOCKS = {round(c['row_fixed'], -1):.0f}")
    print(f"ROW_SCALAR_BYTES_PER_CLOCK = {c['row_scalar']:.1f}")
    print(f"ROW_VECTOR_BYTES_PER_CLOCK = {c['row_vector']:.1f}")
    print(f"L2_BYTES_PER_SM_CLOCK = {c['l2_bytes']:.2f}")
    print(f"ROW_L2_OVER_DRAM = {c['l2_dram']:.3f}")
    print(f"ALLREDUCE_LINK_EFFICIENCY = {c['allreduce_eta']:.3f}")
    peer_ns, peer_eta = peer_constants()
    print(f"PEER_ROUND_NS = {peer_ns}")
    print(f"PEER_LINK_EFFICIENCY = {peer_eta:.2f}")


if __name__ == "__main__":
    main()
