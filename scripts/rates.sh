# Sourced by scripts/bench*.sh: what a timed run simulated, per wall second; the H100 cluster
# and the timing loop the BLIS and Mooncake comparisons share.
#   rates LABEL SECONDS ARGS...   # ARGS: the timed run's arguments, without its outputs
# Runs the binary ($BIN) once more, untimed, with a summary JSON and a time series, and prints
# the generated tokens per second and the events per second of a run that took SECONDS: the
# events are the instances' steps (the time series' `steps` column, summed) plus the requests
# (each arrives and ends once). Needs $TMP.
rates() {
    local label=$1 seconds=$2
    shift 2
    "$BIN" "$@" --summary-json "$TMP/rates.json" --timeseries "$TMP/rates.csv" \
        >/dev/null 2>&1 || { echo "$label: the counting run failed" >&2; return 1; }
    python3 - "$label" "$seconds" "$TMP/rates.json" "$TMP/rates.csv" <<'PY'
import csv, json, sys
label, seconds = sys.argv[1], float(sys.argv[2])
summary = json.load(open(sys.argv[3]))
with open(sys.argv[4]) as f:
    steps = sum(int(row["steps"]) for row in csv.DictReader(f))
tokens = summary["total_output_tokens"]
requests = summary["completed"]
events = steps + 2 * requests
print(f"{label:<44} {tokens / seconds / 1e6:8.2f} M tokens/s  {events / seconds / 1e6:8.2f} M events/s"
      f"  ({tokens} tokens, {steps} steps, {requests} requests in {seconds:.3f} s)")
PY
    rm -f "$TMP/rates.json" "$TMP/rates.csv"
}

# h100_cluster K: writes $TMP/cluster.json, K Llama-3.1-8B H100 instances, 8 per node. The
# scheduler limits are the ones every recorded speed number used (128 sequences, 2,048 tokens;
# vLLM's own default on an H100 is 1,024 and 8,192), so timings stay comparable across passes.
h100_cluster() {
    python3 - "$1" "$TMP/cluster.json" <<'PY'
import json, sys
k = int(sys.argv[1])
instance = {"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM", "pd_type": None,
            "tp_size": 1, "npu_mem": {"mem_size": 80, "mem_bw": 3350, "mem_latency": 0},
            "max_num_seqs": 128, "max_num_batched_tokens": 2048}
cpu = {"mem_size": 512, "mem_bw": 256, "mem_latency": 0}
sizes = [8] * (k // 8) + ([k % 8] if k % 8 else [])
nodes = [{"num_instances": n, "cpu_mem": cpu, "instances": [instance] * n} for n in sizes]
json.dump({"num_nodes": len(nodes), "link_bw": 16, "link_latency": 0, "nodes": nodes},
          open(sys.argv[2], "w"), indent=1)
PY
}

# timed LABEL ARGS...: runs the binary with ARGS $RUNS times and prints the best and median
# wall time, then the rates at the median.
timed() {
    local label=$1 times=() t0 t1 sorted best median
    shift
    for _ in $(seq "$RUNS"); do
        t0=$EPOCHREALTIME
        "$BIN" "$@" >/dev/null 2>&1
        t1=$EPOCHREALTIME
        times+=("$(echo "$t1 - $t0" | bc -l)")
    done
    sorted=$(printf '%s\n' "${times[@]}" | sort -g)
    best=$(head -1 <<<"$sorted")
    median=$(awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }' <<<"$sorted")
    printf '%-44s best %8.3f s   median %8.3f s   (%d runs)\n' "$label" "$best" "$median" "$RUNS"
    rates "  at the median" "$median" "$@"
}
