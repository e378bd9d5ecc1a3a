"""The `--tpu` section of scripts/derive_roofline.py: the TPU step's constants
(src/latency/roofline/tpu.rs) derived from LLMServingSim 2.0's per-layer tables of one TPU v6e
chip, with each fit's error on the rows it did not use.

What it reads: from a checkout of LLMServingSim 2.0 (commit 9e3f0ec, "Release LLMServingSim 2.0")
or a bare git mirror of it (read with `git show 9e3f0ec:PATH`), the directory
`llm_profile/perf_models/TPU-v6e-1/meta-llama/Llama-3.1-8B/tp1/`:
- `layers.csv`: device times of Llama-3.1-8B's ops compiled by XLA, one token count per row
  (1-2,048 tokens, no KV): the norms, rope, embedding, the Q, O, gate, up and down projections
  and the LM head. Device times: a norm takes 0.6-7 µs and the projections stream their weights
  at about the HBM's rate; XLA's fusions blur which op a row's time belongs to (the K and V
  projections have no rows; below 313 tokens the up projection's time sits in the gate's or the
  down's row), so the projections are fitted on their sum over a block.
- `attention.csv`: device times of the attention op (rope included, LLMServingSim's
  `trace_generator.py`: "TPU includes rope in attention latency"): decode batches of 1-256
  sequences over 32-1,984 KV tokens each, prefill chunks of 32-2,048 tokens over 0-1,984.
- not `archive/layers.csv`: `llm_profiler_tpu.ipynb` made it by wrapping each module's forward in
  `xp.Trace` under torch_xla's lazy tensors, so its spans time the host's tracing of each op
  (35-115 µs whatever the token count: an RMSNorm of one token and of 2,048 both ~115 µs), not
  the device; vLLM's TPU path compiles the whole step into one XLA program and traces nothing per
  step.
The hardware's own numbers come from hardware/TPU-v6e-1.toml. No validation run is read.

The fit set is the token counts (and decode batch sizes, prefill chunks) that are powers of two:
the shapes vLLM's TPU runner pads every step to (`_get_token_paddings`: 16, 32, ... tokens;
`_get_req_paddings`: 8, 16, ... requests). Every other row is held out and its error reported.
"""

import csv
import io
import math
import os
import statistics
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from linear_solve import solve  # noqa: E402

COMMIT = "9e3f0ec"
TABLES = "llm_profile/perf_models/TPU-v6e-1/meta-llama/Llama-3.1-8B/tp1"
# Where `--tpu` without `=DIR` reads the tables: a checkout or bare mirror named by this variable.
SOURCE_VARIABLE = "LLMSERVINGSIM_REPO"


def default_source():
    """The checkout or mirror named by $LLMSERVINGSIM_REPO, or None when it is unset."""
    return os.environ.get(SOURCE_VARIABLE) or None
HARDWARE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hardware", "TPU-v6e-1.toml")

