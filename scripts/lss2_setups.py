#!/usr/bin/env python3
"""LLMServingSim 2.0's validation setups, simulated here beside LLMServingSim's own output:
the eleven setups of its `evaluation/validation/` (A6000 and H100: one dense instance, two,
a prefill/decode pair, one with prefix caching, one MoE; one TPU v6e), with their cluster
configs and datasets, compared per setup on mean TTFT, mean TPOT and request throughput, then
the mean |Δ| over all setups and over the H100 ones.

LLMServingSim's numbers are its simulation's, not real runs, and carry multipliers set by hand
per setup (`--attention-overheads`): a comparison, not a target, and no constant is set from
them (docs/src/accuracy.md, "The vLLM those runs were served by").
Both sides are read from the per-request CSVs (LLMServingSim's `<setup>_result.csv` and ours,
the same columns): mean TTFT and mean TPOT over every request, and requests per second of the
last request's end, as LLMServingSim prints its throughput.

  scripts/lss2_setups.py --lss DIR                     # ours at --vllm-version 0.13 --enforce-eager
  scripts/lss2_setups.py --lss DIR -- --pd-flow lmcache  # other flags for every simulation
  scripts/lss2_setups.py --lss DIR --bin PATH          # another binary
  scripts/lss2_setups.py --lss DIR --attention-overheads  # what its attention prices carry

`--attention-overheads` simulates nothing: for each attention table of the release
(`llm_profile/perf_models/<GPU>/<model>/tp<N>/`), it prints what LLMServingSim's simulator reads
for attention (`predictions/attn_{decode,prefill}_predictions.csv`, which its runs load unless
`--enable-attn-prediction`) over the kernel times measured at the same shape (`attention.csv`):
the median ratio, its 5-95 % range and the shapes compared. The predictor writes its
predictions times `--decode-overhead` and `--prefill-overhead`
(`llm_profile/profiler/predictor/main.py`), so a ratio far from 1 is a multiplier set by hand.
Then, for each one-instance setup, what those multipliers add to a decode step at the median
running requests its output logs (`<setup>_output.txt`), against its median inter-token gap.

DIR is a checkout of LLMServingSim at its 2.0 release (commit 9e3f0ec; it holds
`evaluation/validation/` and `dataset/`), or a bare git mirror of its repository, read at that
commit. Flags after `--` replace the default `--vllm-version 0.13 --enforce-eager` (how the 2.0
runs were served). Exit status: 0 when every setup ran; 1 when one failed; 2 on bad arguments.
"""

import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BIN = os.path.join(ROOT, "target", "release", "blis-cosim")
RELEASE = "9e3f0ec"
DEFAULT_FLAGS = ["--vllm-version", "0.13", "--enforce-eager"]

# (GPU folder, setup, dataset suffix): the runs of the 2.0 release's `evaluation/validation.sh`.
SETUPS = [
    ("A6000", "SD", "llama"), ("A6000", "MD", "llama"), ("A6000", "PDD", "llama"),
    ("A6000", "SD+PC", "llama"), ("A6000", "SM", "phi"),
    ("H100", "SD", "llama"), ("H100", "MD", "llama"), ("H100", "PDD", "llama"),
    ("H100", "SD+PC", "llama"), ("H100", "SM", "mixtral"),
    ("TPU-v6e-1", "SD", "llama"),
]
METRICS = ["mean TTFT (ms)", "mean TPOT (ms)", "req/s"]
# The release's attention tables: measured kernel times and the simulator's predictions.
PERF = "llm_profile/perf_models"
ATTENTION_TABLES = [
    "A6000/meta-llama/Llama-3.1-8B/tp1", "A6000/meta-llama/Llama-3.1-8B/tp2",
    "A6000/microsoft/Phi-mini-MoE-instruct/tp1", "A6000/microsoft/Phi-mini-MoE-instruct/tp2",
    "H100/meta-llama/Llama-3.1-70B/tp4", "H100/mistralai/Mixtral-8x7B-v0.1/tp4",
    "TPU-v6e-1/meta-llama/Llama-3.1-8B/tp1",
]
ATTENTION_FILES = ["attention.csv", "predictions/attn_decode_predictions.csv",
                   "predictions/attn_prefill_predictions.csv"]
