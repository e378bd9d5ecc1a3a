#!/usr/bin/env python3
"""Public runs, not used for any constant: simulate real vLLM serving runs that other people
published (with the workload and engine settings they state) and print, per case and metric,
the published number, the simulated one and their difference, then the mean |Δ| overall, per
group (dense TP 1, dense TP > 1, MoE, TPU), per part and per metric.

These runs are a check only. No constant of the roofline or of the host model was set from
them; the project's rule is that constants come from kernel tables and public component
measurements (docs/src/accuracy.md, "Public runs, not used for any constant").

  scripts/public_checks.py                       # every case, with target/release/blis-cosim
  scripts/public_checks.py --bin PATH            # another binary
  scripts/public_checks.py --cases ID,ID         # some cases (ids as printed)
  scripts/public_checks.py --json OUT.json       # also write every case's numbers and argv
  scripts/public_checks.py --keep DIR            # keep each case's summary JSON (and the
                                                 # config.json of a model not bundled) in DIR

Exit status: 0 when every case ran; 1 when a case failed to simulate; 2 on bad arguments or a
missing binary.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BIN = os.path.join(ROOT, "target", "release", "blis-cosim")

# The metrics, as (key of the summary JSON and of the vLLM benchmark JSON, label): both files
# use vLLM's benchmark keys. A case compares those of them its workload reproduces.
METRICS = [
    ("mean_ttft_ms", "TTFT mean (ms)"),
    ("median_ttft_ms", "TTFT median (ms)"),
    ("mean_tpot_ms", "TPOT mean (ms)"),
    ("median_tpot_ms", "TPOT median (ms)"),
    ("mean_e2el_ms", "E2E latency mean (ms)"),
    ("output_throughput", "output tok/s"),
    ("request_throughput", "requests/s"),
]

GROUPS = ["dense TP 1", "dense TP > 1", "MoE", "TPU"]

# Architecture facts (HuggingFace config.json keys) of models that are not bundled. The
# numbers are the published configs' (facts carry over); only the keys the simulator reads.
# DeepSeek-R1-Distill-Qwen-7B is Qwen2.5-Math-7B's architecture, -14B Qwen2.5-14B's.
QWEN2_7B = {
    "model_type": "qwen2",
    "_name_or_path": "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}
QWEN2_14B = {
    "model_type": "qwen2",
    "_name_or_path": "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
    "hidden_size": 5120,
    "intermediate_size": 13824,
    "num_hidden_layers": 48,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "vocab_size": 152064,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}

# vLLM 0.8.5's engine as `vllm serve` starts it with no engine flags (the V1 engine, its
# default since 0.8): piecewise CUDA graphs, steps formed when the previous one ends (no
# asynchronous scheduling before 0.10), 256 sequences and 2,048 tokens per step for the
# OpenAI server on a GPU, prefix caching on (these prompts share no prefix).
VLLM_085 = [
    "--cudagraph-mode", "PIECEWISE",
    "--no-async-scheduling",
    "--max-num-seqs", "256",
    "--max-num-batched-tokens", "2048",
]

# vLLM's V0 engine (its default before 0.8), which the CI latency pages most likely ran: full
# CUDA graphs for decode-only steps, prefill steps eager, no asynchronous scheduling.
VLLM_V0 = ["--cudagraph-mode", "FULL_DECODE_ONLY", "--no-async-scheduling"]

IOG = ("https://github.com/IOG-Foundation/llm-inference-benchmarks/blob/{commit}/results/"
       "vllm_200prompts{rate}qps_{model}_sharegpt_{gpus}xNVIDIA-GeForce-RTX-4090.json")

# What every IOG case assumes, beyond what its JSON states.
IOG_ASSUMED = (
    "vLLM 0.8.5 (the repository's pinned benchmark client and docker image), `vllm serve` "
    "defaults (README), benchmark_serving.py on 200 ShareGPT prompts with Poisson arrivals; "
    "the per-request lengths are not published, so every request has the run's mean prompt "
    "and output length (total tokens / 200) and the Poisson draw is ours (seed 0). Output "
    "throughput is not compared: over 200 requests the run's duration is set by its longest "
    "outputs, which mean lengths do not reproduce"
)

# What every vLLM CI latency case assumes. The test's settings are vLLM's
# .buildkite/nightly-benchmarks/tests/latency-tests.json (dummy weights, 5 warm-up and 15
# timed iterations) and benchmark_latency.py's defaults, which the page repeats: one batch of
# 8 prompts of 32 tokens, 128 output tokens each (ignore_eos), in the offline engine.
CI_ASSUMED = (
    "vLLM's CI performance page states neither the vLLM version nor its engine; the V0 engine "
    "is assumed (full CUDA graphs for decode, eager prefill, no asynchronous scheduling). The "
    "8 requests arrive together (--rate 1e6); the published number is the mean wall time of "
    "the whole batch, compared with the simulated mean end-to-end latency"
)


# vLLM pull request #16458 (2025-04-11, "[TPU] Increase block size and reset block shapes"):
# its description's benchmark on one TPU v6e chip, before and after the change.
TPU_PR = "https://github.com/vllm-project/vllm/pull/16458"
TPU_ASSUMED = (
    "The pull request's own description: `vllm serve meta-llama/Llama-3.1-8B-Instruct` with "
    "VLLM_USE_V1=1 (vLLM's TPU runner of April 2025, torch_xla, no asynchronous scheduling), "
    "--max-num-batched-tokens 512 --max-num-seqs 512 --max-model-len 2048, then "
    "benchmark_serving.py on its random dataset (1,800 prompt tokens, up to 128 output tokens "
    "without ignore_eos, all at once); 987 of 1,000 requests succeeded, and those are "
    "simulated, each with the mean output the run before the change reports (118,669 tokens "
    "over 987 requests: 120). After the change only "
    "requests per second is given (8.37, from 7.87 before), and that is compared. This runner "
    "is an earlier one than the tpu-inference runner whose tables the TPU's constants come "
    "from"
)


@dataclass
class Case:
    """One published run: where it is, how it was served, and what it measured."""

    id: str
    group: str
    source: str
    vllm: str
    gpu: str
    model: str  # a bundled name, or a key of INLINE_MODELS
    tp: int
    rate: float  # Poisson requests per second
    num_prompts: int
    prompt_tokens: int
    output_tokens: int
    published: dict
    compared: list
    engine: list
    assumed: str


INLINE_MODELS = {"R1-Distill-Qwen-7B": QWEN2_7B, "R1-Distill-Qwen-14B": QWEN2_14B}

# IOG-Foundation/llm-inference-benchmarks: commits of its result files.
C1 = "1ffd7960d341d7ff15e962af098ca5b08d9f253e"
C2 = "834d4bd5224e0700efebf3f9eb28c6d97d420344"
LLAMA8B = "DeepSeek-R1-Distill-Llama-8B"  # Llama-3.1-8B's architecture (bundled)
QWEN7B = "DeepSeek-R1-Distill-Qwen-7B"
QWEN14B = "DeepSeek-R1-Distill-Qwen-14B"


def iog(run, model, tp, totals, published, group):
    """One IOG-Foundation run on RTX 4090s: `run` is (case id, request rate, commit of the
    result file, model name in its file name), `totals` the run's (input, output) tokens."""
    case_id, rate, commit, file_model = run
    source = IOG.format(commit=commit, rate=rate, model=file_model, gpus=tp)
    keys = ["mean_ttft_ms", "median_ttft_ms", "mean_tpot_ms", "median_tpot_ms"]
    return Case(case_id, group, source, "0.8.5", "RTX4090", model, tp, float(rate), 200,
                round(totals[0] / 200), round(totals[1] / 200),
                dict(zip(keys, published)), keys, list(VLLM_085), IOG_ASSUMED)


