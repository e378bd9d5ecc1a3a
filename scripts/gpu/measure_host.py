#!/usr/bin/env python3
"""Measures, on one NVIDIA GPU and its host, the constants of blis-cosim's host model and the
kernel times its roofline predicts (issue 28).

Usage: python3 scripts/gpu/measure_host.py OUT_DIR [SECTION ...]
Writes OUT_DIR/results.json after every section (rewritten whole each time) and prints
progress. Every section runs in its own try/except: an error is recorded under "errors" and
the next section runs. A global time guard (env BUDGET_S, default 330 s) stops starting new
sections. Needs torch (CUDA), and optionally triton, cupy and nvcc.

Methods (all times are medians over repeats, after warm-up):
- host issue cost of a call: a sleep kernel (torch.cuda._sleep) first fills the GPU for
  ~20 ms, then N calls are issued and timed on the host (time.perf_counter around the loop);
  the GPU is still busy when the loop ends (checked with an event), so the time is the host's
  alone: Python, the framework's dispatch and the driver's launch.
- steady wall per call: N calls back to back, synchronize, divide (max of host and GPU).
- event wall per call (Frontier's CUDA_EVENT style): events recorded around one call,
  synchronize, elapsed.
- kernel-only GPU time: the calls captured in a CUDA graph, replayed between two CUDA events;
  weights and KV caches rotate over copies larger than L2 so that no read hits the cache.
- the raw-launch and graph-launch costs without Python: scripts/gpu/launch_bench.cu.
"""
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback

T0 = time.time()
BUDGET_S = float(os.environ.get("BUDGET_S", "330"))
OUT = sys.argv[1] if len(sys.argv) > 1 else "."
ONLY = set(sys.argv[2:])
HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = {"meta": {}, "errors": {}, "skipped": [], "seconds": {}}

try:
    import torch
    import torch.nn.functional as F
except Exception:  # the CPU machine: syntax and the driver logic only
    torch = None
    F = None


def log(*a):
    print(f"[{time.time() - T0:6.1f}s]", *a, flush=True)


def save():
    os.makedirs(OUT, exist_ok=True)
    tmp = os.path.join(OUT, "results.json.tmp")
    with open(tmp, "w") as f:
        json.dump(RESULTS, f, indent=1, sort_keys=True)
    os.replace(tmp, os.path.join(OUT, "results.json"))


def section(name, fn):
    if ONLY and name not in ONLY:
        return
    if not ONLY and name in SECOND_PASS:
        return
    if time.time() - T0 > BUDGET_S:
        RESULTS["skipped"].append(name)
        log("skip", name, "(time guard)")
        save()
        return
    log("start", name)
    t = time.time()
    try:
        RESULTS[name] = fn()
    except Exception:
        RESULTS["errors"][name] = traceback.format_exc()[-3000:]
        log("ERROR in", name, traceback.format_exc()[-800:])
    RESULTS["seconds"][name] = round(time.time() - t, 1)
    if torch is not None and torch.cuda.is_available():
        try:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        except Exception:
            pass
    save()
    log("done", name, f"{RESULTS['seconds'][name]} s")


def med(xs):
    return statistics.median(xs)


def r1(x):
    return None if x is None else round(float(x), 1)


def r3(x):
    return None if x is None else round(float(x), 3)


# ---------------------------------------------------------------- timing helpers
SLEEP_CYCLES_PER_MS = None


def calibrate_sleep():
    global SLEEP_CYCLES_PER_MS
    torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(5):
        e0.record()
        torch.cuda._sleep(2_000_000)
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    SLEEP_CYCLES_PER_MS = 2_000_000 / med(ts)
    return SLEEP_CYCLES_PER_MS


def gpu_sleep(ms):
    torch.cuda._sleep(int(ms * SLEEP_CYCLES_PER_MS))


def host_issue_ns(fn, n=200, reps=15, sleep_ms=25.0, warm=20):
    """Host time per call with the GPU busy (see the module doc); also whether the GPU stayed
    busy through the timed loop in every repetition."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts, busy = [], 0
    for _ in range(reps):
        gpu_sleep(sleep_ms)
        mark = torch.cuda.Event()
        mark.record()
        t = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        busy += 0 if mark.query() else 1
        ts.append((t1 - t) / n * 1e9)
        torch.cuda.synchronize()
    return {"host_ns": r1(med(ts)), "host_ns_min": r1(min(ts)), "gpu_busy_reps": busy, "reps": reps, "calls": n}


def steady_wall_ns(fn, n=200, reps=7):
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t) / n * 1e9)
    return r1(med(ts))


def event_wall_ns(fn, reps=50):
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(reps):
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1) * 1e6)
    return r1(med(ts))


def graph_gpu_ns(calls, reps=10, warm=2):
    """Kernel-only GPU time per call of `calls` (a list of callables), ns: captured once in a
    CUDA graph, replayed between events."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warm):
            for c in calls:
                c()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in calls:
            c()
    g.replay()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(reps):
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1) * 1e6 / len(calls))
    del g
    return med(ts)


