#!/usr/bin/env python3
"""Derives the roofline's attention efficiencies and kernel floor from measured kernel data.

Reads (never copies) two independent sets of GPU kernel timings:
- LLMServingSim profile bundles (`../shared/data/llmservingsim/profiler/perf`): per-layer GPU
  time of an `enforce_eager` model, attention by (prefill chunk, its KV prefix, decodes, decode
  KV), on RTX 4090 and RTX PRO 6000;
- Frontier's operator profiles (`../shared/data/frontier/profiling/compute`): kernel-only
  (`KERNEL_ONLY`) elementwise-op times on H800 and RTX PRO 6000 (its attention files count
  the KV cache differently per backend and are not used).

For every GPU it fits, by least squares on the rows named below,
- decode attention: `t = t0 + KV bytes / (peak bandwidth × eta_decode)` (pure-decode rows);
- prefill attention: `t = t0 + causal FLOPs / (peak dense FLOP/s × eta_prefill)` (pure-prefill
  rows of at least 256 tokens);
- the kernel floor: the median kernel-only time of a one-token RMSNorm (the smallest kernel
  every step runs);
- the fused-MoE kernel (Qwen3-30B-A3B's `moe.csv`, RTX PRO 6000): `t0 + bytes / (bw × eta)`
  over rows of at most 128 tokens, the fraction of peak FLOP/s of the 2,048-token rows, and
  the share of the shorter of its compute and weight stream that the longer does not hide;
- the mixed-batch decode efficiency by decode thread blocks (decodes x query heads) and decode
  context, the KV bytes counted once per query head (a mixed batch's varlen kernel runs one
  block per query head for each decode);
- the host cost of an eager op (host model): the wall time of launch-bound ops.
- the fixed time and bandwidth of memory-bound GEMMs, `t0 + bytes / (bw x eta)` over
  Llama-3.1-8B's four GEMMs at <= 16 tokens (the bundles' dense tables and our H200
  measurement, data/measured/H200-2026-11-26.json), and their median over the three sources;
and prints each GPU's values and their median over GPUs, which the roofline uses for every
GPU (`src/latency/roofline.rs`). No validation run is read. The last lines ("constants held
by src/latency/roofline.rs") print the values the code holds, rounded as it rounds them;
`tests/accuracy/derive_roofline.rs` checks that the two agree.

Usage: scripts/derive_roofline.py [DATA_DIR]   (default ../shared/data)
"""
import csv
import glob
import os
import statistics
import sys

DATA = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../shared/data")
LSS = os.path.join(DATA, "llmservingsim/profiler/perf")
FRONTIER = os.path.join(DATA, "frontier/profiling/compute")

# Datasheet peaks (the roofline's hardware files).
GPUS = {
    "RTX4090": {"bw": 1008e9, "flops": 165.2e12},
    "RTXPRO6000": {"bw": 1597e9, "flops": 503.8e12},
}
# Llama-3.1-8B attention per GPU at TP 1: 32 query heads, 8 KV heads of 128, bf16.
LLAMA = {"heads": 32, "kv_heads": 8, "head_dim": 128, "bytes": 2}


def fit(rows):
    """`t = t0 + x / rate` over (x, t), least squares of the relative error (weights 1/t^2,
    so that small kernels count as much as large ones); returns (t0 seconds, rate per second)."""
    w = [1.0 / (t * t) for _, t in rows]
    sw = sum(w)
    sx = sum(wi * x for wi, (x, _) in zip(w, rows))
    st_ = sum(wi * t for wi, (_, t) in zip(w, rows))
    sxx = sum(wi * x * x for wi, (x, _) in zip(w, rows))
    sxt = sum(wi * x * t for wi, (x, t) in zip(w, rows))
    slope = (sw * sxt - sx * st_) / (sw * sxx - sx * sx)
    return (st_ - slope * sx) / sw, 1.0 / slope


def kv_bytes(m, tokens):
    return tokens * m["kv_heads"] * m["head_dim"] * 2 * m["bytes"]


