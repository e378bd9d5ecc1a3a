#!/usr/bin/env python3
"""Step-level comparison of a simulated run with a real vLLM run (async scheduling).

Runs on one instance or on one DP group, whose engines step together.

vLLM's bench records, per request, when the engine took it from its input queue (queued_ts),
scheduled it (scheduled_ts), and emitted its first and last tokens. Under asynchronous
scheduling each of these is a step end, and a request scheduled at a step end runs in the step
after the next: first_token_ts - scheduled_ts is one step of the running requests (formed
before the request was known) plus the request's own prefill step. When another request's
timestamp falls between the two, it marks the end of the first step and splits the window
into its two steps.

For every request whose prompt fits one step, whose window holds no other first token, and
that was scheduled while no other prompt was part-way through its prefill,
this prints the real steps next to the simulated ones: the simulated step that produced the
request's first token (from the DEBUG log) and the simulated decode-only step price at the
same number of running requests (median of the run's decode-only steps with that count).

    blis-cosim ... --async-scheduling --log-level DEBUG --output sim.csv 2> sim.log
    scripts/step_windows.py --vllm .../vllm/requests.jsonl --sim-csv sim.csv --sim-log sim.log
"""

import argparse
import bisect
import csv
import json
import re
import statistics

STEP = re.compile(
    r"\[t=(\d+) ns\] (?:instance (\d+) )?step (\d+) ns: (\d+) seqs \((\d+) decode\), (\d+) tokens; (\d+) waiting, (\d+) running"
)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vllm", required=True, help="the real run's requests.jsonl")
    ap.add_argument("--sim-csv", required=True, help="the simulated run's per-request CSV")
    ap.add_argument("--sim-log", required=True, help="the simulated run's --log-level DEBUG output")
    ap.add_argument("--max-num-batched-tokens", type=int, default=2048)
    args = ap.parse_args()

    # Simulated steps: (end ns, duration ns, seqs, decodes, tokens, running), by (instance, end).
    steps = []
    by_end = {}
    with open(args.sim_log) as f:
        for line in f:
            m = STEP.search(line)
            if m:
                end, instance = int(m.group(1)), int(m.group(2) or 0)
                dur, seqs, dec, tok, _waiting, running = (int(x) for x in m.groups()[2:])
                steps.append((end, dur, seqs, dec, tok, running))
                by_end[(instance, end)] = steps[-1]
    if not steps:
        raise SystemExit(f"{args.sim_log}: no DEBUG step lines (run with --log-level DEBUG)")
    decode_only = {}
    for _end, dur, seqs, dec, _tok, _running in steps:
        if seqs == dec:
            decode_only.setdefault(dec, []).append(dur)
    decode_price = {n: statistics.median(v) / 1e6 for n, v in decode_only.items()}

    def decode_ms(n):
        nearest = min(decode_price, key=lambda k: abs(k - n))
        return decode_price[nearest]

    with open(args.sim_csv) as f:
        sim = {int(r["request id"]): r for r in csv.DictReader(f)}
    with open(args.vllm) as f:
        real = [json.loads(line) for line in f if line.strip()]
    t0 = min(r["queued_ts"] for r in real)
    firsts = sorted(r["first_token_ts"] for r in real)
    marks = sorted(
        t for r in real for t in (r["queued_ts"], r["first_token_ts"], r["last_token_ts"])
    )

    print(
        f"{'req':>4} {'t (s)':>6} {'prompt':>6} {'running':>7} | {'decode step ms: real':>20} {'sim':>6} {'diff':>6}"
        f" | {'prefill step ms: real':>21} {'sim':>6} {'diff':>6}"
    )
    decode_diffs, prefill_diffs, pair_diffs = {}, {}, {}
    for i, r in enumerate(real):
        s, f = r["scheduled_ts"], r["first_token_ts"]
        row = sim.get(i)
        if row is None or r["input_toks"] > args.max_num_batched_tokens:
            continue
        lo, hi = bisect.bisect_right(firsts, s + 0.002), bisect.bisect_left(firsts, f - 0.002)
        if hi > lo:
            continue  # another request's prefill ended inside the window
        if any(o["scheduled_ts"] < s - 0.002 and o["first_token_ts"] > s + 0.002 for o in real):
            continue  # another prompt was still being prefilled: the first step holds a chunk
        sim_first = int(row["arrival"]) + int(row["TTFT"])
        sim_step = by_end.get((int(row["instance id"]), sim_first))
        if sim_step is None:
            continue
        running = sim_step[5]
        bucket = min(running // 32 * 32, 96)
        sim_prefill = sim_step[1] / 1e6
        sim_decode = decode_ms(max(running - 1, 1))
        # Step ends strictly inside the window, clustered (one engine step = one instant).
        inside = [t for t in marks if s + 0.003 < t < f - 0.003]
        clusters = []
        for t in inside:
            if not clusters or t - clusters[-1] > 0.002:
                clusters.append(t)
        total = (f - s) * 1e3
        if len(clusters) == 1:
            d1, d2 = (clusters[0] - s) * 1e3, (f - clusters[0]) * 1e3
            decode_diffs.setdefault(bucket, []).append(d1 - sim_decode)
            prefill_diffs.setdefault(bucket, []).append(d2 - sim_prefill)
            print(
                f"{i:>4} {s - t0:>6.2f} {r['input_toks']:>6} {running:>7} | {d1:>20.1f} {sim_decode:>6.1f} {d1 - sim_decode:>+6.1f}"
                f" | {d2:>21.1f} {sim_prefill:>6.1f} {d2 - sim_prefill:>+6.1f}"
            )
        elif not clusters:
            pair_diffs.setdefault(bucket, []).append(total - sim_decode - sim_prefill)
            print(
                f"{i:>4} {s - t0:>6.2f} {r['input_toks']:>6} {running:>7} | both steps: real {total:.1f} ms,"
                f" sim {sim_decode:.1f} + {sim_prefill:.1f}, diff {total - sim_decode - sim_prefill:+.1f}"
            )
    print("\nmedian real - sim (ms) by running requests:")
    for bucket in sorted(set(decode_diffs) | set(prefill_diffs) | set(pair_diffs)):
        label = f"{bucket}-{bucket + 31}" if bucket < 96 else "96+"
        parts = []
        for name, d in (("decode step", decode_diffs), ("prefill step", prefill_diffs), ("both", pair_diffs)):
            v = d.get(bucket, [])
            if v:
                parts.append(f"{name} {statistics.median(v):+.1f} (n={len(v)})")
        print(f"  {label:>7}: " + ", ".join(parts))


if __name__ == "__main__":
    main()
