#!/usr/bin/env bash
# Where a run's CPU time goes: runs blis-cosim's main job in process under a sampling
# profiler (pprof-rs, fetched from crates.io and built on first use: no perf, no system
# package, no kernel setting) and prints the functions holding the most samples, by the one
# running and by the simulator's functions anywhere on the stack, per thread too. Every
# sampled stack goes to target/profile/<case>.folded, the folded format flame-graph tools read
# (inferno-flamegraph, speedscope.app, flamegraph.pl).
#   scripts/profile.sh                     # the BLIS spec, 100K requests on 16 instances
#   CASE=blis256 scripts/profile.sh        # the same spec on 256 instances (20 req/s each)
#   CASE=mooncake scripts/profile.sh       # the Mooncake trace on 8 instances, round-robin
#   scripts/profile.sh ARGS...             # any main job: blis-cosim's own arguments
#   RUNS=10 RATE=4000 TOP=25 scripts/profile.sh
# RUNS: runs sampled together (default 10): the kernel serves the sampling timer at its tick,
# often 250 a CPU second whatever RATE asks, so a quarter-second run alone gives ~60 samples.
# The cases are the speed comparisons' (scripts/bench_blis.sh, scripts/bench_mooncake.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet -p blis-cosim-profile
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
. scripts/rates.sh
mkdir -p target/profile

if [ $# -gt 0 ]; then
    name=${CASE:-custom}
    args=("$@")
else
    name=${CASE:-blis16}
    case $name in
    blis16 | blis256)
        k=${name#blis}
        spec=${BLIS_COMPARE:-../shared/bench/blis-compare}/w_k16.yaml
        [ -f "$spec" ] || { echo "skipped: $spec is absent (the BLIS comparison inputs)" >&2; exit 0; }
        h100_cluster "$k"
        sed "s/^aggregate_rate: .*/aggregate_rate: $((20 * k)).0/" "$spec" >"$TMP/w.yaml"
        args=(--cluster-config "$TMP/cluster.json" --workload-spec "$TMP/w.yaml"
            --num-requests 100000 --threads 1 --output /dev/null)
        ;;
    mooncake)
        trace=${BLIS_COSIM_TRACES:-../shared/data/traces}/mooncake-conversation.jsonl
        [ -f "$trace" ] || { echo "skipped: $trace is absent (the Mooncake trace)" >&2; exit 0; }
        h100_cluster 8
        args=(--cluster-config "$TMP/cluster.json" --dataset "$trace"
            --request-routing-policy round-robin --block-size 16)
        ;;
    *)
        echo "CASE=$name: expected blis16, blis256 or mooncake (or give blis-cosim's arguments)" >&2
        exit 2
        ;;
    esac
fi

BLIS_COSIM_PROFILE_RUNS=${RUNS:-10} BLIS_COSIM_PROFILE_RATE=${RATE:-4000} \
    BLIS_COSIM_PROFILE_TOP=${TOP:-25} BLIS_COSIM_PROFILE_STACKS="target/profile/$name.folded" \
    target/release/blis-cosim-profile "${args[@]}" >/dev/null
echo "stacks: target/profile/$name.folded"