def causal_flops(m, chunk, prefix):
    return 4.0 * m["heads"] * m["head_dim"] * chunk * (prefix + (chunk + 1) / 2.0)


def bundle_attention(gpu):
    path = os.path.join(LSS, gpu, "meta-llama/Llama-3.1-8B/bf16/tp1/attention.csv")
    if not os.path.exists(path):
        return None
    decode, prefill = [], []
    for r in csv.DictReader(open(path)):
        pc, kp, nd, kd = (int(r[k]) for k in ("prefill_chunk", "kv_prefill", "n_decode", "kv_decode"))
        t = float(r["time_us"]) * 1e-6
        if pc == 0 and nd > 0:
            decode.append((kv_bytes(LLAMA, nd * kd), t))
        elif nd == 0 and pc >= 256:
            prefill.append((causal_flops(LLAMA, pc, kp), t))
    return decode, prefill


# (gpu, model, KV heads, query heads): the attention tables are at TP 1.
MIXED_SOURCES = [
    ("RTX4090", "meta-llama/Llama-3.1-8B", 8, 32),
    ("RTXPRO6000", "meta-llama/Llama-3.1-8B", 8, 32),
    ("RTXPRO6000", "Qwen/Qwen3-30B-A3B-Instruct-2507", 4, 32),
]


MIXED_DECODES = [4, 8, 16, 32, 64, 128]
MIXED_KV = [16 << i for i in range(11)]


def mixed_decode_grid(gpu, model, kv_heads, q_heads):
    """Per (decodes, decode KV) cell of the attention table: the decodes' KV bytes, counted once
    per query head (x query heads / KV heads), over the median of (mixed time - the same
    prefill alone) across the cell's prefill shapes, over the peak bandwidth."""
    path = os.path.join(LSS, gpu, model, "bf16/tp1/attention.csv")
    rows = list(csv.DictReader(open(path)))
    alone = {(r["prefill_chunk"], r["kv_prefill"]): float(r["time_us"]) for r in rows if r["n_decode"] == "0"}
    extra = {}
    for r in rows:
        key, nd, kv = (r["prefill_chunk"], r["kv_prefill"]), int(r["n_decode"]), int(r["kv_decode"])
        if int(r["prefill_chunk"]) == 0 or nd not in MIXED_DECODES or kv not in MIXED_KV or key not in alone:
            continue
        extra.setdefault((nd, kv), []).append((float(r["time_us"]) - alone[key]) * 1e-6)
    return {cell: nd_kv_bytes(cell, q_heads) / statistics.median(v) / GPUS[gpu]["bw"]
            for cell, v in extra.items() for nd in [cell[0]]}


def nd_kv_bytes(cell, q_heads):
    nd, kv = cell
    return nd * kv * q_heads * 128 * 2 * 2


def mixed_decode(gpu, model, kv_heads, per_query_head=False):
    """The earlier parametrisation, for comparison: median, per decodes x KV heads, of the
    decodes' KV bytes (once) / (mixed time - the same prefill alone) over the peak bandwidth
    (rows reading over 10 MB)."""
    path = os.path.join(LSS, gpu, model, "bf16/tp1/attention.csv")
    rows = list(csv.DictReader(open(path)))
    alone = {(r["prefill_chunk"], r["kv_prefill"]): float(r["time_us"]) for r in rows if r["n_decode"] == "0"}
    by_units = {}
    for r in rows:
        key, nd = (r["prefill_chunk"], r["kv_prefill"]), int(r["n_decode"])
        if int(r["prefill_chunk"]) == 0 or nd == 0 or key not in alone:
            continue
        extra = (float(r["time_us"]) - alone[key]) * 1e-6
        b = nd * int(r["kv_decode"]) * kv_heads * 128 * 2 * 2
        if b > 10e6 and extra > 0:
            by_units.setdefault(nd * kv_heads, []).append(b / extra / GPUS[gpu]["bw"])
    return {u: statistics.median(v) for u, v in sorted(by_units.items())}