# vLLM's CI performance pages, as the search index stores them. Two are stored under the
# address of another Buildkite pipeline (an indexing slip; the content is vLLM's page).
CI_H200 = "https://buildkite.com/vllm/performance-benchmark/builds/9515"
CI_H100 = ("https://buildkite.com/elastic/enterprise-search-ruby/builds/571 (stored copy of "
           "a vllm/performance-benchmark build page)")
CI_A100 = ("https://buildkite.com/julialang/opencl-dot-jl/builds/306 (stored copy of a "
           "vllm/performance-benchmark build page)")


def ci_latency(case_id, source, gpu, model, tp, mean_latency_ms, group):
    """One latency test of vLLM's CI: a batch of 8 x (32 in, 128 out) on `tp` GPUs."""
    return Case(case_id, group, source, "not stated", gpu, model, tp, 1e6, 8, 32, 128,
                {"mean_e2el_ms": mean_latency_ms}, ["mean_e2el_ms"], list(VLLM_V0),
                CI_ASSUMED)


CASES = [
    iog(("4090-llama8b-tp1-1qps", 1, C2, LLAMA8B), "Llama-3.1-8B", 1, (41169, 42743),
        (47.645, 39.854, 19.292, 19.241), "dense TP 1"),
    iog(("4090-llama8b-tp1-4qps", 4, C1, LLAMA8B), "Llama-3.1-8B", 1, (41169, 42743),
        (58.033, 49.669, 22.576, 22.619), "dense TP 1"),
    iog(("4090-llama8b-tp1-16qps", 16, C1, LLAMA8B), "Llama-3.1-8B", 1, (41169, 42743),
        (86.873, 73.601, 32.964, 32.828), "dense TP 1"),
    iog(("4090-qwen7b-tp1-4qps", 4, C2, QWEN7B), "R1-Distill-Qwen-7B", 1, (41650, 43541),
        (38.564, 39.280, 19.974, 20.250), "dense TP 1"),
    iog(("4090-llama8b-tp2-4qps", 4, C1, LLAMA8B), "Llama-3.1-8B", 2, (41169, 42322),
        (363.239, 223.104, 18.210, 18.059), "dense TP > 1"),
    iog(("4090-llama8b-tp4-4qps", 4, C2, LLAMA8B), "Llama-3.1-8B", 4, (41169, 42743),
        (3001.761, 3092.658, 15.292, 15.536), "dense TP > 1"),
    iog(("4090-qwen7b-tp2-4qps", 4, C2, QWEN7B), "R1-Distill-Qwen-7B", 2, (41650, 43529),
        (494.289, 322.236, 14.875, 15.194), "dense TP > 1"),
    iog(("4090-qwen14b-tp2-4qps", 4, C1, QWEN14B), "R1-Distill-Qwen-14B", 2, (41650, 41473),
        (240.394, 207.679, 50.606, 50.520), "dense TP > 1"),
    ci_latency("ci-h100-llama8b-tp1", CI_H100, "H100-SXM", "Llama-3.1-8B", 1, 997.542,
               "dense TP 1"),
    ci_latency("ci-h100-llama70b-tp4", CI_H100, "H100-SXM", "Llama-3.1-70B", 4, 2444.47,
               "dense TP > 1"),
    ci_latency("ci-h100-mixtral-tp2", CI_H100, "H100-SXM", "Mixtral-8x7B-v0.1", 2, 2326.97,
               "MoE"),
    ci_latency("ci-h200-llama8b-tp1", CI_H200, "H200", "Llama-3.1-8B", 1, 833.421,
               "dense TP 1"),
    ci_latency("ci-h200-llama70b-tp4", CI_H200, "H200", "Llama-3.1-70B", 4, 2077.53,
               "dense TP > 1"),
    ci_latency("ci-h200-mixtral-tp2", CI_H200, "H200", "Mixtral-8x7B-v0.1", 2, 1917.44,
               "MoE"),
    ci_latency("ci-a100-llama8b-tp1", CI_A100, "A100-80G", "Llama-3.1-8B", 1, 1585.43,
               "dense TP 1"),
    Case("tpu-v6e-llama8b-1800in", "TPU", TPU_PR, "main of 2025-04-11 (V1)", "TPU-v6e-1",
         "Llama-3.1-8B", 1, 1e6, 987, 1800, 120, {"request_throughput": 8.37},
         ["request_throughput"],
         ["--no-async-scheduling", "--max-num-seqs", "512", "--max-num-batched-tokens", "512"],
         TPU_ASSUMED),
]


