#!/usr/bin/env bash
# The built-in diurnal-cycle scenario on Qwen3-32B / H100-SXM: fixed clusters of 2, 3 and 4
# replicas against threshold autoscaling (examples/policy/autoscale-diurnal.yaml). Prints p99
# TTFT and replica-seconds of each; with PLOTS=DIR also draws the autoscaled run's pictures.
#   scripts/autoscale_diurnal.sh
#   PLOTS=docs/src/autoscale scripts/autoscale_diurnal.sh
set -euo pipefail
cd "$(dirname "$0")/.."
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cargo build --release --quiet
BIN=target/release/blis-cosim

# fixed_cluster N: a cluster config of N Qwen3-32B replicas on one node.
fixed_cluster() {
    python3 - "$1" "$TMP/fixed$1.json" <<'PY'
import json, sys
n = int(sys.argv[1])
inst = {"model_name": "Qwen3-32B", "hardware": "H100-SXM", "num_npus": 1, "tp_size": 1,
        "pd_type": None, "npu_mem": {"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}}
node = {"num_instances": n, "cpu_mem": {"mem_size": 512, "mem_bw": 256, "mem_latency": 0},
        "instances": [inst] * n}
json.dump({"num_nodes": 1, "link_bw": 112.5, "link_latency": 0, "nodes": [node]},
          open(sys.argv[2], "w"))
PY
}

# report LABEL SUMMARY_JSON REPLICAS: p99 TTFT and replica-seconds (REPLICAS x duration for
# a fixed cluster, the billed replica-seconds for the autoscaled one).
report() {
    python3 - "$@" <<'PY'
import json, sys
label, path, n = sys.argv[1], sys.argv[2], sys.argv[3]
s = json.load(open(path))
a = s.get("autoscale")
rs = a["billed_replica_seconds"] if a else int(n) * s["simulator"]["total_clocks_ns"] / 1e9
extra = f"  ups/downs {a['scale_ups']}/{a['scale_downs']}  oscillations {a['scale_oscillations']}  cost {a['cost']:.3f}" if a else ""
print(f"{label:<22} p99 TTFT {s['p99_ttft_ms']:9.2f} ms  replica-seconds {rs:8.1f}{extra}")
PY
}

for n in 2 3 4; do
    fixed_cluster "$n"
    "$BIN" --scenario diurnal-cycle --cluster-config "$TMP/fixed$n.json" \
        --summary-json "$TMP/fixed$n.out.json" >/dev/null 2>&1
    report "fixed $n" "$TMP/fixed$n.out.json" "$n"
done
plots=()
if [[ -n "${PLOTS:-}" ]]; then plots=(--plots "$PLOTS"); fi
"$BIN" --scenario diurnal-cycle --model Qwen3-32B \
    --policy-config examples/policy/autoscale-diurnal.yaml \
    --summary-json "$TMP/auto.json" "${plots[@]}" >/dev/null 2>&1
report "threshold autoscaling" "$TMP/auto.json" 0