def moe_fit():
    """The fused-MoE kernel of Qwen3-30B-A3B on RTX PRO 6000 (3 x 2048 x 768 bf16 experts)."""
    path = os.path.join(LSS, "RTXPRO6000/Qwen/Qwen3-30B-A3B-Instruct-2507/bf16/tp1/moe.csv")
    rows = list(csv.DictReader(open(path)))
    expert = 3 * 2048 * 768 * 2
    small = [(int(r["activated_experts"]) * expert, float(r["time_us"]) * 1e-6)
             for r in rows if int(r["tokens"]) <= 128]
    t0, rate = fit(small)
    big = [2 * 2048 * 8 * 3 * 2048 * 768 / (float(r["time_us"]) * 1e-6) / GPUS["RTXPRO6000"]["flops"]
           for r in rows if int(r["tokens"]) == 2048 and int(r["activated_experts"]) <= 32]
    return t0, rate / GPUS["RTXPRO6000"]["bw"], min(big), max(big)


def moe_overlap(t0_ns, eta_memory, eta_compute):
    """How much of the shorter of the fused-MoE kernel's weight stream and its MMA work the
    longer one fails to hide: `t = t0 + max(c, m) + k x min(c, m)`, with the roofline's t0 and
    efficiencies (as it rounds them) and its FLOPs and bytes (weights of the active experts,
    routed rows in and out), k by least squares of the relative error over every row of
    `moe.csv` (0.01 steps). Returns (k, median |error| with k = 0, the same with k)."""
    path = os.path.join(LSS, "RTXPRO6000/Qwen/Qwen3-30B-A3B-Instruct-2507/bf16/tp1/moe.csv")
    hidden, ffn, top_k, fp = 2048, 768, 8, 2
    peak = GPUS["RTXPRO6000"]
    parts = []
    for r in csv.DictReader(open(path)):
        routed = int(r["tokens"]) * top_k
        m = (int(r["activated_experts"]) * 3 * hidden * ffn * fp + 2 * routed * hidden * fp) / (eta_memory * peak["bw"])
        c = routed * 2 * 3 * hidden * ffn / (eta_compute * peak["flops"])
        parts.append((max(c, m), min(c, m), float(r["time_us"]) * 1e-6))

    def errors(k):
        return [(t0_ns * 1e-9 + hi + k * lo) / t - 1 for hi, lo, t in parts]

    k = min((i / 100 for i in range(101)), key=lambda k: sum(e * e for e in errors(k)))
    return k, statistics.median(map(abs, errors(0.0))), statistics.median(map(abs, errors(k)))


def floor_us(gpu, model):
    path = os.path.join(FRONTIER, gpu, model, "linear_op_kernel_only.csv")
    if not os.path.exists(path):
        return None
    times = [float(r["time_stats.input_layernorm.median"]) * 1e3
             for r in csv.DictReader(open(path))
             if int(r["num_tokens"]) == 1 and r["time_stats.input_layernorm.median"]]
    return statistics.median(times) if times else None


def eager_op_wall_us():
    """Median wall time (CUDA_EVENT) of eager ops whose kernel-only time is under 5 us (the op
    is launch-bound, so its wall time is the host's cost of issuing it), at <= 64 tokens, over
    every model Frontier profiled both ways on RTX PRO 6000 and H800."""
    walls = []
    for kernel_path in glob.glob(os.path.join(FRONTIER, "*", "*", "linear_op_kernel_only.csv")):
        event_path = kernel_path.replace("_kernel_only", "")
        if not os.path.exists(event_path):
            continue
        events = {r["num_tokens"]: r for r in csv.DictReader(open(event_path))}
        for k in csv.DictReader(open(kernel_path)):
            e = events.get(k["num_tokens"])
            if e is None or int(k["num_tokens"]) > 64:
                continue
            for col, value in k.items():
                if not (col.startswith("time_stats.") and col.endswith(".median")) or not value:
                    continue
                wall = e.get(col)
                if wall and float(value) * 1e3 < 5.0:
                    walls.append(float(wall) * 1e3)
    return statistics.median(walls), len(walls)