def count_kernels(fn):
    """CUDA kernels (and memcpy/memset) one call of `fn` runs, by torch.profiler, with their
    GPU time; None if the profiler fails."""
    try:
        from torch.profiler import profile, ProfilerActivity
        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        kernels = []
        for e in prof.events():
            dt = getattr(e, "device_type", None)
            if dt is not None and "CUDA" in str(dt):
                try:
                    dur = e.time_range.elapsed_us()
                except Exception:  # noqa: BLE001
                    dur = getattr(e, "device_time_total", 0.0)
                kernels.append((e.name[:80], float(dur)))
        return kernels
    except Exception as ex:  # noqa: BLE001
        return [("profiler-error: " + repr(ex)[:200], 0.0)]


def rotations(bytes_each, total=160e6, cap=64):
    return int(min(cap, max(1, math.ceil(total / max(bytes_each, 1)))))


# ---------------------------------------------------------------- sections
def s_meta():
    m = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": getattr(torch, "__version__", None),
        "cuda_runtime": getattr(torch.version, "cuda", None) if torch else None,
        "cpu_count": os.cpu_count(),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(T0)),
    }
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                m["cpu_model"] = line.split(":", 1)[1].strip()
                break
    except Exception:
        pass
    try:
        q = "name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,memory.total"
        m["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", f"--query-gpu={q}", "--format=csv"], capture_output=True, text=True, timeout=20
        ).stdout.strip()
    except Exception as ex:  # noqa: BLE001
        m["nvidia_smi"] = repr(ex)
    p = torch.cuda.get_device_properties(0)
    m["device"] = p.name
    m["sms"] = p.multi_processor_count
    m["memory_gib"] = round(p.total_memory / 2**30, 1)
    m["l2_bytes"] = getattr(p, "L2_cache_size", None)
    try:
        import triton

        m["triton"] = triton.__version__
    except Exception:
        m["triton"] = None
    m["sleep_cycles_per_ms"] = round(calibrate_sleep())
    return m


def s_ceilings():
    out = {}
    n = 1 << 29  # 1 GiB of bf16
    a = torch.empty(n, dtype=torch.bfloat16, device="cuda").normal_()
    b = torch.empty_like(a)
    t = graph_gpu_ns([lambda: b.copy_(a)] * 5, reps=5)
    out["copy_gbps_read_plus_write"] = r1(2 * n * 2 / t)
    del a, b
    x = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    y = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    o = torch.empty_like(x)
    t = graph_gpu_ns([lambda: torch.mm(x, y, out=o)] * 5, reps=5)
    out["mm8192_tflops"] = r1(2 * 8192**3 / t / 1e3)
    return out


def s_launch_cpp():
    src = os.path.join(HERE, "launch_bench.cu")
    exe = "/tmp/launch_bench"
    cp = subprocess.run(["nvcc", "-O2", "-arch=sm_90", "-o", exe, src], capture_output=True, text=True, timeout=120)
    if cp.returncode != 0:
        raise RuntimeError("nvcc: " + cp.stderr[-1500:])
    run = subprocess.run([exe], capture_output=True, text=True, timeout=120)
    res = json.loads(run.stdout.strip().splitlines()[-1])
    g = res.get("graphs", [])
    if len(g) >= 2:
        a, b = g[0], g[-1]
        res["graph_host_per_node_ns"] = r3((b["host_ns"] - a["host_ns"]) / (b["kernels"] - a["kernels"]))
        res["graph_gpu_per_node_ns"] = r1((b["gpu_ns"] - a["gpu_ns"]) / (b["kernels"] - a["kernels"]))
    return res


