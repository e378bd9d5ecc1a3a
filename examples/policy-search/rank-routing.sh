#!/usr/bin/env bash
# Ranks three routing policies on one workload by fitness (README, docs/src/evaluation.md):
# the bursty two-tenant workload (600 requests) on four H100s running Llama-3.1-8B, TTFT
# target 300 ms, fitness goodput=2,ttft_p99=1,jain_attainment=1.
#   examples/policy-search/rank-routing.sh [path/to/blis-cosim]
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-target/release/blis-cosim}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
for policy in RR least-loaded always-busiest; do
    "$BIN" --cluster-config examples/policy-search/cluster-4xh100.json \
        --workload-spec examples/policy/bursty-two-tenant.yaml --num-requests 600 \
        --slo-ttft 300 --request-routing-policy "$policy" \
        --fitness-weights goodput=2,ttft_p99=1,jain_attainment=1 \
        --evaluation-json "$OUT/$policy.json" >/dev/null 2>&1
done
python3 - "$OUT" <<'PY'
import json, pathlib, sys
rows = []
for path in pathlib.Path(sys.argv[1]).glob("*.json"):
    e = json.loads(path.read_text())
    s = e["metrics"]["slo"]
    rows.append((e["fitness"]["total"], path.stem, s["all"]["attainment"],
                 s["all"]["ttft_ms"]["p99"], s["jain_fairness_attainment"],
                 e["anomalies"]["hol_blocking"], e["anomalies"]["priority_inversions"],
                 e["anomalies"]["kv_thrashing"]))
print(f"{'rank':<5}{'policy':<16}{'fitness':>8}{'attained':>10}{'TTFT p99 ms':>13}{'Jain (att.)':>12}{'HOL':>6}{'inv.':>6}{'thrash':>8}")
for rank, (f, name, att, p99, jain, hol, inv, thrash) in enumerate(sorted(rows, reverse=True), 1):
    print(f"{rank:<5}{name:<16}{f:>8.4f}{100 * att:>9.1f}%{p99:>13.1f}{jain:>12.4f}{hol:>6}{inv:>6}{thrash:>8}")
PY