LLAMA_GEMMS = {"qkv_proj": (4096, 6144), "o_proj": (4096, 4096), "gate_up_proj": (4096, 28672), "down_proj": (14336, 4096)}
MEASURED_H200 = os.path.join(os.path.dirname(__file__), "../data/measured/H200-2026-11-26.json")


def gemm_fixed_fits():
    """Memory-bound GEMMs (<= 16 tokens) of Llama-3.1-8B: `t = t0 + bytes / (bw x eta)` per GPU,
    from the bundles' dense tables (kernel-only CUDA time) and from our H200 measurement
    (scripts/gpu/measure_host.py; graph replay, so with the <= 0.8 us between kernels). The
    roofline takes the median of the three per constant."""
    out = []
    for gpu in ("RTX4090", "RTXPRO6000"):
        path = os.path.join(LSS, gpu, "meta-llama/Llama-3.1-8B/bf16/tp1/dense.csv")
        if not os.path.exists(path):
            continue
        rows = []
        for r in csv.DictReader(open(path)):
            if r["layer"] in LLAMA_GEMMS and int(r["tokens"]) <= 16:
                (k, n), m = LLAMA_GEMMS[r["layer"]], int(r["tokens"])
                rows.append((2.0 * (k * n + m * k + m * n), float(r["time_us"]) * 1e-6))
        t0, rate = fit(rows)
        out.append((gpu, len(rows), t0, rate / GPUS[gpu]["bw"]))
    if os.path.exists(MEASURED_H200):
        import json

        gemm = json.load(open(MEASURED_H200))["pass1"]["gemm"]
        rows = [(2.0 * (g["K"] * g["N"] + g["M"] * g["K"] + g["M"] * g["N"]), g["gpu_ns"] * 1e-9)
                for g in gemm if g["op"] in LLAMA_GEMMS and g["M"] <= 16]
        t0, rate = fit(rows)
        out.append(("H200 (ours)", len(rows), t0, rate / 4800e9))
    return out


