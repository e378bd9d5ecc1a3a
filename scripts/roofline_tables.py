"""Every kernel table the roofline's constants come from, read into one row format per op family.

Used by `scripts/derive_roofline.py`. Reads (never copies) the shared data:
- LLMServingSim's profile bundles (`llmservingsim/profiler/perf`): kernel-only CUDA time per
  layer of vLLM 0.19 with `enforce_eager`, RTX 4090 and RTX PRO 6000;
- Frontier's operator profiles (`frontier/profiling/compute`, six GPUs): the `*_kernel_only`
  files where they exist; the Vidur-format files (a100, a40, h100, and a800's Llama-2-7B), which
  time kernels (1 µs resolution); and `CUDA_EVENT` files, whose rows are kept only where the op
  is GPU-bound and are corrected by the cost of the events themselves, measured on our H200
  (`EVENT_COST_S`), fused-MoE rows by the host's lead before the first kernel
  (`moe_event_lead_share`);
- Frontier's collective timings (`frontier/profiling/network`);
- our H200 measurement (`data/measured/H200-2026-11-26.json`).

Rows that cannot be DRAM-bound kernel times are left out, each by a stated physical rule (a row
faster than the datasheet peak allows; expert weights that fit in L2; a host-bound loop), and
the loaders count what they leave out so the derivation can print it.
"""
import csv
import glob
import json
import os
import statistics

# Datasheet peaks and what varies between the parts: dense BF16 tensor TFLOP/s, memory GB/s,
# SMs, L2 MB, architecture generation, and the SM clock at which the tensor peak is quoted.
# Sources: NVIDIA's datasheets and whitepapers (A100 80GB SXM; A800 80GB SXM, the A100's export
# variant with the same SMs and memory; A40; H100 SXM5; H800 SXM5, the H100's export variant;
# H200 SXM; the Ada whitepaper's RTX 4090 column with FP32 accumulation; RTX PRO 6000 Blackwell
# Server Edition), as in `hardware/*.toml`. The clock is the boost clock the peak implies: peak
# = SMs x dense BF16 FLOP per SM per clock x clock, with 2,048 FLOP per SM per clock on Ampere's
# GA100 (A100 whitepaper: 1,410 MHz), 1,024 on GA102 (A40: 1,740 MHz), 4,096 on Hopper (twice
# Ampere's per SM per clock, whitepaper; 989.4 TFLOP/s over 132 SMs: 1,830 MHz), 512 on Ada with
# FP32 accumulation (RTX 4090) and 1,024 on GB202 (RTX PRO 6000: 503.8 TFLOP/s over 188 SMs:
# 2,617 MHz). The RTX 4090's peak is at the clock a stock card holds under full load, 2,730
# MHz, not the whitepaper's 2,520 MHz "boost clock" (GeForce cards run above it; at 2,520 MHz
# its GEMMs would reach 1.02 of the peak): 178.9 TFLOP/s (hardware/RTX4090.toml). `smem`:
# shared memory per SM, KiB, by compute capability (CUDA C++ Programming Guide, "Technical
# Specifications per Compute Capability": 8.0 164, 8.6 and 8.9 100, 9.0 228, 12.0 100), which
# sets how many of a decode attention kernel's thread blocks an SM holds.
GPUS = {
    "A100": {"flops": 312.0e12, "bw": 2039e9, "sms": 108, "l2": 40e6, "mem": "HBM2e", "gen": "ampere", "clock": 1.410e9, "smem": 164},
    "A800": {"flops": 312.0e12, "bw": 2039e9, "sms": 108, "l2": 40e6, "mem": "HBM2e", "gen": "ampere", "clock": 1.410e9, "smem": 164},
    "A40": {"flops": 149.7e12, "bw": 696e9, "sms": 84, "l2": 6e6, "mem": "GDDR6", "ecc_in_band": True, "gen": "ampere", "clock": 1.740e9, "smem": 100},
    "H100": {"flops": 989.4e12, "bw": 3350e9, "sms": 132, "l2": 50e6, "mem": "HBM3", "gen": "hopper", "clock": 1.830e9, "smem": 228},
    "H800": {"flops": 989.4e12, "bw": 3350e9, "sms": 132, "l2": 50e6, "mem": "HBM3", "gen": "hopper", "clock": 1.830e9, "smem": 228},
    "H200": {"flops": 989.4e12, "bw": 4800e9, "sms": 132, "l2": 50e6, "mem": "HBM3e", "gen": "hopper", "clock": 1.830e9, "smem": 228},
    "RTX4090": {"flops": 178.9e12, "bw": 1008e9, "sms": 128, "l2": 72e6, "mem": "GDDR6X", "gen": "ada", "clock": 2.730e9, "smem": 100},
    "RTXPRO6000": {"flops": 503.8e12, "bw": 1597e9, "sms": 188, "l2": 128e6, "mem": "GDDR7", "gen": "blackwell", "clock": 2.617e9,
                   "smem": 100},
}
FRONTIER_DEVICE = {"a100": "A100", "a800": "A800", "a40": "A40", "h100": "H100", "h800": "H800",
                   "rtx_pro_6000": "RTXPRO6000"}

