#!/usr/bin/env bash
# Wall-time benchmark of the whole blis-cosim process on a release build.
#   scripts/bench.sh            # ShareGPT 300-request case + scaling on generated workloads
#   RUNS=20 scripts/bench.sh    # more repetitions
# Prints the best and median wall time of RUNS runs per case (process start to exit), and the
# generated tokens and events per second at the median (scripts/rates.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-10}
DATA=../shared/data/llmservingsim/workloads
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

cargo build --release --quiet
BIN=target/release/blis-cosim
. scripts/rates.sh

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
        { v[NR] = $1 } END { printf "%-44s best %8.1f ms   median %8.1f ms   (%d runs)\n", label, v[1], v[int((NR + 1) / 2)], NR }'
    local median
    median=$(printf '%s\n' "${times[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] / 1000 }')
    rates "  at the median" "$median" "$@"
}

# The scheduler limits every recorded timing used (vLLM's own defaults depend on the GPU).
LIMITS=(--max-num-seqs 128 --max-num-batched-tokens 2048)

if [ -f "$DATA/sharegpt-llama-3.1-8b-300-sps10.jsonl" ]; then
    time_case "ShareGPT 300 req, RTXPRO6000, Llama-3.1-8B" \
        --dataset "$DATA/sharegpt-llama-3.1-8b-300-sps10.jsonl" --hardware RTXPRO6000 \
        "${LIMITS[@]}" --output "$TMP/out.csv"
fi

# Scaling: generated workloads at a steady 20 req/s on one H100 (same load, growing length),
# without token ids (simulation cost) and with them (adds parsing ~4 KB of JSON per request).
for n in 10000 30000 100000; do
    for ids in no yes; do
        flag=--no-token-ids
        [ "$ids" = yes ] && flag=
        python3 scripts/gen_workload.py --num-requests "$n" --rate 20 --seed 7 $flag --out "$TMP/w.jsonl"
        RUNS=$(( RUNS > 3 ? 3 : RUNS )) time_case "generated $n req (token ids: $ids)" \
            --dataset "$TMP/w.jsonl" "${LIMITS[@]}" --output "$TMP/out.csv"
    done
done
