"""The host model's eager launch costs, derived from Frontier's tables timed both ways.

Used by `scripts/derive_roofline.py`, which prints the held-out check and the constants the
host model's defaults hold (`HostSpec::default`, src/config/hardware.rs).

- `eager_op_ns`: one eager PyTorch op, the median CUDA_EVENT wall time of the ops whose
  kernel-only time of the same shape is under 5 µs (launch-bound, so the wall is the host's
  issue plus the events), at <= 64 tokens, in every `linear_op.csv` that Frontier timed both
  ways (H800, RTX PRO 6000).
- `triton_launch_ns`: one launch of vLLM's fused-MoE Triton kernel through
  `invoke_fused_moe_kernel` (its Python and Triton's launcher). Frontier's fused-MoE harness
  (`frontier/profiling/moe/moe_vllm_kernel.py`, commit a4b22df) times, between a pair of CUDA
  events, two such launches with one torch op between them (the slice of the first GEMM's
  output made contiguous). The host model prices that row as it prices a step: the host issues
  launch, op, launch; each kernel starts once issued and its predecessor is done; the first
  grouped GEMM takes two thirds of the kernel-only time (twice the weights of the second), the
  copy next to nothing. A launch's cost is the one that makes that price equal the row's event
  time, at the median over the rows of one GPU: H800's one-token rows, launch-bound (the host's
  whole issue), give the constant; RTX PRO 6000's rows (8-32 tokens, no one-token shape) check
  it held out, and the reverse (RTX PRO 6000's rows fit, H800's checked) is printed too.
"""
import csv
import glob
import os
import statistics

from roofline_tables import FRONTIER_DEVICE

# The GPU whose pairs give the Triton launch's constant (the only one with launch-bound,
# one-token pairs); the other GPU with pairs checks it.
TRITON_SOURCE = "H800"
LINEAR_MAX_TOKENS = 64
LAUNCH_BOUND_KERNEL_S = 5e-6


def eager_op_walls(t):
    """{GPU: [event wall seconds of launch-bound eager ops]} over Frontier's linear-op tables
    timed both ways (`linear_op.csv` beside `linear_op_kernel_only.csv`)."""
    out = {}
    for kernel_path in sorted(glob.glob(os.path.join(t.frontier, "*", "*", "linear_op_kernel_only.csv"))):
        event_path = kernel_path.replace("_kernel_only", "")
        if not os.path.exists(event_path):
            continue
        gpu = FRONTIER_DEVICE[os.path.relpath(kernel_path, t.frontier).split(os.sep)[0]]
        events = {r["num_tokens"]: r for r in csv.DictReader(open(event_path))}
        for k in csv.DictReader(open(kernel_path)):
            e = events.get(k["num_tokens"])
            if e is None or int(k["num_tokens"]) > LINEAR_MAX_TOKENS:
                continue
            for col, value in k.items():
                if not (col.startswith("time_stats.") and col.endswith(".median")) or not value:
                    continue
                wall = e.get(col)
                if wall and float(value) * 1e-3 < LAUNCH_BOUND_KERNEL_S:
                    out.setdefault(gpu, []).append(float(wall) * 1e-3)
    return out


def fused_moe_event(launch, op, kernel):
    """The host model's price of one Frontier fused-MoE event row, seconds: the host issues a
    Triton launch (`launch`), a torch op (`op`) and a Triton launch; the GPU runs the first
    grouped GEMM (2/3 of `kernel`), the copy (nothing) and the second (1/3)."""
    first, second = 2 * kernel / 3, kernel / 3
    gpu = launch + first
    issued = launch + op
    gpu = max(gpu, issued)
    issued += launch
    return max(gpu, issued) + second


def fit_launch(op, rows):
    """The launch cost (seconds) at which the median of (price - event) over `rows` (tokens,
    event s, kernel s) is zero: bisection, the price growing with the cost."""
    lo, hi = 0.0, 1e-3
    for _ in range(60):
        mid = (lo + hi) / 2
        if statistics.median(fused_moe_event(mid, op, k) - e for _, e, k in rows) < 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def launch_rows(pairs, gpu):
    """The pairs of `gpu` a launch is fitted on: H800's one-token rows (launch-bound); another
    GPU's every row."""
    rows = [(n, e, k) for g, n, e, k in pairs if g == gpu]
    if gpu == TRITON_SOURCE:
        rows = [r for r in rows if r[0] == 1]
    return rows


def host_launches(t, pairs):
    """Per GPU with pairs: its eager op's wall, the Triton launch fitted on its rows, and the
    rows; plus the pooled eager op (the constant) and the Triton launch of `TRITON_SOURCE`."""
    walls = eager_op_walls(t)
    per_gpu = {}
    for gpu in sorted({g for g, *_ in pairs}):
        op = statistics.median(walls[gpu])
        rows = launch_rows(pairs, gpu)
        per_gpu[gpu] = {"op": op, "ops": len(walls[gpu]), "rows": rows, "launch": fit_launch(op, rows)}
    pooled = statistics.median(w for ws in walls.values() for w in ws)
    return {"gpus": per_gpu, "eager_op": pooled, "triton_launch": per_gpu[TRITON_SOURCE]["launch"]}


def errors(launch, op, rows):
    """Signed errors of the priced event rows against the measured."""
    return [fused_moe_event(launch, op, k) / e - 1 for _, e, k in rows]


def print_host_launches(h, all_pairs):
    """The per-GPU fits, each one's check on the other GPU's rows and on its own GPU's rows it
    was not fitted on, with today's pricing (a Triton launch at an eager op's cost) beside."""
    gpus = h["gpus"]
    for gpu, g in gpus.items():
        print(f"  host       {gpu:11} eager op {g['op'] * 1e6:5.1f} us ({g['ops']} launch-bound ops); "
              f"Triton launch {g['launch'] * 1e6:5.1f} us from {len(g['rows'])} fused-MoE pairs")
    for fit_gpu, g in gpus.items():
        for other, o in gpus.items():
            rows = [(n, e, k) for gg, n, e, k in all_pairs if gg == other and (n, e, k) not in g["rows"]]
            if not rows:
                continue
            new, old = errors(g["launch"], o["op"], rows), errors(o["op"], o["op"], rows)
            label = "held out" if other != fit_gpu else "not fitted"
            print(f"  {label:10} {other:11} {len(rows):4} pairs with {fit_gpu}'s launch: median "
                  f"{statistics.median(new) * 100:+5.1f}% ({min(new) * 100:+.1f} to {max(new) * 100:+.1f}); "
                  f"a launch at the eager op's cost {statistics.median(old) * 100:+5.1f}%")
