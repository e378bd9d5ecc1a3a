# Sourced by scripts/bench*.sh: what a timed run simulated, per wall second.
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
