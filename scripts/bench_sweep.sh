#!/usr/bin/env bash
# Wall time of a 1,000-point sweep on the 300-request ShareGPT profile case (RTX4090,
# Llama-3.1-8B, profile-DB backend; the case of scripts/accuracy.sh): max-num-seqs (25 values)
# x max-num-batched-tokens (40 values), beside the wall time of one run of the binary.
#   scripts/bench_sweep.sh              # all cores
#   JOBS=1 scripts/bench_sweep.sh       # one worker thread
#   RAY=1 scripts/bench_sweep.sh        # also on a local Ray with 2 CPUs (needs scripts/python_env.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=$(cd "${DATA:-../shared/data/llmservingsim}" && pwd)
CASE=$DATA/bench/examples/RTX4090/Llama-3.1-8B
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cargo build --release --quiet
BIN=$PWD/target/release/blis-cosim

cat >"$TMP/bench.yaml" <<YAML
base:
  cluster_config: $CASE/config.json
  flags:
    profile-dir: $DATA/profiler/perf
    dataset: $DATA/workloads/sharegpt-llama-3.1-8b-300-sps10.jsonl
    num-requests: 300
    dtype: bfloat16
    async-scheduling: true
axes:
  - flag: max-num-seqs
    range: {start: 16, stop: 400, step: 16}
  - flag: max-num-batched-tokens
    range: {start: 512, stop: 10496, step: 256}
YAML

# One run of the base case (max-num-seqs 256, max-num-batched-tokens 2048), best and median of 10.
times=()
for _ in $(seq 10); do
    t0=$EPOCHREALTIME
    "$BIN" --cluster-config "$CASE/config.json" --profile-dir "$DATA/profiler/perf" \
        --dataset "$DATA/workloads/sharegpt-llama-3.1-8b-300-sps10.jsonl" --num-requests 300 \
        --dtype bfloat16 --async-scheduling --max-num-seqs 256 --max-num-batched-tokens 2048 >/dev/null 2>&1
    t1=$EPOCHREALTIME
    times+=("$(echo "($t1 - $t0) * 1000" | bc -l)")
done
printf '%s\n' "${times[@]}" | sort -g | awk '{ v[NR] = $1 } END {
    printf "single run (process):   best %7.1f ms   median %7.1f ms wall\n", v[1], v[int((NR + 1) / 2)] }'
TIMEFORMAT='%U %S'
{ time "$BIN" --cluster-config "$CASE/config.json" --profile-dir "$DATA/profiler/perf" \
    --dataset "$DATA/workloads/sharegpt-llama-3.1-8b-300-sps10.jsonl" --num-requests 300 \
    --dtype bfloat16 --async-scheduling --max-num-seqs 256 --max-num-batched-tokens 2048 >/dev/null 2>&1; } 2>"$TMP/time1"
read -r user sys <"$TMP/time1"
printf 'single run (process):   %.1f ms CPU\n' "$(echo "($user + $sys) * 1000" | bc -l)"

jobs=()
[ -n "${JOBS:-}" ] && jobs=(--jobs "$JOBS")
TIMEFORMAT='%R %U %S'
{ time "$BIN" sweep --space "$TMP/bench.yaml" --out "$TMP/local" "${jobs[@]}" \
    --objectives 'p99_ttft_ms:min,output_throughput:max' >"$TMP/local.txt" 2>"$TMP/local.err"; } 2>"$TMP/time"
read -r wall user sys <"$TMP/time"
head -1 "$TMP/local.txt"
awk -F, 'NR > 1 { s += $2; n++ } END { printf "per point (in process): mean %6.1f ms wall over %d points\n", s / n * 1000, n }' "$TMP/local/timings.csv"
printf 'sweep of 1000 points:   %7.2f s wall, %.2f s CPU (%s worker threads; load average %s)\n' \
    "$wall" "$(echo "$user + $sys" | bc -l)" "${JOBS:-$(nproc)}" "$(cut -d' ' -f1-3 /proc/loadavg)"

if [ -n "${RAY:-}" ]; then
    t0=$EPOCHREALTIME
    PYTHONPATH=python RAY_USAGE_STATS_ENABLED=0 target/pyvenv/bin/python -m blis_cosim_ray \
        --space "$TMP/bench.yaml" --out "$TMP/ray" --binary "$BIN" --num-cpus 2 --chunk 50 \
        --objectives 'p99_ttft_ms:min,output_throughput:max' >/dev/null 2>"$TMP/ray.err"
    t1=$EPOCHREALTIME
    printf 'same sweep on Ray:      %7.2f s wall (local Ray, 2 CPUs, 50 points a task, Ray start included)\n' \
        "$(echo "$t1 - $t0" | bc -l)"
    cmp -s "$TMP/local/results.csv" "$TMP/ray/results.csv" && echo "results.csv: identical" \
        || echo "results.csv: DIFFER"
fi
