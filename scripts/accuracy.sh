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
# The simulation models the vLLM release the run recorded (--vllm-version: asynchronous
# scheduling on from v0.14, the whole-prompt admission from v0.19), with what the run recorded
# of those two settings and of eager mode (--enforce-eager) overriding. vLLM TTFTs and
# latencies start at the client's arrival (validate --vllm-arrival client) unless
# ARRIVAL=queued.
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
    # Engine settings of the real run: dataset, request count, scheduler limits, dtypes, and
    # the release flags (its vLLM version, and what it recorded of asynchronous scheduling,
    # the whole-prompt admission and eager mode).
    read -r dataset num_reqs msq mnbt dtype kvdtype release < <(python3 - "$case/vllm/meta.json" <<'PY'
import json, re, sys
m = json.load(open(sys.argv[1]))
k = m["engine_kwargs"]
resolved = m.get("resolved_config", {})
sched = resolved.get("scheduler_config", {})
flags = []
version = re.match(r"(\d+)\.(\d+)", m.get("vllm_version", ""))
if version and (int(version[1]), int(version[2])) <= (0, 19):
    flags += ["--vllm-version", m["vllm_version"]]
elif version:
    print(f"note: vLLM {m['vllm_version']} is newer than the release modelled; simulated "
          "with 0.19's defaults", file=sys.stderr)
def recorded(key, section):
    value = k.get(key)
    return value if isinstance(value, bool) else section.get(key)
for key, on, off in [("async_scheduling", "--async-scheduling", "--no-async-scheduling"),
                     ("scheduler_reserve_full_isl", "--reserve-full-isl", "--no-reserve-full-isl")]:
    value = recorded(key, sched)
    if isinstance(value, bool):
        flags.append(on if value else off)
if recorded("enforce_eager", resolved.get("model_config", {})) is True:
    flags.append("--enforce-eager")
print(m["dataset_path"], m["num_requests"], k["max_num_seqs"], k["max_num_batched_tokens"],
      k.get("dtype") or "bfloat16", k.get("kv_cache_dtype") or "auto", " ".join(flags))
PY
)
    for backend in ${BACKENDS:-profile roofline}; do
    dir="$OUT/${name//\//_}/$backend"
    mkdir -p "$dir"
    latency=()
    [ "$backend" = profile ] && latency=(--profile-dir "$DATA/profiler/perf")
    echo "=== $name, $backend backend  ($num_reqs requests, max-num-seqs $msq, max-num-batched-tokens $mnbt, ${release:-no release recorded})"
    start=$EPOCHREALTIME
    # shellcheck disable=SC2086 # EXTRA and release are lists of flags
    if ! "$BIN" --cluster-config "$case/config.json" "${latency[@]}" \
        --dataset "$DATA/$dataset" --num-reqs "$num_reqs" --max-num-seqs "$msq" \
        --max-num-batched-tokens "$mnbt" --dtype "$dtype" --kv-cache-dtype "$kvdtype" $release \
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