# The one-instance setups, with the attention table each reads and its model's layers: what
# the multipliers add to a decode step at the batch its output holds.
STEP_SETUPS = [
    ("A6000", "SD", "A6000/meta-llama/Llama-3.1-8B/tp1", 32),
    ("A6000", "SM", "A6000/microsoft/Phi-mini-MoE-instruct/tp1", 32),
    ("H100", "SD", "H100/meta-llama/Llama-3.1-70B/tp4", 80),
    ("H100", "SM", "H100/mistralai/Mixtral-8x7B-v0.1/tp4", 32),
    ("TPU-v6e-1", "SD", "TPU-v6e-1/meta-llama/Llama-3.1-8B/tp1", 32),
]
# The KV tokens per decode the added time is read at (the datasets' prompts and outputs
# average some 230 and 280 tokens).
STEP_KV = 512


def summary(path):
    """Mean TTFT and TPOT (ms) over the requests of a per-request CSV (LLMServingSim's
    columns, times in ns), and requests per second of the last request's end."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{path}: no requests")
    n = len(rows)
    ttft = sum(int(r["TTFT"]) for r in rows) / n / 1e6
    tpot = sum(int(r["TPOT"]) for r in rows) / n / 1e6
    end_s = max(int(r["end_time"]) for r in rows) / 1e9
    return ttft, tpot, n / end_s


def fetch(lss, tmp, attention=False):
    """The folder holding `evaluation/validation/` and `dataset/` (or, with `attention`, the
    attention tables): `lss` itself, or files of the 2.0 release extracted from the bare mirror
    `lss` into `tmp`; raises ValueError saying which file is missing otherwise."""
    if os.path.isdir(os.path.join(lss, "evaluation", "validation")):
        return lss
    if attention:
        names = [f"{PERF}/{t}/{f}" for t in ATTENTION_TABLES for f in ATTENTION_FILES]
        names += [f"evaluation/validation/{gpu}/{setup}_{k}" for gpu, setup, _, _ in STEP_SETUPS
                  for k in ("output.txt", "result.csv")]
    else:
        names = [f"dataset/sharegpt_req300_rate10_{d}.jsonl" for d in ("llama", "phi", "mixtral")]
        names += [f"evaluation/validation/{gpu}/{setup}_{k}" for gpu, setup, _ in SETUPS
                  for k in ("config.json", "result.csv")]
    for name in names:
        out = os.path.join(tmp, name)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "wb") as f:
            done = subprocess.run(["git", "--git-dir", lss, "show", f"{RELEASE}:{name}"], stdout=f,
                                  stderr=subprocess.PIPE)
        if done.returncode != 0:
            raise ValueError(f"{lss}: not a 2.0 checkout, nor a mirror holding {RELEASE}:{name}")
    return tmp


def simulate(binary, root, gpu, setup, data, flags, out):
    """Runs one setup as `evaluation/validation.sh` runs LLMServingSim, with `flags`; returns
    the CSV's path, or raises with the binary's last lines."""
    argv = [binary, "--cluster-config", f"{root}/evaluation/validation/{gpu}/{setup}_config.json",
            "--dataset", f"{root}/dataset/sharegpt_req300_rate10_{data}.jsonl",
            "--fp", "16", "--block-size", "16", "--num-req", "300", "--output", out]
    if setup == "SD+PC":
        argv.append("--enable-prefix-caching")
    done = subprocess.run(argv + flags, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-3:])
    return out


def table(rows):
    """The per-setup lines and the two means of |Δ|, as text (`rows` not empty, one H100 row
    at least)."""
    lines = [f"{'setup':<14}" + "".join(f"{m:>34}" for m in METRICS)]
    lines.append(" " * 14 + "".join(f"{'ours / LLMServingSim (Δ)':>34}" for _ in METRICS))
    errors, h100 = [], []
    for name, ours, theirs in rows:
        cells = []
        for a, b in zip(ours, theirs):
            delta = (a / b - 1) * 100
            errors.append(abs(delta))
            if name.startswith("H100"):
                h100.append(abs(delta))
            cells.append(f"{a:9.2f} / {b:9.2f} ({delta:+6.1f} %)")
        lines.append(f"{name:<14}" + "".join(f"{c:>34}" for c in cells))
    lines.append(f"mean |Δ|: {statistics.fmean(errors):.1f} % over {len(errors)} numbers; "
                 f"H100 setups {statistics.fmean(h100):.1f} % over {len(h100)}")
    return "\n".join(lines)


def attention_measured(path):
    """An `attention.csv`'s kernel times, ns: decode rows by (sequences, KV tokens), prefill
    rows of one sequence by (KV tokens, chunk). The GPU tables give each shape's mean in ms
    (`time_stats.attn_{decode,prefill}.mean`), the TPU's in ns (`mean_ns`)."""
    decode, prefill = {}, {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            is_decode = r["is_prefill"] == "False"
            if "mean_ns" in r:
                ns = float(r["mean_ns"])
            else:
                ns = float(r[f"time_stats.attn_{'decode' if is_decode else 'prefill'}.mean"]) * 1e6
            if is_decode:
                decode[(int(r["batch_size"]), int(r["kv_cache_size"]))] = ns
            elif r["batch_size"] == "1":
                prefill[(int(r["kv_cache_size"]), int(r["prefill_chunk_size"]))] = ns
    return decode, prefill


def predicted(path, keys):
    """A predictions file's times, ns, by the two columns `keys` name."""
    with open(path, newline="") as f:
        return {(int(r[keys[0]]), int(r[keys[1]])): float(r["prediction"]) for r in csv.DictReader(f)}


def table_pairs(folder):
    """One attention table's measured times and its predictions, ns: ((decode measured,
    decode predicted), (prefill measured, prefill predicted)), each keyed by shape."""
    decode, prefill = attention_measured(os.path.join(folder, ATTENTION_FILES[0]))
    p_decode = predicted(os.path.join(folder, ATTENTION_FILES[1]), ("batch_size", "kv_cache_size"))
    p_prefill = predicted(os.path.join(folder, ATTENTION_FILES[2]), ("kv_cache_size", "prefill_chunk_size"))
    return (decode, p_decode), (prefill, p_prefill)


def table_overheads(folder):
    """One attention table's (decode ratios, prefill ratios): at each shape its measured
    times and its predictions both hold, what the simulator reads over what was measured."""
    return tuple([p[k] / v for k, v in m.items() if k in p and v > 0] for m, p in table_pairs(folder))


def attention_overheads(root):
    """Per attention table of the release: (its folder, decode ratios, prefill ratios)."""
    return [(t, *table_overheads(os.path.join(root, PERF, t))) for t in ATTENTION_TABLES]


def overhead_table(rows):
    """The ratios of `attention_overheads` as text: per table and phase, the median, its
    5-95 % range and the shapes compared."""
    def cell(ratios):
        if not ratios:
            return f"{'-':>32}"
        r = sorted(ratios)
        lo, hi = r[len(r) // 20], r[min(len(r) - 1, (19 * len(r)) // 20)]
        return f"{f'x{statistics.median(r):.2f} ({lo:.2f}-{hi:.2f}), {len(r)}':>32}"
    lines = ["LLMServingSim 2.0's attention: what its simulator reads (predictions/) over the measured "
             "kernel time (attention.csv), shape by shape",
             f"{'table':44}{'decode: median (5-95 %), shapes':>32}{'prefill: the same':>32}"]
    lines += [f"{t:44}{cell(d)}{cell(p)}" for t, d, p in rows]
    return "\n".join(lines)


def median_running(path):
    """The median of the running requests an LLMServingSim output logs each interval
    (`Running Instance[0]: N reqs`), or None when it logs none."""
    with open(path, encoding="utf-8", errors="replace") as f:
        counts = [int(m.group(1)) for m in re.finditer(r"Running Instance\[0\]: (\d+) reqs", f.read())]
    return statistics.median_low(counts) if counts else None


def median_itl(path):
    """The median inter-token gap (ms) over every request of a per-request CSV."""
    with open(path, newline="") as f:
        gaps = [int(g) for r in csv.DictReader(f) for g in re.findall(r"\d+", r["ITL"])]
    return statistics.median_low(gaps) / 1e6 if gaps else None


def added_per_step(folder, batch, kv, layers):
    """What the predictions add to a decode step of `batch` sequences at `kv` KV tokens each
    over the measured times (ms, every layer), or None when either lacks that shape."""
    (decode, p_decode), _ = table_pairs(folder)
    key = (batch, kv)
    if key not in decode or key not in p_decode:
        return None
    return layers * (p_decode[key] - decode[key]) / 1e6


def step_shares(root):
    """Per one-instance setup: (its name, the median running requests of its output, its
    median ITL, the time the multipliers add to a decode step of that many at STEP_KV)."""
    rows = []
    for gpu, setup, table, layers in STEP_SETUPS:
        base = os.path.join(root, "evaluation", "validation", gpu, setup)
        batch = median_running(base + "_output.txt")
        itl = median_itl(base + "_result.csv")
        added = batch and added_per_step(os.path.join(root, PERF, table), batch, STEP_KV, layers)
        rows.append((f"{gpu}/{setup}", batch, itl, added))
    return rows


def share_table(rows):
    """`step_shares` as text."""
    lines = [f"What they add to a decode step at the median running requests of each one-instance output "
             f"({STEP_KV} KV tokens each)",
             f"{'setup':14}{'running':>9}{'median ITL (ms)':>17}{'added (ms)':>12}{'share':>8}"]
    for name, batch, itl, added in rows:
        if batch is None or itl is None or added is None:
            lines.append(f"{name:14}{'-':>9}{'-':>17}{'-':>12}{'-':>8}")
            continue
        lines.append(f"{name:14}{batch:9}{itl:17.1f}{added:12.1f}{added / itl * 100:7.0f}%")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lss", required=True, help="LLMServingSim 2.0 checkout or bare mirror")
    p.add_argument("--bin", default=DEFAULT_BIN, help="the blis-cosim binary")
    p.add_argument("--attention-overheads", action="store_true",
                   help="print what LLMServingSim's attention prices carry over its measured tables")
    p.add_argument("flags", nargs="*", help="flags for every simulation (after --)")
    args = p.parse_args()
    if args.attention_overheads:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                root = fetch(args.lss, tmp, attention=True)
                print(overhead_table(attention_overheads(root)))
                print()
                print(share_table(step_shares(root)))
            except (ValueError, OSError) as e:
                p.error(str(e))
            except KeyError as e:
                p.error(f"{args.lss}: an attention table or prediction file without the column {e}")
        return 0
    if not os.access(args.bin, os.X_OK):
        p.error(f"{args.bin}: no binary there (cargo build --release)")
    flags = args.flags or DEFAULT_FLAGS
    print(f"flags: {' '.join(flags)}")
    rows, failed = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        try:
            root = fetch(args.lss, tmp)
        except ValueError as e:
            p.error(str(e))
        for gpu, setup, data in SETUPS:
            name = f"{gpu}/{setup}"
            try:
                out = simulate(args.bin, root, gpu, setup, data, flags, os.path.join(tmp, "sim.csv"))
                rows.append((name, summary(out),
                             summary(f"{root}/evaluation/validation/{gpu}/{setup}_result.csv")))
            except (RuntimeError, ValueError) as e:
                print(f"{name}: not simulated: {e}", file=sys.stderr)
                failed += 1
    if rows:
        print(table(rows))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
