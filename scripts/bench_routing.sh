#!/usr/bin/env bash
# Wall-time benchmark of routing scorers and stale router signals (issue 20), on
# bench_cluster.sh's case: 16 H100-SXM instances (2 nodes x 8) serving Llama-3.1-8B, 100,000
# generated requests at 320 req/s, whole process with the CSV. Per workload it times
#   least-loaded, fresh signals                                  (the reference)
#   weighted prefix-affinity:2,queue-depth:1,kv-utilization:1, fresh signals
#   the same scorers with 50 ms snapshot and cache-signal delays
#   the same with precise-prefix-cache instead of prefix-affinity (reads the stale cache view)
# on two workloads: without token ids (bench_cluster.sh's) and with token ids, half of each
# prompt a shared prefix (so that the prefix signals have something to find).
#   scripts/bench_routing.sh            # best/median of RUNS runs per case
#   RUNS=5 scripts/bench_routing.sh
#   BIN=path/to/blis-cosim scripts/bench_routing.sh   # a binary built elsewhere, no build
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
    --out "$TMP/plain.jsonl"
python3 scripts/gen_workload.py --num-requests 100000 --rate 320 --seed 7 \
    --shared-prefix-fraction 0.5 --out "$TMP/prefix.jsonl"
python3 - "$TMP/cluster.json" <<'PY'
import json, sys
instance = {"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM", "pd_type": None,
            "tp_size": 1, "npu_mem": {"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}}
node = {"num_instances": 8, "cpu_mem": {"mem_size": 512, "mem_bw": 256, "mem_latency": 0},
        "instances": [instance] * 8}
json.dump({"num_nodes": 2, "link_bw": 16, "link_latency": 0, "nodes": [node, node]},
          open(sys.argv[1], "w"), indent=1)
PY

# time_case LABEL ARGS...: runs the binary RUNS times; prints the best and median wall time and
# the best CPU time (user + system, steadier than the wall time on a shared machine) in ms, and
# keeps the best wall and CPU times in $BEST and $BEST_CPU.
time_case() {
    local label=$1
    shift
    local walls=() cpus=()
    for _ in $(seq "$RUNS"); do
        /usr/bin/time -f "%e %U %S" -o "$TMP/time" "$BIN" "$@" >/dev/null 2>&1
        read -r wall user sys <"$TMP/time"
        walls+=("$(python3 -c "print($wall * 1000)")")
        cpus+=("$(python3 -c "print(($user + $sys) * 1000)")")
    done
    BEST=$(printf '%s\n' "${walls[@]}" | sort -g | head -1)
    BEST_CPU=$(printf '%s\n' "${cpus[@]}" | sort -g | head -1)
    printf '%s\n' "${walls[@]}" | sort -g | awk -v label="$label" -v cpu="$BEST_CPU" '
        { v[NR] = $1 } END { printf "%-62s wall best %8.0f median %8.0f ms, CPU best %8.0f ms (%d runs)\n", label, v[1], v[int((NR + 1) / 2)], cpu, NR }'
}

# ratio WHAT: the last case against the reference, wall and CPU.
ratio() {
    printf '  %s / least-loaded fresh: wall %.3f, CPU %.3f\n' "$1" \
        "$(python3 -c "print($BEST / $REF)")" "$(python3 -c "print($BEST_CPU / $REF_CPU)")"
}

affinity=prefix-affinity:2,queue-depth:1,kv-utilization:1
precise=precise-prefix-cache:2,queue-depth:1,kv-utilization:1
stale=(--snapshot-refresh-interval 50ms --cache-signal-delay 50ms)
for w in plain prefix; do
    common=(--cluster-config "$TMP/cluster.json" --dataset "$TMP/$w.jsonl" --output "$TMP/out.csv")
    time_case "$w: least-loaded, fresh" "${common[@]}" --request-routing-policy least-loaded
    REF=$BEST
    REF_CPU=$BEST_CPU
    time_case "$w: $affinity, fresh" "${common[@]}" \
        --request-routing-policy weighted --routing-scorers "$affinity"
    ratio "fresh scorers"
    time_case "$w: $affinity, 50 ms stale" "${common[@]}" \
        --request-routing-policy weighted --routing-scorers "$affinity" "${stale[@]}"
    ratio "stale scorers"
    time_case "$w: $precise, fresh" "${common[@]}" \
        --request-routing-policy weighted --routing-scorers "$precise"
    time_case "$w: $precise, 50 ms stale" "${common[@]}" \
        --request-routing-policy weighted --routing-scorers "$precise" "${stale[@]}"
    ratio "stale precise"
done
