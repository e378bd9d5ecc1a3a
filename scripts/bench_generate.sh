#!/usr/bin/env bash
# Wall time of `blis-cosim generate` on a release build (whole process, JSONL written).
#   scripts/bench_generate.sh                 # 1,000,000 requests per scenario, 5 runs each
#   RUNS=10 N=1000000 PREFIX_N=1000000 OUT_DIR=/dev/shm scripts/bench_generate.sh
# N requests for the scenarios without token ids; PREFIX_N for prefix-heavy, whose lines carry
# ~770 token ids each (about 3.8 KB per request, so 1M requests write 3.8 GB).
# Prints the best and median wall time of RUNS runs per case and the output size.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
N=${N:-1000000}
PREFIX_N=${PREFIX_N:-100000}
TMP=$(mktemp -d "${OUT_DIR:-${TMPDIR:-/tmp}}/bench_generate.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

cargo build --release --quiet
BIN=target/release/blis-cosim

# time_case LABEL ARGS...: runs `generate ARGS --out FILE` RUNS times; best/median in ms.
time_case() {
    local label=$1
    shift
    local times=()
    for _ in $(seq "$RUNS"); do
        local t0=$EPOCHREALTIME
        "$BIN" generate "$@" --out "$TMP/w.jsonl" 2>/dev/null
        local t1=$EPOCHREALTIME
        times+=("$(echo "($t1 - $t0) * 1000" | bc -l)")
    done
    local size
    size=$(du -m "$TMP/w.jsonl" | cut -f1)
    printf '%s\n' "${times[@]}" | sort -g | awk -v label="$label" -v size="$size" '
        { v[NR] = $1 } END { printf "%-44s best %8.1f ms   median %8.1f ms   %6d MB   (%d runs)\n", label, v[1], v[int((NR + 1) / 2)], size, NR }'
}

for scenario in mixed-slo unfair-tenants bursty-traffic; do
    time_case "$scenario, $N requests" --scenario "$scenario" --num-requests "$N"
done
time_case "prefix-heavy (token ids), $PREFIX_N requests" --scenario prefix-heavy --num-requests "$PREFIX_N"