def s_host_eager():
    out = {}
    d = "cuda"
    a = torch.randn(1, 4096, dtype=torch.bfloat16, device=d)
    b = torch.randn(1, 4096, dtype=torch.bfloat16, device=d)
    w = torch.randn(4096, dtype=torch.bfloat16, device=d)
    s1 = torch.randn(16, 256, dtype=torch.bfloat16, device=d)
    s2 = torch.randn(256, 256, dtype=torch.bfloat16, device=d)
    gemv_w = torch.randn(4096, 4096, dtype=torch.bfloat16, device=d)
    o = torch.empty_like(a)

    def hf_rmsnorm():  # transformers' LlamaRMSNorm, op for op
        h = a.to(torch.float32)
        v = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(v + 1e-6)
        return w * h.to(torch.bfloat16)

    ops = {
        "add": lambda: a + b,
        "mul": lambda: a * b,
        "add_out": lambda: torch.add(a, b, out=o),
        "silu": lambda: F.silu(a),
        "rms_norm_fused": lambda: F.rms_norm(a, (4096,), w, 1e-6),
        "rms_norm_hf_sequence": hf_rmsnorm,
        "matmul_16x256x256": lambda: s1 @ s2,
        "linear_1x4096x4096": lambda: F.linear(a, gemv_w),
    }
    for name, fn in ops.items():
        try:
            r = host_issue_ns(fn)
            ks = count_kernels(fn)
            r["kernels"] = len(ks)
            r["kernel_gpu_ns"] = [r1(k[1] * 1e3) for k in ks]
            r["steady_wall_ns"] = steady_wall_ns(fn)
            r["event_wall_ns"] = event_wall_ns(fn)
            if ks and len(ks) > 0:
                r["host_ns_per_kernel"] = r1(r["host_ns"] / len(ks))
            out[name] = r
            log("  eager", name, r["host_ns"], "ns/call,", len(ks), "kernels")
        except Exception:
            out[name] = {"error": traceback.format_exc()[-1000:]}
    return out


def triton_add_launch():
    """A call that launches one small Triton kernel (an elementwise add of 4096 floats)."""
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

    x = torch.randn(4096, device="cuda")
    y = torch.randn(4096, device="cuda")
    o = torch.empty_like(x)
    return lambda: add_kernel[(4,)](x, y, o, 4096, BLOCK=1024)


def s_host_triton():
    fn = triton_add_launch()
    r = host_issue_ns(fn)
    r["steady_wall_ns"] = steady_wall_ns(fn)
    r["event_wall_ns"] = event_wall_ns(fn)
    r["gpu_ns_graph"] = r1(graph_gpu_ns([fn] * 20))
    return r


def s_host_graph():
    x = torch.zeros(256, device="cuda")
    out = []
    for k in (1, 10, 100, 1000):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                x.add_(1.0)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(k):
                x.add_(1.0)
        for _ in range(3):
            g.replay()
        torch.cuda.synchronize()
        h = host_issue_ns(g.replay, n=20, reps=15, sleep_ms=25.0, warm=3)
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ts = []
        for _ in range(10):
            gpu_sleep(2.0)
            e0.record()
            for _ in range(10):
                g.replay()
            e1.record()
            e1.synchronize()
            ts.append(e0.elapsed_time(e1) * 1e6 / 10)
        out.append({"kernels": k, "replay_host_ns": h["host_ns"], "gpu_busy_reps": h["gpu_busy_reps"], "replay_gpu_ns": r1(med(ts))})
        log("  graph", k, out[-1])
        del g
    a, b = out[0], out[-1]
    return {
        "graphs": out,
        "host_per_node_ns": r3((b["replay_host_ns"] - a["replay_host_ns"]) / (b["kernels"] - a["kernels"])),
        "gpu_per_node_ns": r1((b["replay_gpu_ns"] - a["replay_gpu_ns"]) / (b["kernels"] - a["kernels"])),
    }


def s_host_cupy():
    import cupy as cp

    k = cp.RawKernel(r'extern "C" __global__ void empty_k() {}', "empty_k")
    fn = lambda: k((1,), (1,), ())  # noqa: E731
    fn()
    cp.cuda.Device().synchronize()
    return host_issue_ns(fn)


def s_host_compile():
    import torch._dynamo

    torch._dynamo.config.cache_size_limit = 64
    ws = [torch.randn(512, 512, dtype=torch.bfloat16, device="cuda") / 20 for _ in range(8)]
    x = torch.randn(4, 512, dtype=torch.bfloat16, device="cuda")

    def make(n):
        def f(h):
            for i in range(n):
                h = h * torch.rsqrt(h.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(h.dtype)
                h = F.silu(h @ ws[i])
            return h

        return f

    out = {}
    for n in (1, 8):
        t = time.time()
        cf = torch.compile(make(n))
        cf(x)
        cf(x)
        torch.cuda.synchronize()
        compile_s = time.time() - t
        fn = lambda: cf(x)  # noqa: E731
        r = host_issue_ns(fn, n=100)
        ks = count_kernels(fn)
        r["kernels"] = len(ks)
        r["kernel_names"] = sorted({k[0][:40] for k in ks})
        r["compile_s"] = round(compile_s, 1)
        r["steady_wall_ns"] = steady_wall_ns(fn)
        out[f"blocks_{n}"] = r
        log("  compiled", n, r["host_ns"], "ns/call,", len(ks), "kernels")
    a, b = out["blocks_1"], out["blocks_8"]
    if b["kernels"] > a["kernels"]:
        out["host_ns_per_kernel_marginal"] = r1((b["host_ns"] - a["host_ns"]) / (b["kernels"] - a["kernels"]))
        out["host_ns_per_call_fixed"] = r1(a["host_ns"] - a["kernels"] * out["host_ns_per_kernel_marginal"])
    return out


# Llama-3.1-8B's linear layers: (name, K, N).
LLAMA_GEMMS = [
    ("qkv_proj", 4096, 6144),
    ("o_proj", 4096, 4096),
    ("gate_up_proj", 4096, 28672),
    ("down_proj", 14336, 4096),
    ("lm_head", 4096, 128256),
]
GEMM_M = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]


