#!/usr/bin/env bash
# Wall-time benchmark of a 16-instance cluster run on a release build:
# 100,000 generated requests (Poisson, 320 req/s: 20 req/s per instance, the per-instance load
# of bench.sh's scaling cases) over 2 nodes x 8 H100-SXM instances serving Llama-3.1-8B.
#   scripts/bench_cluster.sh            # best/median of RUNS runs per routing policy
#   RUNS=10 scripts/bench_cluster.sh
# Times the whole process (start to exit): reading the JSONL, simulating, writing the CSV; prints
# the generated tokens and events per second at the median (scripts/rates.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

cargo build --release --quiet
BIN=target/release/blis-cosim
. scripts/rates.sh

python3 scripts/gen_workload.py --num-requests 100000 --rate 320 --seed 7 --no-token-ids \
    --out "$TMP/w.jsonl"
python3 - "$TMP/cluster.json" <<'EOF'
import json, sys
instance = {"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM", "pd_type": None,
            "tp_size": 1, "npu_mem": {"mem_size": 80, "mem_bw": 3350, "mem_latency": 0},
            # the limits every recorded timing used (vLLM's H100 default is 1,024 / 8,192)
            "max_num_seqs": 128, "max_num_batched_tokens": 2048}
node = {"num_instances": 8, "cpu_mem": {"mem_size": 512, "mem_bw": 256, "mem_latency": 0},
        "instances": [instance] * 8}
json.dump({"num_nodes": 2, "link_bw": 16, "link_latency": 0, "nodes": [node, node]},
          open(sys.argv[1], "w"), indent=1)
EOF

# time_case LABEL ARGS...: runs the binary RUNS times and prints best/median in ms.
time_case() {
    local label=$1
    shift
    local times=()
    for _ in $(seq "$RUNS"); do
        local t0=$EPOCHREALTIME
        "$BIN" "$@" >/dev/null
        local t1=$EPOCHREALTIME
        times+=("$(echo "($t1 - $t0) * 1000" | bc -l)")
    done
    printf '%s\n' "${times[@]}" | sort -g | awk -v label="$label" '
        { v[NR] = $1 } END { printf "%-44s best %8.1f ms   median %8.1f ms   (%d runs)\n", label, v[1], v[int((NR + 1) / 2)], NR }'
    local median
    median=$(printf '%s\n' "${times[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] / 1000 }')
    rates "  at the median" "$median" "$@"
}

common=(--cluster-config "$TMP/cluster.json" --dataset "$TMP/w.jsonl")
for policy in LOAD RR least-loaded weighted; do
    time_case "16 instances, 100k req, $policy, CSV" "${common[@]}" \
        --request-routing-policy "$policy" --output "$TMP/out.csv"
done
time_case "16 instances, 100k req, LOAD, no CSV" "${common[@]}"