def model_arg(case, folder):
    """The `--model` argument: the bundled name, or a config.json written under `folder`."""
    arch = INLINE_MODELS.get(case.model)
    if arch is None:
        return case.model
    path = os.path.join(folder, case.model + ".json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(arch, f)
    return path


def argv(binary, case, model, summary):
    """The command line that simulates `case`, its summary JSON going to `summary`."""
    return [
        binary,
        "--hardware", case.gpu,
        "--model", model,
        "--tp", str(case.tp),
        "--rate", repr(case.rate),
        "--num-prompts", str(case.num_prompts),
        "--prompt-tokens", str(case.prompt_tokens),
        "--output-tokens", str(case.output_tokens),
        *case.engine,
        "--summary-json", summary,
    ]


def delta_pct(simulated, published):
    """Signed difference of the simulated number from the published one, percent."""
    return (simulated - published) / published * 100.0


def simulate(binary, case, tmp, keep):
    """Runs one case; returns (argv, summary) or raises RuntimeError with the binary's error."""
    folder = keep or tmp
    summary = os.path.join(folder, case.id + ".json")
    cmd = argv(binary, case, model_arg(case, folder), summary)
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-3:])
        raise RuntimeError(f"exit {done.returncode}: {tail}")
    try:
        with open(summary, encoding="utf-8") as f:
            report = json.load(f)
        missing = [key for key in case.published if key not in report]
    except (OSError, ValueError) as e:
        raise RuntimeError(f"no readable summary JSON at {summary}: {e}") from e
    if missing:
        raise RuntimeError(f"summary JSON {summary} lacks {', '.join(missing)}")
    return cmd, report


def mean(values):
    """Arithmetic mean, or None for no values."""
    return sum(values) / len(values) if values else None


