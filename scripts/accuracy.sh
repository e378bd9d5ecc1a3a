#!/usr/bin/env bash
# Accuracy against real vLLM runs: for every case under bench/examples (LLMServingSim's
# validation set), simulate it with the profile-DB backend and the engine settings recorded in
# the case's vllm/meta.json, then print the Diff% table of `blis-cosim validate`.
#   scripts/accuracy.sh                 # all cases
#   scripts/accuracy.sh RTX4090         # cases whose path contains RTX4090
#   PLOTS=1 scripts/accuracy.sh         # also write plots under target/accuracy/<case>/
#   ARRIVAL=queued scripts/accuracy.sh  # vLLM TTFTs from queued_ts (LLMServingSim's tables)
#   BACKENDS=roofline scripts/accuracy.sh   # one latency backend (default: profile roofline)
#   EXTRA="--host-model off" scripts/accuracy.sh  # extra flags for every simulation
# Asynchronous scheduling follows the real run: its resolved scheduler config when recorded,
# else vLLM's default (on since v0.11). vLLM TTFTs and latencies start at the client's arrival
# (validate --vllm-arrival client) unless ARRIVAL=queued.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-../shared/data/llmservingsim}
FILTER=${1:-}
OUT=target/accuracy
mkdir -p "$OUT"
cargo build --release --quiet
BIN=target/release/blis-cosim

for case in "$DATA"/bench/examples/*/*/; do
    case=${case%/}
    name=${case#"$DATA"/bench/examples/}
    [[ -z "$FILTER" || "$name" == *"$FILTER"* ]] || continue
    # Engine settings of the real run: dataset, request count, scheduler limits, dtypes.
    read -r dataset num_reqs msq mnbt dtype kvdtype async < <(python3 - "$case/vllm/meta.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
k = m["engine_kwargs"]
sched = m.get("resolved_config", {}).get("scheduler_config", {})
if "async_scheduling" in sched:
    on = bool(sched["async_scheduling"])
else:
    major, minor = (int(x) for x in m["vllm_version"].split(".")[:2])
    on = (major, minor) >= (0, 11)
print(m["dataset_path"], m["num_requests"], k["max_num_seqs"], k["max_num_batched_tokens"],
      k.get("dtype") or "bfloat16", k.get("kv_cache_dtype") or "auto",
      "--async-scheduling" if on else "--no-async-scheduling")
PY
)
    for backend in ${BACKENDS:-profile roofline}; do
    dir="$OUT/${name//\//_}/$backend"
    mkdir -p "$dir"
    latency=()
    [ "$backend" = profile ] && latency=(--profile-dir "$DATA/profiler/perf")
    echo "=== $name, $backend backend  ($num_reqs requests, max-num-seqs $msq, max-num-batched-tokens $mnbt, $async)"
    start=$EPOCHREALTIME
    # shellcheck disable=SC2086 # EXTRA is a list of flags
    if ! "$BIN" --cluster-config "$case/config.json" "${latency[@]}" \
        --dataset "$DATA/$dataset" --num-reqs "$num_reqs" --max-num-seqs "$msq" \
        --max-num-batched-tokens "$mnbt" --dtype "$dtype" --kv-cache-dtype "$kvdtype" "$async" \
        ${EXTRA:-} --output "$dir/sim.csv" --summary-json "$dir/summary.json" >"$dir/summary.txt" 2>"$dir/stderr.txt"; then
        echo "    not simulated: $(tail -n 3 "$dir/stderr.txt")"
        continue
    fi
    end=$EPOCHREALTIME
    printf '    simulated in %.0f ms wall\n' "$(echo "($end - $start) * 1000" | bc -l)"
    plots=()
    [ -n "${PLOTS:-}" ] && plots=(--plots "$dir")
    "$BIN" validate --vllm "$case/vllm/requests.jsonl" --sim "$dir/sim.csv" \
        --sim-summary "$dir/summary.json" \
        --vllm-arrival "${ARRIVAL:-client}" --json "$dir/validation.json" "${plots[@]}"
    done
done