# What one pair of CUDA events adds to an op's time: event wall time minus host time of the
# same eager ops on our H200 (add 7.7, add_out 8.5, linear 9.1, matmul 8.6, mul 8.5, RMSNorm
# 8.9 µs: median 8.6 µs).
EVENT_COST_S = 8.6e-6
# An event-timed op is GPU-bound (its time is the GPU's, not the host's) when it takes more
# than four times the host's cost of issuing it; the host issues an eager op in 18.3 µs
# (`eager_op_ns` of hardware/H200.toml, measured).
EAGER_OP_S = 18.3e-6


class Tables:
    """Paths of the shared data and counts of the rows each rule left out."""

    def __init__(self, data_dir, measured_h200):
        self.lss = os.path.join(data_dir, "llmservingsim/profiler/perf")
        self.frontier = os.path.join(data_dir, "frontier/profiling/compute")
        self.network = os.path.join(data_dir, "frontier/profiling/network")
        self.h200 = measured_h200
        self.left_out = {}

    def leave_out(self, reason, n=1):
        self.left_out[reason] = self.left_out.get(reason, 0) + n

    def frontier_files(self, pattern):
        """(device, model, path, timing) of Frontier files matching `pattern` (e.g.
        `attention`), preferring `<name>_kernel_only.csv` over its event-timed twin."""
        out = []
        for path in sorted(glob.glob(os.path.join(self.frontier, "*", "**", pattern + "*.csv"), recursive=True)):
            base = os.path.basename(path)[:-4]
            if base.endswith("_kernel_only"):
                timing = "kernel"
            elif os.path.exists(path[:-4] + "_kernel_only.csv"):
                continue
            else:
                timing = None  # from the rows' measurement_type (Vidur format: kernel time)
            if base.replace("_kernel_only", "") != pattern:
                continue
            rel = os.path.relpath(path, self.frontier).split(os.sep)
            out.append((FRONTIER_DEVICE[rel[0]], "/".join(rel[1:-1]), path, timing))
        return out


def timing_of(row, file_timing):
    if file_timing:
        return file_timing
    return "event" if row.get("measurement_type") == "CUDA_EVENT" else "kernel"


# ---------------------------------------------------------------------------------------- GEMMs

# Head dimensions of Frontier's models that set one other than n_embd / n_head (their
# `head_dim` in Frontier's `data/config/models/<model>.json`, commit a4b22df, which its profiler
# builds the projections from; the CSV rows do not carry it). Qwen3-30B-A3B-tiny: 32 heads of
# 128 over a hidden size of 2,048; Phi-tiny-MoE: 16 of 128 over 4,096; Step2Mini-tiny: 16 of 128
# over 2,048; Qwen3-Next (reduced): 16 of 256 over 2,048; Step3 (step-moe): 64 of 256 over 7,168;
# A800's event-timed Qwen3 tables, left out, likewise.
FRONTIER_HEAD_DIM = {"Qwen3-30B-A3B-tiny": 128, "qwen3-a3b-30b-moe": 128, "Phi-tiny-MoE-instruct": 128,
                     "Step2Mini-tiny": 128, "qwen3-next-80b-a3b-instruct-reduced-l2": 256,
                     "qwen3-next-80b-a3b-instruct-reduced-l20": 256, "step-moe-noquant-small": 256}

# Ops of a Frontier row that time more than one GEMM, left out of the GEMM rows: with QK-norm
# the `attn_pre_proj` scope holds the QKV projection and the q and k RMSNorm kernels; Step3's
# holds its QKV projection, the q RMSNorm and the q up-projection (its `attn_pre_proj_qkv` and
# `attn_pre_proj_wq` are timed alone and kept). Frontier's `linear_op_impl.py`.
SEVERAL_KERNELS = {"qk_norm": "GEMM: QKV projection timed with its q/k RMSNorms (models with QK-norm)",
                   "step3_text": "GEMM: Step3's attn_pre_proj (QKV, q RMSNorm and q up-projection in one scope)"}