def print_case(case, rows):
    """One case's header and its per-metric rows."""
    arrivals = "at once" if case.rate >= 1e6 else f"at {case.rate:g} req/s"
    print(f"=== {case.id}  ({case.gpu}, {case.model}, TP {case.tp}, vLLM {case.vllm}, "
          f"{case.num_prompts} requests {arrivals}, "
          f"{case.prompt_tokens} in / {case.output_tokens} out)")
    print(f"    source: {case.source}")
    for label, pub, sim, d in rows:
        print(f"    {label:<22} {pub:>10.2f} {sim:>10.2f} {d}")


def abs_deltas(results, keep):
    """|Δ| of every compared metric of the results `keep` accepts."""
    return [abs(d) for r in results if keep(r) for d in r["delta_pct"].values()]


def print_summary(results):
    """Mean |Δ| overall, per group, per GPU and per metric within each group."""
    print("=== mean |Δ| (percent of the published number)")
    every = abs_deltas(results, lambda r: True)
    print(f"    all: {mean(every):.1f}%  ({len(results)} cases, {len(every)} metrics)")
    for group in GROUPS:
        ds = abs_deltas(results, lambda r, g=group: r["group"] == g)
        print(f"    {group}: {mean(ds):.1f}%  ({len(ds)} metrics)" if ds
              else f"    {group}: no case")
    for gpu in sorted({r["gpu"] for r in results}):
        ds = abs_deltas(results, lambda r, g=gpu: r["gpu"] == g)
        print(f"    on {gpu}: {mean(ds):.1f}%  ({len(ds)} metrics)")
    for key, label in METRICS:
        for group in GROUPS:
            ds = [r["delta_pct"][key] for r in results
                  if r["group"] == group and key in r["delta_pct"]]
            if ds:
                print(f"    {label:<22} {group:<13} mean |Δ| "
                      f"{mean([abs(d) for d in ds]):5.1f}%  (signed {mean(ds):+.1f}%)")


def parse_args():
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default=DEFAULT_BIN, help="blis-cosim binary (default: %(default)s)")
    p.add_argument("--cases", help="comma-separated case ids (default: all)")
    p.add_argument("--json", help="write every case's numbers and command line here")
    p.add_argument("--keep", help="folder for each case's summary JSON and model configs "
                   "(default: a temporary folder)")
    return p.parse_args()


def selected(spec):
    """The cases named by `spec` (all when None); exits 2 on an unknown id."""
    if not spec:
        return CASES
    ids = [s.strip() for s in spec.split(",") if s.strip()]
    known = {c.id: c for c in CASES}
    unknown = [i for i in ids if i not in known]
    if unknown:
        print(f"public_checks: unknown case {', '.join(unknown)}; known: {', '.join(known)}",
              file=sys.stderr)
        sys.exit(2)
    return [known[i] for i in ids]


def check_binary(path):
    """Exits 2 with a clear message when `path` is not an executable file."""
    if not os.path.isfile(path):
        print(f"public_checks: no blis-cosim binary at {path} "
              "(build it with `cargo build --release`, or pass --bin)", file=sys.stderr)
        sys.exit(2)
    if not os.access(path, os.X_OK):
        print(f"public_checks: {path} is not executable", file=sys.stderr)
        sys.exit(2)


def run_case(binary, case, tmp, keep):
    """Simulates one case and prints it; returns its result record, or None on failure."""
    try:
        cmd, summary = simulate(binary, case, tmp, keep)
    except RuntimeError as e:
        print(f"=== {case.id}: not simulated: {e}")
        return None
    rows, deltas, simulated = [], {}, {}
    for key, label in METRICS:
        if key not in case.published:
            continue
        sim = float(summary[key])
        pub = case.published[key]
        simulated[key] = sim
        if key in case.compared:
            deltas[key] = delta_pct(sim, pub)
            rows.append((label, pub, sim, f"{deltas[key]:+8.1f}%"))
        else:
            rows.append((label, pub, sim, "  not compared"))
    print_case(case, rows)
    return {"id": case.id, "group": case.group, "source": case.source, "vllm": case.vllm,
            "gpu": case.gpu, "model": case.model, "tp": case.tp, "assumed": case.assumed,
            "argv": cmd[1:], "published": case.published, "simulated": simulated,
            "delta_pct": deltas}


def main():
    """Runs the selected cases and prints the tables."""
    args = parse_args()
    cases = selected(args.cases)
    check_binary(args.bin)
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    print("    metric                  published  simulated       Δ")
    results, failed = [], []
    with tempfile.TemporaryDirectory(prefix="public_checks.") as tmp:
        for case in cases:
            record = run_case(args.bin, case, tmp, args.keep)
            if record is None:
                failed.append(case.id)
            else:
                results.append(record)
    if results:
        print_summary(results)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"cases": results, "failed": failed}, f, indent=1)
    if failed:
        print(f"public_checks: {len(failed)} case(s) not simulated: {', '.join(failed)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
