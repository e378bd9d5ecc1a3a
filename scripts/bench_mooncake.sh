#!/usr/bin/env bash
# The Mooncake comparison (issue 41): the Mooncake conversation trace (../shared/data/traces,
# 12,031 requests, long prompts sharing prefixes) on k Llama-3.1-8B H100 instances, 8 per
# node, round-robin, block size 16, roofline; no CSV. Cases: 8 and 16 instances. Prints best
# and median wall time of RUNS runs and the generated tokens and events per second at the
# median (scripts/rates.sh).
#   scripts/bench_mooncake.sh
#   RUNS=3 BIN=/path/to/other/blis-cosim scripts/bench_mooncake.sh   # another build
#   CASES="8" scripts/bench_mooncake.sh                             # some cases
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
TRACE=${BLIS_COSIM_TRACES:-../shared/data/traces}/mooncake-conversation.jsonl
CASES=${CASES:-8 16}
[ -f "$TRACE" ] || { echo "skipped: $TRACE is absent (the Mooncake trace)" >&2; exit 0; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
if [ -z "${BIN:-}" ]; then
    cargo build --release --quiet
    BIN=target/release/blis-cosim
fi
. scripts/rates.sh

# cluster K: the cluster config of K instances.
cluster() {
    python3 - "$1" "$TMP/cluster.json" <<'PY'
import json, sys
k = int(sys.argv[1])
instance = {"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM", "pd_type": None,
            "tp_size": 1, "npu_mem": {"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}}
cpu = {"mem_size": 512, "mem_bw": 256, "mem_latency": 0}
sizes = [8] * (k // 8) + ([k % 8] if k % 8 else [])
nodes = [{"num_instances": n, "cpu_mem": cpu, "instances": [instance] * n} for n in sizes]
json.dump({"num_nodes": len(nodes), "link_bw": 16, "link_latency": 0, "nodes": nodes},
          open(sys.argv[2], "w"), indent=1)
PY
}

for k in $CASES; do
    cluster "$k"
    args=(--cluster-config "$TMP/cluster.json" --dataset "$TRACE"
        --request-routing-policy round-robin --block-size 16)
    times=()
    for _ in $(seq "$RUNS"); do
        t0=$EPOCHREALTIME
        "$BIN" "${args[@]}" >/dev/null 2>&1
        t1=$EPOCHREALTIME
        times+=("$(echo "$t1 - $t0" | bc -l)")
    done
    sorted=$(printf '%s\n' "${times[@]}" | sort -g)
    best=$(head -1 <<<"$sorted")
    median=$(awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }' <<<"$sorted")
    printf '%-44s best %8.3f s   median %8.3f s   (%d runs)\n' "Mooncake / $k instances" \
        "$best" "$median" "$RUNS"
    rates "  at the median" "$median" "${args[@]}"
done
