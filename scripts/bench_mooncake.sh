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

for k in $CASES; do
    h100_cluster "$k"
    args=(--cluster-config "$TMP/cluster.json" --dataset "$TRACE"
        --request-routing-policy round-robin --block-size 16)
    timed "Mooncake / $k instances" "${args[@]}"
done
