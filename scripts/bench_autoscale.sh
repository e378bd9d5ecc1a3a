#!/usr/bin/env bash
# Wall-time cost of autoscaling on a 100,000-request run (release build): the 16-instance
# cluster of bench_cluster.sh (Poisson, 320 req/s, Llama-3.1-8B on H100-SXM) run fixed, and
# the same 16 replicas as one autoscaled template held at 16 (--autoscale-min/max 16: the same
# simulation, every tick, routing filter and account included), and a template scaling
# between 8 and 16 with threshold (a different cluster over time, for scale).
#   scripts/bench_autoscale.sh            # best/median of RUNS runs per case
#   RUNS=10 scripts/bench_autoscale.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

cargo build --release --quiet
BIN=target/release/blis-cosim

python3 scripts/gen_workload.py --num-requests 100000 --rate 320 --seed 7 --no-token-ids \
    --out "$TMP/w.jsonl"
python3 - "$TMP/cluster.json" <<'PY'
import json, sys
instance = {"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM", "pd_type": None,
            "tp_size": 1, "npu_mem": {"mem_size": 80, "mem_bw": 3350, "mem_latency": 0},
            # the limits every recorded timing used (vLLM's H100 default is 1,024 / 8,192)
            "max_num_seqs": 128, "max_num_batched_tokens": 2048}
node = {"num_instances": 16, "cpu_mem": {"mem_size": 512, "mem_bw": 256, "mem_latency": 0},
        "instances": [instance] * 16}
json.dump({"num_nodes": 1, "link_bw": 16, "link_latency": 0, "nodes": [node]},
          open(sys.argv[1], "w"), indent=1)
PY

# time_case LABEL ARGS...: runs the binary RUNS times and prints best/median in ms.
time_case() {
    local label=$1
    shift
    local times=()
    for _ in $(seq "$RUNS"); do
        local t0=$EPOCHREALTIME
        "$BIN" "$@" >/dev/null 2>&1
        local t1=$EPOCHREALTIME
        times+=("$(echo "($t1 - $t0) * 1000" | bc -l)")
    done
    printf '%s\n' "${times[@]}" | sort -g | awk -v label="$label" '
        { v[NR] = $1 } END { printf "%-48s best %8.1f ms   median %8.1f ms   (%d runs)\n", label, v[1], v[int((NR + 1) / 2)], NR }'
}

data=(--dataset "$TMP/w.jsonl" --output "$TMP/out.csv")
time_case "fixed 16 instances" --cluster-config "$TMP/cluster.json" "${data[@]}"
time_case "autoscaled template held at 16 (threshold)" "${data[@]}" \
    --autoscale threshold --autoscale-min 16 --autoscale-max 16 --autoscale-interval 1s
time_case "autoscaled template 8..16 (threshold)" "${data[@]}" \
    --autoscale threshold --autoscale-min 8 --autoscale-max 16 --autoscale-interval 1s
