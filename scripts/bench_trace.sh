#!/usr/bin/env bash
# Wall-time cost of decision traces (issue 21): bench_cluster.sh's case (16 H100-SXM instances,
# 2 nodes x 8, Llama-3.1-8B, 100,000 generated requests at 320 req/s, with the CSV), run with
# `--trace-level decisions --counterfactual-k 3 --trace-output` (A) against the same run without
# traces (B), paired A B A B ... under /usr/bin/time; prints each run's wall and CPU seconds
# and the median CPU ratio A/B over the pairs.
# Target: A/B <= 1.25.
#   scripts/bench_trace.sh
#   RUNS=5 BIN=path/to/blis-cosim scripts/bench_trace.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

if [ -z "${BIN:-}" ]; then
    cargo build --release --quiet
    BIN=target/release/blis-cosim
fi

python3 scripts/gen_workload.py --num-requests 100000 --rate 320 --seed 7 --no-token-ids \
    --out "$TMP/w.jsonl"
python3 - "$TMP/cluster.json" <<'PY'
import json, sys
instance = {"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM", "pd_type": None,
            "tp_size": 1, "npu_mem": {"mem_size": 80, "mem_bw": 3350, "mem_latency": 0},
            # the limits every recorded timing used (vLLM's H100 default is 1,024 / 8,192)
            "max_num_seqs": 128, "max_num_batched_tokens": 2048}
node = {"num_instances": 8, "cpu_mem": {"mem_size": 512, "mem_bw": 256, "mem_latency": 0},
        "instances": [instance] * 8}
json.dump({"num_nodes": 2, "link_bw": 16, "link_latency": 0, "nodes": [node, node]},
          open(sys.argv[1], "w"), indent=1)
PY

base="$BIN --cluster-config $TMP/cluster.json --dataset $TMP/w.jsonl --output $TMP/out.csv"
traced="$base --trace-level decisions --counterfactual-k 3 --trace-output $TMP/trace.jsonl"
for _ in $(seq "$RUNS"); do
    for label in traced untraced; do
        cmd=$base
        [ "$label" = traced ] && cmd=$traced
        # shellcheck disable=SC2086 # the commands are words
        /usr/bin/time -f "$label %e %U %S" -a -o "$TMP/times" $cmd >/dev/null 2>&1
    done
done
python3 - "$TMP/times" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
cpu = {"traced": [], "untraced": []}
for label, wall, user, system in rows:
    cpu[label].append(float(user) + float(system))
    print(f"{label}: {wall} s wall, {float(user) + float(system):.3f} s CPU")
ratios = [a / b for a, b in zip(cpu["traced"], cpu["untraced"])]
print(f"traced / untraced CPU, median of {len(ratios)} pairs: {statistics.median(ratios):.3f}")
PY
[ -f "$TMP/trace.jsonl" ] && echo "trace: $(wc -l <"$TMP/trace.jsonl") records, $(du -h "$TMP/trace.jsonl" | cut -f1)"