def main():
    sources = [
        ("RTX4090", "bundle", bundle_attention("RTX4090")),
        ("RTXPRO6000", "bundle", bundle_attention("RTXPRO6000")),
    ]
    eta_d, eta_p, t0_d, t0_p = [], [], [], []
    print(f"{'gpu':14} {'source':34} {'rows d/p':>9} {'eta_decode':>10} {'t0_d us':>8} {'eta_prefill':>11} {'t0_p us':>8}")
    for gpu, source, data in sources:
        if data is None:
            print(f"{gpu:14} {source:34} missing")
            continue
        decode, prefill = data
        peak = GPUS[gpu]
        d0, drate = fit(decode) if len(decode) > 2 else (float("nan"), float("nan"))
        p0, prate = fit(prefill) if len(prefill) > 2 else (float("nan"), float("nan"))
        ed, ep = drate / peak["bw"], prate / peak["flops"]
        print(f"{gpu:14} {source:34} {len(decode):4}/{len(prefill):<4} {ed:10.3f} {d0*1e6:8.2f} {ep:11.3f} {p0*1e6:8.2f}")
        if ed == ed:
            eta_d.append(ed)
            t0_d.append(d0 * 1e6)
        if ep == ep:
            eta_p.append(ep)
            t0_p.append(p0 * 1e6)
    floors = [f for f in (floor_us("rtx_pro_6000", "qwen2_dense_test"),
                          floor_us("h800", "llama2_7b_dense_example"),
                          floor_us("h800", "Qwen3-30B-A3B-tiny")) if f]
    print()
    print(f"median over GPUs: eta_decode {statistics.median(eta_d):.3f} (t0 {statistics.median(t0_d):.2f} us), "
          f"eta_prefill {statistics.median(eta_p):.3f} (t0 {statistics.median(t0_p):.2f} us)")
    print(f"kernel floor (one-token RMSNorm, kernel only): {', '.join(f'{f:.2f}' for f in floors)} us; "
          f"median {statistics.median(floors):.2f} us")
    print("mixed-batch decode efficiency, KV bytes per query head, by decodes x query heads (rows)")
    print("and decode context (columns); per source (RTX4090 Llama, RTXPRO6000 Llama, RTXPRO6000 Qwen3-30B), then the median:")
    grids = [mixed_decode_grid(*src) for src in MIXED_SOURCES]
    mixed = []
    print("  blocks  " + " ".join(f"{kv:6}" for kv in MIXED_KV))
    for nd in MIXED_DECODES:
        q_heads = MIXED_SOURCES[0][3]
        for i, g in enumerate(grids):
            print(f"  {nd * q_heads:5}.{i} " + " ".join(f"{g[(nd, kv)]:6.3f}" for kv in MIXED_KV))
        row = [round(statistics.median(g[(nd, kv)] for g in grids), 3) for kv in MIXED_KV]
        mixed.append(row)
        print(f"  {nd * q_heads:5}.M " + " ".join(f"{m:6.3f}" for m in row))
    print("  (per KV head, by decodes x KV heads, the earlier 1-D parametrisation, for comparison:)")
    old_tables = [mixed_decode(*src[:3]) for src in MIXED_SOURCES]
    for units in sorted(set().union(*old_tables)):
        cells = " ".join(f"{t[units]:.3f}" if units in t else "  -  " for t in old_tables)
        print(f"  {units:5}: {cells}")
    t0, eta, lo, hi = moe_fit()
    print(f"fused MoE: t0 {t0 * 1e6:.1f} us, eta_memory {eta:.3f}, compute-bound 2048-token rows (<= 32 experts) at {lo:.2f}-{hi:.2f} of peak FLOP/s")
    moe_t0_ns = round(t0 * 1e7) * 100
    overlap, before, after = moe_overlap(moe_t0_ns, round(eta, 3), round((lo + hi) / 2, 2))
    print(f"fused MoE overlap: t0 + max(compute, memory) + {overlap:.2f} x min(...) over every row: "
          f"median |error| {before:.1%} with 0, {after:.1%} with {overlap:.2f}")
    wall, n = eager_op_wall_us()
    print(f"eager op host cost (launch-bound ops' CUDA_EVENT wall time): median {wall:.1f} us over {n} ops")
    print("memory-bound GEMMs (<= 16 tokens), t0 + bytes / (eta x peak bandwidth):")
    gemms = gemm_fixed_fits()
    for gpu, n, g0, geta in gemms:
        print(f"  {gpu:12} {n:3} rows: t0 {g0 * 1e6:.2f} us, eta {geta:.3f}")
    gemm_t0 = statistics.median(g[2] for g in gemms)
    gemm_eta = statistics.median(g[3] for g in gemms)
    print(f"  median over the {len(gemms)} sources: t0 {gemm_t0 * 1e6:.2f} us, eta {gemm_eta:.3f}")
    print()
    print("constants held by src/latency/roofline.rs:")
    print(f"GEMM_FIXED_NS = {round(gemm_t0 * 1e8) * 10}")
    print(f"GEMM_MEMORY_EFFICIENCY = {gemm_eta:.3f}")
    print(f"MIXED_DECODE_EFFICIENCY = {', '.join(f'{m:.3f}' for row in mixed for m in row)}")
    print(f"MOE_FIXED_NS = {round(t0 * 1e7) * 100}")
    print(f"MOE_MEMORY_EFFICIENCY = {eta:.3f}")
    print(f"MOE_COMPUTE_EFFICIENCY = {round((lo + hi) / 2, 2):.2f}")
    print(f"MOE_UNHIDDEN = {overlap:.2f}")
    print(f"KERNEL_FLOOR_NS = {round(statistics.median(floors) * 100) * 10}")


if __name__ == "__main__":
    main()
