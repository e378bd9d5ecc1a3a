#!/usr/bin/env bash
# The BLIS comparison (issue 41, ../shared/bench/blis-compare/): its WorkloadSpec (Poisson at
# 20 req/s per instance, Gaussian lengths around 256 tokens, seed 42) on k Llama-3.1-8B H100
# instances, 8 per node, roofline; no CSV (BLIS writes none). Cases: 1K requests / 1 instance,
# 10K / 4, 100K / 16, 1M / 16, 100K / 256. Prints best and median wall time of RUNS runs and
# the generated tokens and events per second at the median (scripts/rates.sh).
#   scripts/bench_blis.sh
#   RUNS=3 BIN=/path/to/other/blis-cosim scripts/bench_blis.sh   # another build
#   CASES="100000:16 100000:256" scripts/bench_blis.sh             # some cases
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
SPEC=${BLIS_COMPARE:-../shared/bench/blis-compare}/w_k16.yaml
CASES=${CASES:-1000:1 10000:4 100000:16 1000000:16 100000:256}
[ -f "$SPEC" ] || { echo "skipped: $SPEC is absent (the BLIS comparison inputs)" >&2; exit 0; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
if [ -z "${BIN:-}" ]; then
    cargo build --release --quiet
    BIN=target/release/blis-cosim
fi
. scripts/rates.sh

# setup K: the cluster config and the spec at 20 req/s per instance, for K instances.
setup() {
    h100_cluster "$1"
    sed "s/^aggregate_rate: .*/aggregate_rate: $((20 * $1)).0/" "$SPEC" >"$TMP/w.yaml"
}

for case in $CASES; do
    n=${case%:*}
    k=${case#*:}
    setup "$k"
    args=(--cluster-config "$TMP/cluster.json" --workload-spec "$TMP/w.yaml" --num-requests "$n")
    timed "$n req / $k instances" "${args[@]}"
done