def s_gemm():
    out = []
    for name, K, N in LLAMA_GEMMS:
        wbytes = K * N * 2
        copies = rotations(wbytes)
        ws = [torch.randn(N, K, dtype=torch.bfloat16, device="cuda") for _ in range(copies)]
        for M in GEMM_M:
            if name == "lm_head" and M > 2048:
                continue  # the head sees one row per sequence
            if time.time() - T0 > BUDGET_S:
                break
            x = torch.randn(M, K, dtype=torch.bfloat16, device="cuda")
            o = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
            calls = [(lambda w=w: torch.mm(x, w.t(), out=o)) for w in ws]
            reps_calls = calls * max(1, math.ceil(4 / len(calls)))
            t = graph_gpu_ns(reps_calls, reps=5)
            flops = 2.0 * M * K * N
            byts = (K * N + M * K + M * N) * 2.0
            out.append({"op": name, "M": M, "K": K, "N": N, "gpu_ns": r1(t), "tflops": r3(flops / t / 1e3), "gbps": r1(byts / t)})
            del x, o
        log("  gemm", name, [(r["M"], r["gpu_ns"]) for r in out if r["op"] == name])
        del ws
        torch.cuda.empty_cache()
    return out


def sdpa_backend_ctx(name):
    from torch.nn.attention import sdpa_kernel, SDPBackend

    return sdpa_kernel({"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                        "cudnn": SDPBackend.CUDNN_ATTENTION}[name])


def s_attention():
    H, KVH, D = 32, 8, 128
    out = {"prefill": [], "decode": []}
    # Prefill, causal, batch 1, GQA through enable_gqa (else K/V repeated to 32 heads).
    for L in (128, 256, 512, 1024, 2048, 4096, 8192):
        q = torch.randn(1, H, L, D, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(1, KVH, L, D, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(1, KVH, L, D, dtype=torch.bfloat16, device="cuda")
        row = {"L": L}
        for backend in ("flash", "cudnn", "efficient"):
            for gqa in ("enable_gqa", "repeat"):
                try:
                    if gqa == "enable_gqa":
                        fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # noqa: E731
                    else:
                        kr, vr = k.repeat_interleave(H // KVH, 1), v.repeat_interleave(H // KVH, 1)
                        fn = lambda kr=kr, vr=vr: F.scaled_dot_product_attention(q, kr, vr, is_causal=True)  # noqa: E731
                    with sdpa_backend_ctx(backend):
                        t = graph_gpu_ns([fn] * 4, reps=5)
                    row[f"{backend}_{gqa}_ns"] = r1(t)
                    break
                except Exception as ex:  # noqa: BLE001
                    row[f"{backend}_{gqa}_error"] = repr(ex)[:160]
        flops = 4.0 * H * D * L * (L + 1) / 2.0
        row["causal_flops"] = flops
        out["prefill"].append(row)
        del q, k, v
    log("  prefill", [(r["L"], r.get("flash_enable_gqa_ns") or r.get("flash_repeat_ns")) for r in out["prefill"]])
    # Decode: one query token per sequence; the 4 query heads of a KV head packed as 4 query
    # rows (exact for decode, as FlashAttention's pack-GQA does), non-causal.
    for B in (1, 4, 16, 64, 256):
        for KV in (512, 2048, 8192):
            if time.time() - T0 > BUDGET_S:
                break
            kvb = B * KVH * KV * D * 2 * 2
            copies = rotations(kvb, total=160e6, cap=16)
            caches = [(torch.randn(B, KVH, KV, D, dtype=torch.bfloat16, device="cuda"),
                       torch.randn(B, KVH, KV, D, dtype=torch.bfloat16, device="cuda")) for _ in range(copies)]
            q = torch.randn(B, KVH, H // KVH, D, dtype=torch.bfloat16, device="cuda")
            row = {"batch": B, "kv": KV, "kv_bytes": kvb}
            for backend in ("flash", "cudnn", "efficient"):
                try:
                    calls = [(lambda c=c: F.scaled_dot_product_attention(q, c[0], c[1])) for c in caches]
                    with sdpa_backend_ctx(backend):
                        t = graph_gpu_ns(calls * max(1, math.ceil(4 / len(calls))), reps=5)
                    row[f"{backend}_ns"] = r1(t)
                    row[f"{backend}_gbps"] = r1(kvb / t)
                except Exception as ex:  # noqa: BLE001
                    row[f"{backend}_error"] = repr(ex)[:160]
            out["decode"].append(row)
            del caches, q
        torch.cuda.empty_cache()
    log("  decode", [(r["batch"], r["kv"], r.get("flash_ns")) for r in out["decode"]])
    return out


def s_moe():
    E, TOP, Hd, I = 128, 8, 2048, 768  # Qwen3-30B-A3B
    out = {"has_grouped_mm": hasattr(torch, "_grouped_mm"), "rows": []}
    ebytes = 3 * Hd * I * 2
    w13 = torch.randn(E, 2 * I, Hd, dtype=torch.bfloat16, device="cuda") / 40  # (E, N, K)
    w2 = torch.randn(E, Hd, I, dtype=torch.bfloat16, device="cuda") / 30
    g = torch.Generator(device="cpu").manual_seed(0)
    variant = None
    for T in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096):
        if time.time() - T0 > BUDGET_S:
            break
        idx = torch.stack([torch.randperm(E, generator=g)[:TOP] for _ in range(T)])
        counts = torch.bincount(idx.flatten(), minlength=E)
        active = int((counts > 0).sum())
        rows = T * TOP
        row = {"tokens": T, "active_experts": active, "routed_rows": rows,
               "max_rows_per_expert": int(counts.max()), "weight_bytes_active": active * ebytes}
        x = torch.randn(rows, Hd, dtype=torch.bfloat16, device="cuda")
        if out["has_grouped_mm"]:
            for name, align in (("grouped_mm", 1), ("grouped_mm_pad16", 16)):
                if variant is not None and variant != name:
                    continue
                try:
                    c = ((counts + align - 1) // align) * align
                    offs = torch.cumsum(c, 0).to(torch.int32).cuda()
                    xa = torch.randn(int(c.sum()), Hd, dtype=torch.bfloat16, device="cuda")

                    def fn(xa=xa, offs=offs):
                        h = torch._grouped_mm(xa, w13.transpose(-2, -1), offs=offs)
                        h = F.silu(h[:, :I]) * h[:, I:]
                        return torch._grouped_mm(h, w2.transpose(-2, -1), offs=offs)

                    t = graph_gpu_ns([fn] * 4, reps=5)
                    row[name + "_ns"] = r1(t)
                    row[name + "_gbps_active"] = r1(active * ebytes / t)
                    row[name + "_tflops"] = r3(2.0 * rows * 3 * Hd * I / t / 1e3)
                    variant = name
                    break
                except Exception as ex:  # noqa: BLE001
                    row[name + "_error"] = repr(ex)[:200]
        if T <= 256:  # a loop of per-expert matmuls over the active experts (upper bound)
            try:
                act = [int(e) for e in torch.nonzero(counts).flatten()]
                xs = {e: torch.randn(int(counts[e]), Hd, dtype=torch.bfloat16, device="cuda") for e in act}

                def loop():
                    for e in act:
                        h = F.linear(xs[e], w13[e])
                        F.linear(F.silu(h[:, :I]) * h[:, I:], w2[e])

                row["loop_ns"] = r1(graph_gpu_ns([loop], reps=5))
            except Exception as ex:  # noqa: BLE001
                row["loop_error"] = repr(ex)[:200]
        out["rows"].append(row)
        del x
    log("  moe", [(r["tokens"], r.get("grouped_mm_ns") or r.get("grouped_mm_pad16_ns"), r.get("loop_ns")) for r in out["rows"]])
    return out


class Layer:
    """One Llama-3.1-8B decoder layer from torch ops, as vLLM runs it unfused: RMSNorm, QKV,
    RoPE, SDPA (flash), O, residual, RMSNorm, gate_up, SiLU-mul, down, residual."""

    def __init__(self):
        h, i, self.H, self.KVH, self.D = 4096, 14336, 32, 8, 128
        mk = lambda *s: torch.randn(*s, dtype=torch.bfloat16, device="cuda") / math.sqrt(s[-1])  # noqa: E731
        self.wqkv, self.wo = mk(6144, h), mk(h, 4096)
        self.wgu, self.wd = mk(2 * i, h), mk(h, i)
        self.n1 = torch.ones(h, dtype=torch.bfloat16, device="cuda")
        self.n2 = torch.ones(h, dtype=torch.bfloat16, device="cuda")
        self.i = i
        self.gqa_repeat = False
        inv = 1.0 / (500000.0 ** (torch.arange(0, 128, 2, device="cuda").float() / 128))
        pos = torch.arange(16384, device="cuda").float()
        fr = torch.outer(pos, inv)
        self.cos = torch.cat([fr, fr], -1).cos().to(torch.bfloat16)
        self.sin = torch.cat([fr, fr], -1).sin().to(torch.bfloat16)

    def rope(self, x, cos, sin):
        x1, x2 = x[..., :64], x[..., 64:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    def mlp_and_o(self, x, attn, res):
        h = F.linear(attn, self.wo) + res
        y = F.rms_norm(h, (4096,), self.n2, 1e-5)
        gu = F.linear(y, self.wgu)
        y = F.silu(gu[:, : self.i]) * gu[:, self.i:]
        return F.linear(y, self.wd) + h

    def prefill(self, x, pos):
        T = x.shape[0]
        y = F.rms_norm(x, (4096,), self.n1, 1e-5)
        qkv = F.linear(y, self.wqkv)
        q = qkv[:, :4096].view(T, self.H, self.D).transpose(0, 1)
        k = qkv[:, 4096:5120].view(T, self.KVH, self.D).transpose(0, 1)
        v = qkv[:, 5120:].view(T, self.KVH, self.D).transpose(0, 1)
        cos, sin = self.cos[pos][None], self.sin[pos][None]
        q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
        if self.gqa_repeat:
            k, v = k.repeat_interleave(self.H // self.KVH, 0), v.repeat_interleave(self.H // self.KVH, 0)
            a = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True)
        else:
            a = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True, enable_gqa=True)
        a = a[0].transpose(0, 1).reshape(T, 4096)
        return self.mlp_and_o(y, a, x)

    def decode(self, x, pos, kc, vc):
        B = x.shape[0]
        y = F.rms_norm(x, (4096,), self.n1, 1e-5)
        qkv = F.linear(y, self.wqkv)
        q = qkv[:, :4096].view(B, self.H, self.D)
        k = qkv[:, 4096:5120].view(B, self.KVH, self.D)
        v = qkv[:, 5120:].view(B, self.KVH, self.D)
        cos, sin = self.cos[pos][:, None], self.sin[pos][:, None]
        q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
        kc[:, :, -1] = k
        vc[:, :, -1] = v
        a = F.scaled_dot_product_attention(q.view(B, self.KVH, self.H // self.KVH, self.D), kc, vc)
        return self.mlp_and_o(y, a.reshape(B, 4096), x)


def s_layer():
    from torch.nn.attention import sdpa_kernel, SDPBackend

    layer = Layer()
    out = {"prefill": [], "decode": []}
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
        for T in (128, 512, 1024, 2048, 4096):
            if time.time() - T0 > BUDGET_S:
                break
            x = torch.randn(T, 4096, dtype=torch.bfloat16, device="cuda")
            pos = torch.arange(T, device="cuda")
            fn = lambda: layer.prefill(x, pos)  # noqa: E731
            try:
                fn()
            except Exception:  # noqa: BLE001 (no SDPA kernel takes enable_gqa)
                layer.gqa_repeat = True
                fn()
            row = {"tokens": T, "gqa_repeat": layer.gqa_repeat}
            row["graph_gpu_ns"] = r1(graph_gpu_ns([fn] * 2, reps=5))
            row["steady_wall_ns"] = steady_wall_ns(fn, n=10, reps=5)
            row["host_issue_ns"] = host_issue_ns(fn, n=10, reps=7, sleep_ms=25.0, warm=3)["host_ns"]
            ks = count_kernels(fn)
            row["kernels"] = len(ks)
            row["kernel_sum_ns"] = r1(sum(k[1] for k in ks) * 1e3)
            row["kernel_list"] = [[k[0][:60], r1(k[1] * 1e3)] for k in ks]
            out["prefill"].append(row)
            log("  layer prefill", T, {k: v for k, v in row.items() if k != "kernel_list"})
        for B in (1, 8, 32, 128):
            if time.time() - T0 > BUDGET_S:
                break
            KV = 1024
            x = torch.randn(B, 4096, dtype=torch.bfloat16, device="cuda")
            pos = torch.full((B,), KV - 1, device="cuda")
            kc = torch.randn(B, 8, KV, 128, dtype=torch.bfloat16, device="cuda")
            vc = torch.randn(B, 8, KV, 128, dtype=torch.bfloat16, device="cuda")
            fn = lambda: layer.decode(x, pos, kc, vc)  # noqa: E731
            row = {"batch": B, "kv": KV}
            row["graph_gpu_ns"] = r1(graph_gpu_ns([fn] * 2, reps=5))
            row["steady_wall_ns"] = steady_wall_ns(fn, n=10, reps=5)
            row["host_issue_ns"] = host_issue_ns(fn, n=10, reps=7, sleep_ms=25.0, warm=3)["host_ns"]
            ks = count_kernels(fn)
            row["kernels"] = len(ks)
            row["kernel_sum_ns"] = r1(sum(k[1] for k in ks) * 1e3)
            row["kernel_list"] = [[k[0][:60], r1(k[1] * 1e3)] for k in ks]
            out["decode"].append(row)
            log("  layer decode", B, {k: v for k, v in row.items() if k != "kernel_list"})
    return out


# ---------------------------------------------------------------- second pass (host, repeated)
# The first pass issued 200 calls of an 8-kernel sequence (1,600 launches) behind the sleep:
# more than the launch queue holds, so the host blocked on the GPU. These repeat the host
# measurements three rounds each with at most ~400 launches per timed loop.
def rounds(fn, kernels, rounds_=3, reps=11, sleep_ms=25.0, warm=10):
    n = max(5, min(200, 400 // max(1, kernels)))
    rs = [host_issue_ns(fn, n=n, reps=reps, sleep_ms=sleep_ms, warm=warm) for _ in range(rounds_)]
    hs = [r["host_ns"] for r in rs]
    return {"host_ns": r1(med(hs)), "rounds_ns": hs, "calls": n, "kernels": kernels,
            "host_ns_per_kernel": r1(med(hs) / max(1, kernels)), "gpu_busy_reps": [r["gpu_busy_reps"] for r in rs]}


def s_host_repeat():
    out = {}
    d = "cuda"
    a = torch.randn(1, 4096, dtype=torch.bfloat16, device=d)
    b = torch.randn(1, 4096, dtype=torch.bfloat16, device=d)
    w = torch.randn(4096, dtype=torch.bfloat16, device=d)
    s1 = torch.randn(16, 256, dtype=torch.bfloat16, device=d)
    s2 = torch.randn(256, 256, dtype=torch.bfloat16, device=d)
    gw = torch.randn(4096, 4096, dtype=torch.bfloat16, device=d)

    def hf_rmsnorm():
        h = a.to(torch.float32)
        v = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(v + 1e-6)
        return w * h.to(torch.bfloat16)

    ops = {"add": (lambda: a + b, 1), "mul": (lambda: a * b, 1), "silu": (lambda: F.silu(a), 1),
           "rms_norm_fused": (lambda: F.rms_norm(a, (4096,), w, 1e-6), 1),
           "rms_norm_hf_sequence": (hf_rmsnorm, 8), "matmul_16x256x256": (lambda: s1 @ s2, 1),
           "linear_1x4096x4096": (lambda: F.linear(a, gw), 2)}
    for name, (fn, k) in ops.items():
        out[name] = rounds(fn, k)
        log("  eager", name, out[name]["rounds_ns"])
    # The decoder layer of s_layer (torch ops), host issue per layer and per kernel.
    from torch.nn.attention import sdpa_kernel, SDPBackend

    layer = Layer()
    kernels = {"prefill": {512: 25, 1024: 25, 2048: 26}, "decode": {1: 28, 8: 28, 32: 28, 128: 27}}
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
        for T, k in kernels["prefill"].items():
            x = torch.randn(T, 4096, dtype=torch.bfloat16, device=d)
            pos = torch.arange(T, device=d)
            out[f"layer_prefill_{T}"] = rounds(lambda: layer.prefill(x, pos), k, reps=7, sleep_ms=40.0, warm=3)
            log("  layer prefill", T, out[f"layer_prefill_{T}"]["rounds_ns"])
        for B, k in kernels["decode"].items():
            x = torch.randn(B, 4096, dtype=torch.bfloat16, device=d)
            pos = torch.full((B,), 1023, device=d)
            kc = torch.randn(B, 8, 1024, 128, dtype=torch.bfloat16, device=d)
            vc = torch.randn(B, 8, 1024, 128, dtype=torch.bfloat16, device=d)
            out[f"layer_decode_{B}"] = rounds(lambda: layer.decode(x, pos, kc, vc), k, reps=7, sleep_ms=40.0, warm=3)
            log("  layer decode", B, out[f"layer_decode_{B}"]["rounds_ns"])
    return out


def s_host_triton_repeat():
    return rounds(triton_add_launch(), 1)


def s_host_graph_repeat():
    x = torch.zeros(256, device="cuda")
    graphs = {}
    for k in (1, 10, 100, 1000):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            x.add_(1.0)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(k):
                x.add_(1.0)
        for _ in range(3):
            g.replay()
        torch.cuda.synchronize()
        graphs[k] = g
    out = {"single": [], "queued20": []}
    for k, g in graphs.items():
        one = [host_issue_ns(g.replay, n=1, reps=31, sleep_ms=3.0, warm=3)["host_ns"] for _ in range(3)]
        many = [host_issue_ns(g.replay, n=20, reps=11, sleep_ms=60.0, warm=3)["host_ns"] for _ in range(3)]
        out["single"].append({"kernels": k, "host_ns": r1(med(one)), "rounds_ns": one})
        out["queued20"].append({"kernels": k, "host_ns": r1(med(many)), "rounds_ns": many})
        log("  graph", k, one, many)
    # vLLM's piecewise mode: one graph per piece, 33 different graphs (Llama-3.1-8B: 32
    # attention splits) of 10 kernels, replayed in sequence.
    pieces = []
    for _ in range(33):
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            x.add_(1.0)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            for _ in range(10):
                x.add_(1.0)
        g.replay()
        pieces.append(g)
    torch.cuda.synchronize()

    def seq():
        for g in pieces:
            g.replay()

    r = [host_issue_ns(seq, n=1, reps=21, sleep_ms=5.0, warm=3)["host_ns"] for _ in range(3)]
    out["pieces33_per_replay_ns"] = r1(med(r) / 33)
    out["pieces33_rounds_ns"] = r
    return out


def s_host_compile_repeat():
    ws = [torch.randn(512, 512, dtype=torch.bfloat16, device="cuda") / 20 for _ in range(8)]
    x = torch.randn(4, 512, dtype=torch.bfloat16, device="cuda")

    def make(n):
        def f(h):
            for i in range(n):
                h = h * torch.rsqrt(h.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(h.dtype)
                h = F.silu(h @ ws[i])
            return h

        return f

    out = {}
    for n, k in ((1, 3), (4, 9), (8, 17)):
        cf = torch.compile(make(n))
        cf(x)
        cf(x)
        torch.cuda.synchronize()
        out[f"blocks_{n}"] = rounds(lambda: cf(x), k)
        log("  compiled", n, out[f"blocks_{n}"]["rounds_ns"])
    xs = [out[f"blocks_{n}"]["kernels"] for n in (1, 4, 8)]
    ys = [out[f"blocks_{n}"]["host_ns"] for n in (1, 4, 8)]
    mx, my = sum(xs) / 3, sum(ys) / 3
    slope = sum((a - mx) * (b - my) for a, b in zip(xs, ys)) / sum((a - mx) ** 2 for a in xs)
    out["host_ns_per_kernel_marginal"] = r1(slope)
    out["host_ns_per_call_fixed"] = r1(my - slope * mx)
    return out


def s_ceilings_warm():
    n = 1 << 29
    a = torch.empty(n, dtype=torch.bfloat16, device="cuda").normal_()
    b = torch.empty_like(a)
    for _ in range(20):
        b.copy_(a)
    t = graph_gpu_ns([lambda: b.copy_(a)] * 10, reps=10, warm=5)
    out = {"copy_gbps_read_plus_write": r1(2 * n * 2 / t)}
    del a, b
    x = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    y = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    o = torch.empty_like(x)
    for _ in range(10):
        torch.mm(x, y, out=o)
    t = graph_gpu_ns([lambda: torch.mm(x, y, out=o)] * 10, reps=10, warm=3)
    out["mm8192_tflops"] = r1(2 * 8192**3 / t / 1e3)
    return out


SECTIONS = [
    ("meta", s_meta),
    ("ceilings", s_ceilings),
    ("launch_cpp", s_launch_cpp),
    ("host_eager", s_host_eager),
    ("host_triton", s_host_triton),
    ("host_graph", s_host_graph),
    ("host_cupy", s_host_cupy),
    ("gemm", s_gemm),
    ("attention", s_attention),
    ("moe", s_moe),
    ("layer", s_layer),
    ("host_compile", s_host_compile),
    # Second pass (run by name: python3 measure_host.py OUT meta host_repeat ...).
    ("host_repeat", s_host_repeat),
    ("host_triton_repeat", s_host_triton_repeat),
    ("host_graph_repeat", s_host_graph_repeat),
    ("host_compile_repeat", s_host_compile_repeat),
    ("ceilings_warm", s_ceilings_warm),
]
SECOND_PASS = {"host_repeat", "host_triton_repeat", "host_graph_repeat", "host_compile_repeat", "ceilings_warm"}


def main():
    if torch is None or not torch.cuda.is_available():
        RESULTS["errors"]["setup"] = "no torch with CUDA here"
        save()
        log("no CUDA: nothing measured")
        return 2
    if "meta" not in ONLY and ONLY:
        calibrate_sleep()
    for name, fn in SECTIONS:
        section(name, fn)
    RESULTS["meta"]["total_s"] = round(time.time() - T0, 1)
    save()
    log("errors:", list(RESULTS["errors"]), "skipped:", RESULTS["skipped"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