def linear_shapes(r, model, frontier_shapes):
    """(K, N) per GPU of each linear layer of a Frontier/Vidur row (sharded by its TP), and the
    reasons for the ops left out. By default every model's head dimension is n_embd / n_head
    and `attn_pre_proj` one QKV GEMM (what the derivation uses). With `frontier_shapes` (the
    `--frontier-shapes` what-if), as Frontier's profiler builds them (`linear_op_impl.py`): the
    model's own head dimension, the output gate's doubled query, Step2Mini's and Step3's
    shared query projection, and the ops of several kernels left out (`SEVERAL_KERNELS`)."""
    h, nh, nkv = int(r["n_embd"]), int(r["n_head"]), int(r["n_kv_head"])
    ffn, tp = int(r["n_expanded_embd"]), int(r["num_tensor_parallel_workers"])
    hd = FRONTIER_HEAD_DIM.get(model.split("/")[-1], h // nh) if frontier_shapes else h // nh
    q, kv = nh * hd // tp, max(nkv // tp, 1) * hd
    if not frontier_shapes:
        return dict(attn_pre_proj=(h, q + 2 * kv), attn_post_proj=(q, h), **mlp_shapes(r, h, ffn, tp)), {}
    profile = r.get("model_architecture_profile", "generic")
    gate = 2 if r.get("attn_output_gate") == "True" else 1
    shapes, left = {}, {}
    if profile in ("step2_mini", "step3_text"):
        share_q = int(r["share_q_dim"])
        if profile == "step2_mini":
            shapes["attn_pre_proj"] = (h, share_q + 2 * kv)
            shapes["attn_wq_proj"] = (share_q, q)
        else:
            shapes["attn_pre_proj_qkv"] = (h, share_q + 2 * kv)
            shapes["attn_pre_proj_wq"] = (share_q, q)
            left["attn_pre_proj"] = SEVERAL_KERNELS["step3_text"]
    elif r.get("use_qk_norm") == "True":
        left["attn_pre_proj"] = SEVERAL_KERNELS["qk_norm"]
    else:
        shapes["attn_pre_proj"] = (h, gate * q + 2 * kv)
    return dict(shapes, attn_post_proj=(q, h), **mlp_shapes(r, h, ffn, tp)), left


def mlp_shapes(r, h, ffn, tp):
    """(K, N) per GPU of a row's MLP up (gate and up when gated) and down projections."""
    if not (ffn and r.get("time_stats.mlp_up_proj.median")):
        return {}
    gated = r.get("use_gated_mlp", "True") == "True"
    return {"mlp_up_proj": (h, (2 if gated else 1) * ffn // tp), "mlp_down_proj": (ffn // tp, h)}


LSS_GEMMS = {
    "meta-llama/Llama-3.1-8B": {"qkv_proj": (4096, 6144), "o_proj": (4096, 4096),
                                "gate_up_proj": (4096, 28672), "down_proj": (14336, 4096)},
    "Qwen/Qwen3-30B-A3B-Instruct-2507": {"qkv_proj": (2048, 5120), "o_proj": (4096, 2048)},
}


def gemms(t, frontier_shapes=False):
    """GEMM rows: gpu, source, M, K, N, seconds, fp8 (weights and activations in FP8), and the
    table's model, op and TP. `frontier_shapes`: Frontier's rows shaped as its profiler built
    them (`linear_shapes`)."""
    rows = []
    for gpu, model, path, ft in t.frontier_files("mlp") + t.frontier_files("linear_op"):
        for r in csv.DictReader(open(path)):
            try:
                shapes, left = linear_shapes(r, model, frontier_shapes)
            except (KeyError, ValueError, ZeroDivisionError):
                continue
            timing = timing_of(r, ft)
            for op, reason in left.items():
                if r.get(f"time_stats.{op}.median") and timing != "event":
                    t.leave_out(reason)
            if timing == "event":
                # Frontier's event-timed linear ops hold more than the GEMM (the QKV projection
                # with its q/k norms: several launches, 70-100 µs of host time per op).
                t.leave_out("GEMM: event-timed ops of several kernels (A800 Qwen3-30B-A3B)")
                continue
            fp8 = "fp8" in r.get("quant_signature", "")
            for op, (k, n) in shapes.items():
                v = r.get(f"time_stats.{op}.median")
                if not v:
                    continue
                s = float(v) * 1e-3
                rows.append({"gpu": gpu, "src": "frontier-" + timing, "M": int(r["num_tokens"]),
                             "K": k, "N": n, "t": s, "fp8": fp8, "model": model, "op": op,
                             "tp": int(r["num_tensor_parallel_workers"])})
    for gpu in ("RTX4090", "RTXPRO6000"):
        for model, shapes in LSS_GEMMS.items():
            for tp in (1, 2):
                path = os.path.join(t.lss, gpu, model, "bf16", f"tp{tp}", "dense.csv")
                if not os.path.exists(path):
                    continue
                for r in csv.DictReader(open(path)):
                    if r["layer"] not in shapes:
                        continue
                    k, n = shapes[r["layer"]]
                    if r["layer"] in ("o_proj", "down_proj"):
                        k //= tp
                    else:
                        n //= tp
                    rows.append({"gpu": gpu, "src": "lss", "M": int(r["tokens"]), "K": k, "N": n,
                                 "t": float(r["time_us"]) * 1e-6, "fp8": False, "model": model,
                                 "op": r["layer"], "tp": tp})
    if os.path.exists(t.h200):
        for g in json.load(open(t.h200))["pass1"]["gemm"]:
            rows.append({"gpu": "H200", "src": "ours", "M": g["M"], "K": g["K"], "N": g["N"],
                         "t": g["gpu_ns"] * 1e-9, "fp8": False, "model": "measured", "op": "gemm", "tp": 1})
    return rows


# ------------------------------------------------------------------------------------ attention

def causal_flops(heads, head_dim, chunk, prefix):
    return 4.0 * heads * head_dim * chunk * (prefix + (chunk + 1) / 2.0)


def attention(t):
    """Attention rows: gpu, source, kind (decode / prefill / mixed), x (KV bytes read for
    decode, causal FLOPs for prefill), seconds; mixed rows carry the decode-only extra."""
    rows = []
    lss_models = (("meta-llama/Llama-3.1-8B", 32, 8), ("Qwen/Qwen3-30B-A3B-Instruct-2507", 32, 4))
    for gpu in ("RTX4090", "RTXPRO6000"):
        for model, q, kvh in lss_models:
            for tp in (1, 2):
                path = os.path.join(t.lss, gpu, model, "bf16", f"tp{tp}", "attention.csv")
                if not os.path.exists(path):
                    continue
                qh, kh = q // tp, max(kvh // tp, 1)
                for r in csv.DictReader(open(path)):
                    pc, kp, nd, kd = (int(r[k]) for k in ("prefill_chunk", "kv_prefill", "n_decode", "kv_decode"))
                    s = float(r["time_us"]) * 1e-6
                    shape = {"gpu": gpu, "src": "lss", "t": s, "q_heads": qh, "kv_heads": kh, "head_dim": 128}
                    if pc == 0 and nd > 0:
                        rows.append(dict(shape, kind="decode", x=nd * kd * kh * 128 * 4, batch=nd, context=kd,
                                         path="fa2-vllm"))
                    elif nd == 0 and pc > 0:
                        rows.append(dict(shape, kind="prefill", x=causal_flops(qh, 128, pc, kp), chunk=pc, prefix=kp,
                                         kv_bytes=(kp + pc) * kh * 128 * 4))
    for gpu, model, path, ft in t.frontier_files("attention"):
        file_rows = []
        for r in csv.DictReader(open(path)):
            if "measurement_type" not in r:
                # Vidur's format: Vidur's own attention wrapper of 2024, not a vLLM backend
                # (prefill at 0.7-16% of peak FLOP/s where vLLM's kernels reach 43-73%).
                t.leave_out(f"attention: Vidur's wrapper, not a vLLM kernel ({gpu} {model})")
                continue
            if r.get("mode") not in (None, "", "even"):
                continue
            timing = timing_of(r, ft)
            tp, h = int(r["num_tensor_parallel_workers"]), int(r["n_embd"])
            q0, k0 = int(r["n_q_head"]), int(r["n_kv_head"])
            hd, qh, kh = h // q0, q0 // tp, max(k0 // tp, 1)
            bs, pc, kv = int(r["batch_size"]), int(r["prefill_chunk_size"]), int(r["kv_cache_size"])

            def ms(op):
                v = r.get(f"time_stats.{op}.median")
                return float(v) * 1e-3 if v else 0.0
            extra = ms("attn_kv_cache_save") + ms("attn_input_reshape") + ms("attn_output_reshape")
            if r["is_prefill"] == "True":
                if bs != 1 or pc == 0:
                    continue
                row = {"kind": "prefill", "x": causal_flops(qh, hd, pc, kv), "t": ms("attn_prefill") + extra, "chunk": pc,
                       "prefix": kv, "kv_bytes": (kv + pc) * kh * hd * 4}
            else:
                if kv == 0:
                    continue
                row = {"kind": "decode", "x": bs * kv * kh * hd * 4, "t": ms("attn_decode") + extra, "batch": bs,
                       "context": kv, "path": r.get("attention_backend", "").lower()}
            if timing == "event":
                # Each of the five attention ops has its own pair of events; the reshapes and
                # the cache write are launch-bound (17-42 µs each on the A800).
                t.leave_out("attention: event-timed, five launch-bound ops per row (A800)")
                continue
            row.update(gpu=gpu, src="frontier-" + timing, model=model, q_heads=qh, kv_heads=kh, head_dim=hd)
            file_rows.append(row)
        rows += physical(t, file_rows, f"attention {gpu} {model}")
    if os.path.exists(t.h200):
        a = json.load(open(t.h200))["pass1"]["attention"]
        for d in a["decode"]:
            s = min(x for x in (d.get("flash_ns"), d.get("cudnn_ns")) if x) * 1e-9
            rows.append({"gpu": "H200", "src": "ours", "kind": "decode", "x": d["kv_bytes"], "t": s, "path": "sdpa",
                         **h200_decode(d)})
        for p in a["prefill"]:
            s = min(p[k] for k in p if k.endswith("_ns") and p[k]) * 1e-9
            rows.append({"gpu": "H200", "src": "ours", "kind": "prefill", "x": p["causal_flops"], "t": s, "chunk": p["L"],
                         "prefix": 0, "kv_bytes": p["L"] * 8 * 128 * 4, **H200_HEADS})
    return rows


# The shape of our H200 measurement (`scripts/gpu/measure_host.py`, `s_attention`): 32 query
# heads over 8 KV heads of 128; prefill one causal sequence, decode a batch of one query token
# per sequence.
H200_HEADS = {"q_heads": 32, "kv_heads": 8, "head_dim": 128}


def h200_decode(d):
    return dict(H200_HEADS, batch=d["batch"], context=d["kv"])


def physical(t, rows, what):
    """`rows` of one file, or none when more than 5% of them run faster than the datasheet
    peak allows (decode KV reads above peak bandwidth, prefill above peak FLOP/s): such a file
    does not time what its shapes say (e.g. every sequence of a batch reading the same KV
    blocks, which then come from L2)."""
    for kind in ("decode", "prefill"):
        part = [r for r in rows if r["kind"] == kind]
        fast_part = sum(1 for r in part if r["t"] <= 0 or r["x"] / r["t"] > (
            GPUS[r["gpu"]]["bw"] if kind == "decode" else GPUS[r["gpu"]]["flops"]))
        if part and fast_part > 0.05 * len(part):
            t.leave_out(f"{what} {kind}: {fast_part} of {len(part)} rows faster than the datasheet peak", len(part))
            rows = [r for r in rows if r["kind"] != kind]
    return rows


MIXED_SOURCES = [
    ("RTX4090", "meta-llama/Llama-3.1-8B", 8, 32),
    ("RTXPRO6000", "meta-llama/Llama-3.1-8B", 8, 32),
    ("RTXPRO6000", "Qwen/Qwen3-30B-A3B-Instruct-2507", 4, 32),
]
MIXED_DECODES = [4, 8, 16, 32, 64, 128]
MIXED_KV = [16 << i for i in range(11)]


def mixed_extras(t, gpu, model):
    """Per (decodes, decode KV) cell of an LLMServingSim attention table (TP 1): for each of
    the cell's prefill shapes, (chunk, prefix, mixed time - the same prefill alone), seconds."""
    path = os.path.join(t.lss, gpu, model, "bf16/tp1/attention.csv")
    rows = list(csv.DictReader(open(path)))
    alone = {(r["prefill_chunk"], r["kv_prefill"]): float(r["time_us"]) for r in rows if r["n_decode"] == "0"}
    extra = {}
    for r in rows:
        key, nd, kv = (r["prefill_chunk"], r["kv_prefill"]), int(r["n_decode"]), int(r["kv_decode"])
        if int(r["prefill_chunk"]) == 0 or nd not in MIXED_DECODES or kv not in MIXED_KV or key not in alone:
            continue
        extra.setdefault((nd, kv), []).append((int(key[0]), int(key[1]), (float(r["time_us"]) - alone[key]) * 1e-6))
    return extra


def mixed_decode_grid(t, gpu, model, kv_heads, q_heads):
    """Per (decodes, decode KV) cell of an LLMServingSim attention table: the decodes' KV bytes
    counted once per query head, over the median of (mixed time - the same prefill alone)
    across the cell's prefill shapes, over the peak bandwidth."""
    return {(nd, kv): nd * kv * q_heads * 128 * 4 / statistics.median(e for _, _, e in v) / GPUS[gpu]["bw"]
            for (nd, kv), v in mixed_extras(t, gpu, model).items()}


# ------------------------------------------------------------------------------------ fused MoE

# The fused-MoE layer of vLLM issues about six kernels (top-k softmax, align and sort, two
# grouped GEMMs, SiLU-and-mul, the top-k sum): an event-timed row is GPU-bound above four
# times their host cost.
MOE_KERNELS = 6


def moe_pairs(t):
    """(GPU, tokens, event-timed seconds, kernel-only seconds) of every shape Frontier timed both
    ways (an `moe.csv` beside its `moe_kernel_only.csv`: H800, RTX PRO 6000)."""
    out = []
    for gpu, _, path, ft in t.frontier_files("moe"):
        twin = path.replace("_kernel_only.csv", ".csv")
        if ft != "kernel" or not os.path.exists(twin):
            continue

        def times(p):
            keys = ("gating_runtime_context", "load_distribution", "num_tokens", "num_experts_per_device",
                    "expert_parallel_size", "num_tensor_parallel_workers")
            return {tuple(r.get(k) for k in keys): float(r["time_stats.moe_grouped_gemm.median"]) * 1e-3
                    for r in csv.DictReader(open(p))}
        event, kernel = times(twin), times(path)
        out += [(gpu, int(k[2]), event[k], kernel[k]) for k in kernel if k in event]
    return out


def moe_event_lead_share(t):
    """Share of the host's whole issue of an event-timed fused-MoE op that it spends before
    the first kernel starts: Frontier's harness issues the two grouped GEMMs and a copy through
    `invoke_fused_moe_kernel` (Python work before each launch), a pair of CUDA events around
    the op holds that work, and once the GPU is the bottleneck an event-timed row is the
    host's lead plus the kernels. Per GPU with both timings of the same shapes and launch-bound
    ones among them: the median of (event - kernel-only) over the shapes whose kernels take
    more than four eager ops' host time (GPU-bound), over the median event time of its
    one-token shapes (the host's whole issue: H800 56 µs of 128, 0.44). RTX PRO 6000's pairs
    have no one-token shape."""
    lead, floor = {}, {}
    for gpu, tokens, event, kernel in moe_pairs(t):
        if kernel >= 4 * EAGER_OP_S:
            lead.setdefault(gpu, []).append(event - kernel)
        if tokens == 1:
            floor.setdefault(gpu, []).append(event)
    return statistics.median(statistics.median(lead[g]) / statistics.median(floor[g]) for g in lead if g in floor)


def moe_event_floors(t):
    """Per event-timed Frontier MoE file: the median time of its one-token rows (the host's
    whole issue of the op: the kernels of one token take far less)."""
    out = {}
    for _, _, path, ft in t.frontier_files("moe"):
        if ft == "kernel":
            continue
        one = [float(r["time_stats.moe_grouped_gemm.median"]) * 1e-3 for r in csv.DictReader(open(path))
               if r.get("measurement_type") == "CUDA_EVENT" and int(r["num_tokens"]) == 1]
        if one:
            out[path] = statistics.median(one)
    return out


def moe(t):
    """Fused-MoE rows: gpu, source, model, tokens, experts (total, on this GPU), top-k, hidden,
    expert width per GPU, active experts on this GPU, routed rows on this GPU, seconds."""
    rows = []
    share, floors = moe_event_lead_share(t), moe_event_floors(t)
    for gpu, model, path, ft in t.frontier_files("moe"):
        for r in csv.DictReader(open(path)):
            if r.get("load_distribution", "uniform") != "uniform":
                continue
            timing = timing_of(r, ft)
            n, e, e_loc, k = (int(r[c]) for c in ("num_tokens", "num_experts", "num_experts_per_device", "router_topk"))
            ep, tp = int(r["expert_parallel_size"]), int(r["num_tensor_parallel_workers"])
            hidden, width = int(r["hidden_dim"]), int(r["expert_hidden_dim"])
            width_gpu = width // tp
            if r.get("total_routed_tokens"):
                # The rows routed to this GPU's experts as the profiler counted them: its
                # older A800 runs with EP > 1 routed every token's top-k among the local
                # experts (all n x k rows local), its later ones among all experts.
                routed = float(r["total_routed_tokens"])
            else:
                routed = n * k * e_loc / e
            if r.get("expert_utilization"):
                active = float(r["expert_utilization"]) * e_loc
            else:
                # Frontier's uniform routing assigns the routed rows round-robin.
                active = min(e_loc, routed)
            s = float(r["time_stats.moe_grouped_gemm.median"]) * 1e-3
            if timing == "event":
                if s < 4 * EAGER_OP_S * MOE_KERNELS:
                    t.leave_out("MoE: event-timed and launch-bound")
                    continue
                if path not in floors:
                    t.leave_out("MoE: event-timed, no one-token rows to measure the host by")
                    continue
                # The host's lead before the first kernel: its share of this file's host
                # time per op (H800's host: 56 µs; A800's, slower: 88 µs).
                s -= share * floors[path]
            if "measurement_type" not in r:
                # Vidur's format: a Python loop over the experts, each a cuBLAS GEMM (A100
                # Mixtral), its intercept holds the loop's host time.
                timing = "vidur-loop"
            row = {"gpu": gpu, "src": "frontier-" + timing, "model": model, "n": n, "E": e, "E_loc": e_loc,
                   "top_k": k, "hidden": hidden, "width": width_gpu, "active": active, "routed": routed, "t": s}
            if e_loc * 3 * hidden * width_gpu * 2 <= GPUS[gpu]["l2"]:
                t.leave_out("MoE: every expert of the layer fits in L2 (L2, not DRAM, bandwidth)")
                continue
            if "qwen2_moe" in model:
                # Vidur's loop over experts in Python: ~35 µs per active expert whatever its
                # size (1.9 ms for 60 experts of 17 MB at 16 tokens): host-bound.
                t.leave_out("MoE: Vidur's per-expert Python loop, host-bound (qwen2_moe on A100)")
                continue
            rows.append(row)
    path = os.path.join(t.lss, "RTXPRO6000/Qwen/Qwen3-30B-A3B-Instruct-2507/bf16/tp1/moe.csv")
    if os.path.exists(path):
        for r in csv.DictReader(open(path)):
            n = int(r["tokens"])
            rows.append({"gpu": "RTXPRO6000", "src": "lss", "model": "Qwen3-30B-A3B", "n": n, "E": 128, "E_loc": 128,
                         "top_k": 8, "hidden": 2048, "width": 768, "active": int(r["activated_experts"]),
                         "routed": n * 8, "t": float(r["time_us"]) * 1e-6})
    return rows


# ------------------------------------------------------------------------ norms and elementwise

# The row-kernel ops of each table, by the name it times them under.
FRONTIER_ROW_OPS = ("input_layernorm", "post_attention_layernorm", "add", "attn_rope", "mlp_act")
LLMSERVINGSIM_ROW_OPS = ("layernorm", "rotary_emb", "act_fn")
# LLMServingSim's dense tables' models: hidden size, query and key widths, SiLU-and-mul width
# (0: a MoE model, whose dense table has none), head dimension.
LLMSERVINGSIM_ROW_SHAPES = {"meta-llama/Llama-3.1-8B": (4096, 4096, 1024, 14336, 128),
                            "Qwen/Qwen3-30B-A3B-Instruct-2507": (2048, 4096, 512, 0, 128)}


def elementwise(t):
    """Row-kernel rows (RMSNorm, fused add + RMSNorm, rotary, SiLU-and-mul), kernel-only: gpu,
    op, tokens, seconds, the table, the vLLM version that ran it (Frontier's profiler ran
    vLLM 0.10, its `environment_profiling.yml`; LLMServingSim's bundles 0.19, their
    `meta.yaml`) and the shape per GPU (hidden size, query and key widths, SiLU-and-mul width,
    rotary dimension: Frontier's profiler rotates each head whole)."""
    rows = []
    for gpu, model, path, ft in t.frontier_files("mlp") + t.frontier_files("linear_op"):
        for r in csv.DictReader(open(path)):
            if "measurement_type" not in r:
                # Vidur's format: its own norm and activation ops, not vLLM's fused kernels.
                t.leave_out(f"elementwise: Vidur's own ops, not vLLM's kernels ({gpu})")
                continue
            if timing_of(r, ft) != "kernel" or "fp8" in r.get("quant_signature", ""):
                continue
            h, nh, nkv = int(r["n_embd"]), int(r["n_head"]), int(r["n_kv_head"])
            tp, m = int(r["num_tensor_parallel_workers"]), int(r["num_tokens"])
            hd = FRONTIER_HEAD_DIM.get(model, h // nh)
            shape = {"h": h, "q": nh * hd // tp, "k": max(nkv // tp, 1) * hd,
                     "ffn": int(r["n_expanded_embd"]) // tp, "rot": hd}
            for op in FRONTIER_ROW_OPS:
                v = r.get(f"time_stats.{op}.median")
                if v:
                    rows.append({"gpu": gpu, "op": op, "tokens": m, "t": float(v) * 1e-3,
                                 "table": f"Frontier {model} TP{tp}", "vllm": "0.10", **shape})
    for gpu in ("RTX4090", "RTXPRO6000"):
        for model, (h, q, k, ffn, hd) in LLMSERVINGSIM_ROW_SHAPES.items():
            path = os.path.join(t.lss, gpu, model, "bf16/tp1/dense.csv")
            if not os.path.exists(path):
                continue
            shape = {"h": h, "q": q, "k": k, "ffn": ffn, "rot": hd}
            for r in csv.DictReader(open(path)):
                if r["layer"] in LLMSERVINGSIM_ROW_OPS and (ffn or r["layer"] != "act_fn"):
                    rows.append({"gpu": gpu, "op": r["layer"], "tokens": int(r["tokens"]),
                                 "t": float(r["time_us"]) * 1e-6, "table": f"LLMServingSim {model.split('/')[-1]}",
                                 "vllm": "0.19", **shape})
    return rows


# ------------------------------------------------------------------------------------ all-reduce

# Systems of Frontier's collective timings: per-direction link bandwidth per GPU, bytes/s.
# DGX A100 and DGX H100 (NVSwitch: NVLink 3 at 300 GB/s, NVLink 4 at 450 GB/s per direction);
# the "pairwise" systems are PCIe cards bridged in pairs, used here at two GPUs only (one
# bridge: A100 600 GB/s and H100 NVL 600 GB/s both ways, 300 per direction). a800_dgx holds
# the same numbers as a100_dgx to the last digit (a copy) and is not used.
ALLREDUCE_SYSTEMS = {
    "a100_dgx": ("A100", 300e9, None),
    "h100_dgx": ("H100", 450e9, None),
    "a100_pairwise_nvlink": ("A100", 300e9, 2),
    "h100_pairwise_nvlink": ("H100", 300e9, 2),
}


def all_reduce(t):
    """All-reduce rows: system, GPUs, bytes, seconds (median over ranks of the median time)."""
    rows = []
    for system, (gpu, link, only) in ALLREDUCE_SYSTEMS.items():
        path = os.path.join(t.network, system, "all_reduce.csv")
        if not os.path.exists(path):
            continue
        times = {}
        for r in csv.DictReader(open(path)):
            n = int(r["num_workers"])
            if r["devices_per_node"] != r["num_workers"] or (only and n != only):
                continue
            times.setdefault((n, int(r["size"])), []).append(float(r["time_stats.all_reduce.median"]) * 1e-3)
        for (n, size), v in sorted(times.items()):
            if n == 1:
                continue
            rows.append({"system": system, "gpu": gpu, "link": link, "n": n, "bytes": size, "t": statistics.median(v)})
    return rows


# ---------------------------------------------- LLMServingSim's v0 per-layer tables (held out)

# Parts that only LLMServingSim's v0 tables time, never used to derive a constant: their
# datasheet numbers, as `GPUS` holds them. RTX A6000 (NVIDIA RTX A6000 datasheet: 84 SMs,
# 768 GB/s GDDR6, 309.7 TFLOPS FP16 tensor with sparsity -> 154.8 dense at its 1,800 MHz boost,
# 84 x 1,024 FLOP per SM per clock x 1.8 GHz); GeForce RTX 3090 (NVIDIA Ampere GA102 whitepaper,
# appendix table: 82 SMs, 1,695 MHz boost, 936 GB/s GDDR6X, 71 TFLOPS dense FP16 tensor with
# FP32 accumulation, which PyTorch's half-precision GEMMs use: 82 x 512 x 1.695 GHz = 71.2). Both
# GA102, 6 MB of L2 (whitepaper), compute capability 8.6 (100 KiB of shared memory per SM).
V0_GPUS = {
    "A6000": {"flops": 154.8e12, "bw": 768e9, "sms": 84, "l2": 6e6, "mem": "GDDR6", "gen": "ampere", "clock": 1.800e9, "smem": 100},
    "RTX3090": {"flops": 71.2e12, "bw": 936e9, "sms": 82, "l2": 6e6, "mem": "GDDR6X", "gen": "ampere", "clock": 1.695e9, "smem": 100},
}

# The v0 profiler's models (`profiler/v0/models/*.py`, built from the Hugging Face configs):
# hidden size, query heads, KV heads, head dimension, MLP width, vocabulary, experts' width
# (Mixtral and Phi-mini-MoE run one expert, unsharded, on every token). The router's `gate`
# scope is not read: it holds the router GEMM with its softmax, top-k, normalisation and the
# output's allocation, several kernels.
V0_MODELS = {
    "meta-llama/Llama-3.1-8B": (4096, 32, 8, 128, 14336, 128256, 0),
    "meta-llama/Llama-3.1-70B": (8192, 64, 8, 128, 28672, 128256, 0),
    "mistralai/Mixtral-8x7B-v0.1": (4096, 32, 8, 128, 0, 32000, 14336),
    "microsoft/Phi-mini-MoE-instruct": (4096, 32, 8, 128, 0, 32064, 960),
}


def v0_shapes(model, tp):
    """(K, N) per GPU of every linear layer the v0 profiler times for `model` at `tp`: the
    attention and MLP projections and `lm_head` split `tp` ways as its models split them, the
    experts' `w1`/`w3`/`w2` whole."""
    h, nh, nkv, hd, ffn, vocab, expert = V0_MODELS[model]
    shapes = {"q_proj": (h, nh * hd // tp), "k_proj": (h, nkv * hd // tp), "v_proj": (h, nkv * hd // tp),
              "o_proj": (nh * hd // tp, h), "lm_head": (h, vocab // tp)}
    if ffn:
        shapes.update(gate_proj=(h, ffn // tp), up_proj=(h, ffn // tp), down_proj=(ffn // tp, h))
    if expert:
        shapes.update({"expert.w1": (h, expert), "expert.w3": (h, expert), "expert.w2": (expert, h)})
    return shapes


def v0_files(root, name):
    """(gpu, model, tp, path) of every `perf_models/<GPU>/<org>/<model>/tp<N>/<name>` under
    `root` (a checkout of LLMServingSim's repository or an export of `profiler/v0`) of a GPU and
    model the v0 reader knows."""
    base = os.path.join(root, "profiler/v0/perf_models")
    if not os.path.isdir(base):
        base = os.path.join(root, "perf_models")
    out = []
    for path in sorted(glob.glob(os.path.join(base, "*", "*", "*", "tp*", name))):
        rel = os.path.relpath(path, base).split(os.sep)
        gpu, model, tp = rel[0], "/".join(rel[1:3]), int(rel[3][2:])
        if model in V0_MODELS and (gpu in GPUS or gpu in V0_GPUS):
            out.append((gpu, model, tp, path))
    return out


def v0_layers(root):
    """Every row of the v0 `layers.csv` files (`v0_files`) taken from an empty cache: gpu,
    model, tp, op (the profiler's scope), M (tokens) and t (seconds). The profiler
    (`profiler/v0/profiler/layers/main.py`, its default `record_function` method,
    `utils/record_function_tracer.py`) runs one Hugging Face layer in FP16 eager mode and sums,
    per scope, the GPU time of the kernels its CUDA runtime calls launched (Kineto), median of
    30."""
    rows = []
    for gpu, model, tp, path in v0_files(root, "layers.csv"):
        for line, r in enumerate(csv.DictReader(open(path)), start=2):
            try:
                op, m, kv, ns = r["layer_name"], int(r["input"]), int(r["kv_cache"]), int(r["latency(ns)"])
            except (KeyError, TypeError, ValueError) as e:
                raise SystemExit(f"{path}:{line}: a layer row needs integer input, kv_cache and latency(ns) ({e!r})")
            if kv != 0:
                continue
            if m <= 0 or ns <= 0:
                raise SystemExit(f"{path}:{line}: input and latency(ns) must be positive ({m}, {ns})")
            rows.append({"gpu": gpu, "model": model, "tp": tp, "op": op, "M": m, "t": ns * 1e-9})
    return rows


def v0_gemms(root):
    """GEMM rows of LLMServingSim's v0 per-layer tables under `root` (`v0_layers`): each
    `nn.Linear` of 2-D tokens is one cuBLAS GEMM (with a bias on Phi-mini-MoE's attention
    projections). Its norms and rotary are Hugging Face's unfused eager ops (several kernels
    each) and its attention FlashAttention-2's varlen kernel (`v0_attention`), so neither is a
    GEMM row. Same row format as `gemms`, `src` "lss-v0"."""
    rows = []
    for r in v0_layers(root):
        shapes = v0_shapes(r["model"], r["tp"])
        if r["op"] in shapes:
            k, n = shapes[r["op"]]
            rows.append({**r, "src": "lss-v0", "K": k, "N": n, "fp8": False})
    if not rows:
        raise SystemExit(f"{root}: no perf_models/<GPU>/<org>/<model>/tp<N>/layers.csv of a GPU and model "
                         f"the v0 reader knows ({', '.join(sorted(GPUS) + sorted(V0_GPUS))}; {', '.join(V0_MODELS)})")
    return rows


def v0_attention(root):
    """Rows of the v0 `attention.csv` files (`v0_files`): `profiler/v0/profiler/attention/
    attention_profiler.py` times the `flash_attn` package's `flash_attn_varlen_func`
    (FlashAttention-2, FP16, causal; Kineto kernel time, median of 30) on `kv_cache_size` K and
    V rows split evenly over `batch_size` sequences: a prefill row is one sequence's chunk of
    `prefill_chunk_size` queries over `kv_cache_size` keys (the chunk's own included: prefix =
    kv - chunk), a decode row `batch_size` sequences of one query over kv / batch keys each (the
    new token's included; the profiler drops the remainder). The cache is contiguous, not
    paged, and nothing writes it. Rows: gpu, model, tp, kind, t, and chunk and prefix, or batch
    and context (keys per sequence less the new token)."""
    rows = []
    for gpu, model, tp, path in v0_files(root, "attention.csv"):
        for line, r in enumerate(csv.DictReader(open(path)), start=2):
            try:
                bs, pc, kv = (int(r[k]) for k in ("batch_size", "prefill_chunk_size", "kv_cache_size"))
                prefill = r["is_prefill"] == "True"
                ms = float(r[f"time_stats.attn_{'prefill' if prefill else 'decode'}.median"])
            except (KeyError, TypeError, ValueError) as e:
                raise SystemExit(f"{path}:{line}: an attention row needs integer batch_size, prefill_chunk_size and "
                                 f"kv_cache_size and its kind's median ({e!r})")
            row = {"gpu": gpu, "model": model, "tp": tp, "t": ms * 1e-3}
            if prefill and bs == 1 and kv >= pc > 0:
                rows.append(dict(row, kind="prefill", chunk=pc, prefix=kv - pc))
            elif not prefill and pc == 0 and kv >= bs > 0:
                rows.append(dict(row, kind="decode", batch=bs, context=kv // bs - 1))
    return rows