# Llama-3.1-8B (model_archs): hidden, FFN, vocabulary, heads, KV heads, head dim; bf16.
HIDDEN, FFN, VOCAB, HEADS, KV_HEADS, HEAD_DIM, FP = 4096, 14336, 128256, 32, 8, 128, 2
# The projections the layer table has rows for, (K, N): Q, O, gate, up, down.
BLOCK_MATMULS = [(HIDDEN, HIDDEN), (HIDDEN, HIDDEN), (HIDDEN, FFN), (HIDDEN, FFN), (FFN, HIDDEN)]
BLOCK_NAMES = ["q_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
NORMS = ["input_layernorm", "post_layernorm", "final_layernorm"]


def norm_pair(row):
    """A block's two norms' time, ns."""
    return row["input_layernorm"] + row["post_layernorm"]
# The prefill attention's tiles (query rows x KV rows), as the roofline counts them
# (`prefill_waves` without SMs: the padded tiles' KV tiles).
TILE = 64
SMALLEST_BUCKET = 16
# Token rows a matmul's MMA work is padded to: 1 (none beyond vLLM's token padding), the code's;
# `--tpu-m-tile=N` prints the what-if of padding them to N as well.
M_TILE = [1]


def read_table(source, name):
    """Rows of table `name` from a checkout of LLMServingSim 2.0 or a bare git mirror of it;
    None when neither is there."""
    path = os.path.join(source, TABLES, name)
    if os.path.isfile(path):
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    if not os.path.isdir(source):
        return None
    out = subprocess.run(["git", "--git-dir", source, "show", f"{COMMIT}:{TABLES}/{name}"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return None
    return list(csv.DictReader(io.StringIO(out.stdout)))


def part():
    """Peak bf16 FLOP per ns, HBM bytes per ns and the MXU's side, from the hardware file."""
    with open(HARDWARE) as f:
        text = f.read()

    def number(key):
        # `key = NUMBER  # comment`: the file's own lines (tomllib needs Python 3.11).
        return float(re.search(rf"^{key}\s*=\s*([0-9.]+)", text, re.M).group(1))

    return number("peak_tflops_bf16") * 1e3, number("memory_bw_gbps"), int(number("mxu_dim"))


def padded(n, mxu):
    return math.ceil(n / mxu) * mxu


def matmul_parts(m, k, n, hw):
    """(MMA ns at peak, bytes) of an m x k by k x n matmul: K and N in whole MXU tiles."""
    peak, _, mxu = hw
    kp, np_ = padded(k, mxu), padded(n, mxu)
    return 2 * padded(m, M_TILE[0]) * kp * np_ / peak, (kp * np_ + m * k + m * n) * FP


def matmul_ns(c, m, k, n, hw):
    """What src/latency/roofline/tpu.rs prices one matmul at, ns."""
    mma, bytes_ = matmul_parts(m, k, n, hw)
    return c["op_fixed"] + max(mma / c["eta_c"], bytes_ / (hw[1] * c["eta_m"]))


def block_ns(c, m, hw):
    return sum(matmul_ns(c, m, k, n, hw) for k, n in BLOCK_MATMULS)


def stream_ns(c, bytes_, hw):
    """An elementwise op (norm, embedding gather, sampler): its fixed time and its share of one
    pass over its activation."""
    return c["op_fixed"] + c["pass_share"] * bytes_ / hw[1]


def prefill_flops(chunk, prefix):
    """The causal prefill's MMA work in whole 64 x 64 tiles, as the roofline counts it."""
    tiles = sum(math.ceil((prefix + min((i + 1) * TILE, chunk)) / TILE)
                for i in range(math.ceil(chunk / TILE)))
    return HEADS * tiles * TILE * TILE * 4 * HEAD_DIM


def kv_row():
    return KV_HEADS * HEAD_DIM * 2 * FP


def relative_lsq(xs, ys):
    """Least squares of y = x . b weighted by relative error (each row over its y)."""
    n = len(xs[0])
    a = [[0.0] * n for _ in range(n)]
    b = [0.0] * n
    for x, y in zip(xs, ys):
        w = 1.0 / (y * y)
        for i in range(n):
            b[i] += w * x[i] * y
            for j in range(n):
                a[i][j] += w * x[i] * x[j]
    return solve(a, b)


def by_tokens(layers):
    """{tokens: {layer: ns}} of the layer table."""
    d = {}
    for r in layers:
        d.setdefault(int(r["input"]), {})[r["layer_name"]] = float(r["latency(ns)"])
    return d


def is_bucket(n):
    return n >= SMALLEST_BUCKET and n & (n - 1) == 0


def fit_ops(d, hw):
    """The op fixed time, then the matmuls' weight-streaming and MMA efficiencies."""
    peak, bw, _ = hw
    # Every op's fixed time: the norms at the smallest bucket, less one pass over their
    # activation at the HBM's peak (0.08 µs of 0.6-0.8).
    smallest = d[SMALLEST_BUCKET]
    op_fixed = statistics.median(smallest[n] - SMALLEST_BUCKET * HIDDEN * FP / bw for n in NORMS)
    c = {"op_fixed": op_fixed}
    fit = sorted(m for m in d if is_bucket(m))
    blocks = [(m, len(BLOCK_MATMULS), [matmul_parts(m, k, n, hw) for k, n in BLOCK_MATMULS],
               sum(d[m].get(n, 0.0) for n in BLOCK_NAMES)) for m in fit]
    heads = [(m, 1, [matmul_parts(m, HIDDEN, VOCAB, hw)], d[m]["lm_head"]) for m in fit]
    rows = blocks + heads

    def share(parts, t, ops, which, rate):
        return sum(p[which] for p in parts) / (rate * (t - ops * op_fixed))

    # Weight-bound: the buckets up to 256 tokens, whose MMA work is under a third of the stream.
    light = [r for r in rows if r[0] <= 256]
    c["eta_m"] = statistics.median(share(p, t, ops, 1, bw) for _, ops, p, t in light)
    # MMA-bound: the buckets whose MMA work at peak outlasts the weight stream at eta_m.
    heavy = [r for r in rows if sum(x[0] for x in r[2]) > sum(x[1] for x in r[2]) / (bw * c["eta_m"])]
    c["eta_c"] = statistics.median(share(p, t, ops, 0, 1.0) for _, ops, p, t in heavy)
    # Elementwise ops: XLA fuses them into their neighbours, so each costs a share of one pass
    # over its activation; fitted on a block's two norms together, since the fusions move time
    # between them (post_layernorm's rows stay at 0.56 µs from 1 to 2,048 tokens).
    c["pass_share"] = statistics.median(
        (norm_pair(d[m]) - 2 * op_fixed) / (2 * m * HIDDEN * FP / bw) for m in fit)
    c["heavy_tokens"] = sorted({r[0] for r in heavy})
    return c


def op_errors(d, c, hw, rows):
    """Relative errors of the block's projections, the LM head and the norms at token counts
    `rows`, by family."""
    errs = {"projections (block sum)": [], "lm_head": [], "norms (block pair)": []}
    for m in rows:
        errs["projections (block sum)"].append(
            block_ns(c, m, hw) / sum(d[m].get(n, 0.0) for n in BLOCK_NAMES) - 1)
        errs["lm_head"].append(matmul_ns(c, m, HIDDEN, VOCAB, hw) / d[m]["lm_head"] - 1)
        pair = 2 * stream_ns(c, m * HIDDEN * FP, hw)
        errs["norms (block pair)"].append(pair / norm_pair(d[m]) - 1)
    return errs


def fit_attention(rows, hw):
    """Decode: fixed + per sequence + KV bytes at a share of the HBM's rate; prefill: fixed +
    tiles' MMA work at a share of the peak. Fitted on the power-of-two batches and chunks."""
    peak, bw, _ = hw
    dec = [(int(r["batch_size"]), int(r["kv_cache_size"]), float(r["mean_ns"]))
           for r in rows if r["is_prefill"] != "True"]
    pre = [(int(r["prefill_chunk_size"]), int(r["kv_cache_size"]), float(r["mean_ns"]))
           for r in rows if r["is_prefill"] == "True"]
    pow2 = lambda n: n & (n - 1) == 0
    fit_d = [r for r in dec if pow2(r[0])]
    t0, seq, inv = relative_lsq([[1.0, b, b * (k + 1) * kv_row() / bw] for b, k, _ in fit_d],
                                [t for *_, t in fit_d])
    fit_p = [r for r in pre if pow2(r[0])]
    t0p, invp = relative_lsq([[1.0, prefill_flops(ch, k) / peak] for ch, k, _ in fit_p],
                             [t for *_, t in fit_p])
    c = {"decode_fixed": t0, "decode_seq": seq, "decode_eta": 1 / inv,
         "prefill_fixed": t0p, "prefill_eta": 1 / invp}
    dec_ns = lambda b, k: t0 + seq * b + b * (k + 1) * kv_row() / (bw * c["decode_eta"])
    pre_ns = lambda ch, k: t0p + prefill_flops(ch, k) / (peak * c["prefill_eta"])
    errs = {
        "decode attention": ([dec_ns(b, k) / t - 1 for b, k, t in fit_d],
                             [dec_ns(b, k) / t - 1 for b, k, t in dec if not pow2(b)]),
        "prefill attention": ([pre_ns(ch, k) / t - 1 for ch, k, t in fit_p],
                              [pre_ns(ch, k) / t - 1 for ch, k, t in pre if not pow2(ch)]),
    }
    return c, errs


def cell(errs):
    if not errs:
        return "no rows"
    a = [abs(e) for e in errs]
    worst = max(errs, key=abs)
    return f"{len(a):5d} rows, median |err| {statistics.median(a) * 100:5.1f}%, worst {worst * 100:+6.1f}%"


def rounded(c):
    """The constants as src/latency/roofline/tpu.rs holds them."""
    return {
        "TPU_OP_FIXED_NS": round(c["op_fixed"], -1),
        "TPU_MATMUL_MEMORY_EFFICIENCY": round(c["eta_m"], 3),
        "TPU_MATMUL_COMPUTE_EFFICIENCY": round(c["eta_c"], 3),
        "TPU_FUSED_PASS_SHARE": round(c["pass_share"], 3),
        "TPU_DECODE_ATTENTION_FIXED_NS": round(c["decode_fixed"], -1),
        "TPU_DECODE_SEQUENCE_NS": round(c["decode_seq"], -1),
        "TPU_DECODE_ATTENTION_EFFICIENCY": round(c["decode_eta"], 3),
        "TPU_PREFILL_ATTENTION_FIXED_NS": round(c["prefill_fixed"], -1),
        "TPU_PREFILL_ATTENTION_EFFICIENCY": round(c["prefill_eta"], 4),
    }


def print_tpu(source, m_tile=1):
    """The `--tpu` section: the fits, their errors on the rows left out, and the constants
    (with `m_tile` > 1, the what-if of padding the matmuls' token rows to it, whose constants
    the code does not hold)."""
    M_TILE[0] = m_tile
    if source is None:
        print(f"TPU v6e: skipped, no LLMServingSim 2.0 checkout named (give one, or a bare mirror "
              f"of commit {COMMIT}, as --tpu=DIR or in ${SOURCE_VARIABLE})")
        return
    layers, attention = read_table(source, "layers.csv"), read_table(source, "attention.csv")
    if layers is None or attention is None:
        print(f"TPU v6e: skipped, no LLMServingSim 2.0 tables at {source} "
              f"(a checkout or a bare mirror of commit {COMMIT}; give it as --tpu=DIR)")
        return
    hw = part()
    d = by_tokens(layers)
    c = fit_ops(d, hw)
    ca, attention_errs = fit_attention(attention, hw)
    c.update(ca)
    print("TPU v6e (LLMServingSim 2.0's Llama-3.1-8B tables, TPU-v6e-1): fitted on the power-of-two "
          "token counts, batches and chunks (vLLM's TPU paddings); held out: every other row")
    print(f"  every op's fixed time {c['op_fixed']:.0f} ns (the norms at {SMALLEST_BUCKET} tokens); "
          f"matmuls stream weights at {c['eta_m']:.3f} of {hw[1]:.0f} GB/s (buckets of 16-256 tokens), "
          f"MMA at {c['eta_c']:.3f} of {hw[0] / 1e3:.0f} TFLOP/s (buckets {c['heavy_tokens']}); "
          f"an elementwise op {c['pass_share']:.3f} of a pass over its activation")
    print(f"  decode attention {c['decode_fixed']:.0f} ns + {c['decode_seq']:.0f} ns per sequence + KV at "
          f"{c['decode_eta']:.3f} of the HBM's rate; prefill attention {c['prefill_fixed']:.0f} ns + "
          f"64 x 64 tiles' MMA at {c['prefill_eta']:.4f} of peak")
    fit_rows = sorted(m for m in d if is_bucket(m))
    held_rows = sorted(m for m in d if not is_bucket(m))
    fit_e, held_e = op_errors(d, c, hw, fit_rows), op_errors(d, c, hw, held_rows)
    for family in fit_e:
        print(f"  {family:24s} fit: {cell(fit_e[family])}; held out: {cell(held_e[family])}")
    for family, (f, h) in attention_errs.items():
        print(f"  {family:24s} fit: {cell(f)}; held out: {cell(h)}")
    if m_tile > 1:
        print(f"with --tpu-m-tile={m_tile}, a what-if: src/latency/roofline/tpu.rs holds the constants "
              "derived without it")
        return
    print("constants held by src/latency/roofline/tpu.rs:")
    for name, value in rounded(c).items():
        print(f"{name} = {value:g}")
