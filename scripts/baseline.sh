#!/usr/bin/env bash
# Runs a fixed set of cases with a given binary and keeps every output, so that two builds can
# be compared byte for byte (a refactor must leave them identical):
#   scripts/baseline.sh BIN OUT_DIR        # e.g. a saved main binary, then target/release/...
#   diff -r -x stderr -I wall_time_s OUT_A OUT_B   # must print nothing
# Arguments after OUT_DIR are added to every case, e.g. to show that a flag naming a default
# changes nothing (`scripts/baseline.sh BIN OUT_B --engine vllm`, then the diff above).
# Each case writes OUT_DIR/<case>/ (CSV, summary JSON, and per case its time series, decision
# trace, sessions or evaluation JSON) plus its stdout; stderr goes to <case>/stderr, which is
# not compared (it carries wall times, as does the evaluation JSON's wall_time_s). Cases
# needing ../shared data are skipped, with a line saying so, when it is absent. The co-simulated runs need the ASTRA-Sim double of the tests
# (`cargo test --test astra`), not this script.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BIN OUT_DIR [ARG...]" >&2; exit 2; }
BIN=$(realpath "$1")
OUT=$2
shift 2
EXTRA=("$@")
cd "$(dirname "$0")/.."
ROOT=$PWD
SHARED=${BLIS_COSIM_SHARED:-../shared}
LS=$SHARED/data/llmservingsim
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# run CASE ARGS...: runs BIN with ARGS, its outputs under OUT/CASE.
run() {
    local case=$1
    shift
    local dir=$OUT/$case
    rm -rf "$dir"
    mkdir -p "$dir"
    if ! "$BIN" "$@" "${EXTRA[@]}" --output "$dir/out.csv" --summary-json "$dir/summary.json" \
        >"$dir/stdout" 2>"$dir/stderr"; then
        echo "$case: failed (exit $?), see $dir/stderr" >&2
        return 1
    fi
    echo "$case: ok"
}

# summary_only CASE ARGS...: runs BIN with ARGS writing no request CSV, only the summary JSON
# and stdout (a run that lists no inter-token latencies pools them another way).
summary_only() {
    local case=$1
    shift
    local dir=$OUT/$case
    rm -rf "$dir"
    mkdir -p "$dir"
    if ! "$BIN" "$@" "${EXTRA[@]}" --summary-json "$dir/summary.json" >"$dir/stdout" \
        2>"$dir/stderr"; then
        echo "$case: failed (exit $?), see $dir/stderr" >&2
        return 1
    fi
    echo "$case: ok"
}

# LLMServingSim's example cluster configs on its example trace with its measured profiles.
if [ -d "$LS/configs/cluster" ]; then
    TRACE=$LS/workloads/example_trace.jsonl
    for config in single_node_single_instance single_node_multi_instance \
        single_node_pd_instance single_node_dp_instance single_node_moe_dp_ep_instance \
        single_node_pp_instance single_node_tp_pp_instance single_node_moe_dp_pp_instance \
        single_node_cxl_instance single_node_power_instance single_node_pim_instance \
        single_node_moe_pd_instance; do
        run "lss_${config#single_node_}" --cluster-config "$LS/configs/cluster/$config.json" \
            --profile-dir "$LS/profiler/perf" --dataset "$TRACE"
    done
    run bench_sharegpt_roofline --dataset "$LS/workloads/sharegpt-llama-3.1-8b-300-sps10.jsonl" \
        --hardware RTXPRO6000
    run bench_sharegpt_profile --dataset "$LS/workloads/sharegpt-llama-3.1-8b-300-sps10.jsonl" \
        --cluster-config "$LS/configs/cluster/single_node_single_instance.json" \
        --profile-dir "$LS/profiler/perf"
    run concurrency_gate --dataset "$LS/workloads/sharegpt-llama-3.1-8b-300-sps10.jsonl" \
        --hardware RTXPRO6000 --max-in-flight 8
    run multi_prefix_affinity --cluster-config "$LS/configs/cluster/single_node_multi_instance.json" \
        --profile-dir "$LS/profiler/perf" --dataset "$TRACE" --request-routing-policy prefix-affinity
else
    echo "LLMServingSim cases: skipped ($LS absent)"
fi

# Built-in scenarios: bursts, SLO mixes, agentic sessions (ReAct, fork-join, coding sessions
# with client timeouts), a prefix-heavy one.
for scenario in bursty-traffic mixed-slo react-search fork-join-research coding-assistant \
    prefix-heavy; do
    run "scenario_$scenario" --scenario "$scenario" --num-requests 200 \
        --timeseries "$OUT/scenario_$scenario.timeseries.csv"
done
run agentic_sessions --scenario react-search --num-requests 60 \
    --sessions-output "$OUT/agentic_sessions.sessions.csv"

# The control plane: the worked example (token bucket per tenant, static priorities,
# priority-fcfs), then a saturated gateway queue that rejects and expires, with its decision
# trace, and a weighted router's explained decisions.
run control_plane --workload-spec examples/policy/bursty-two-tenant.yaml \
    --policy-config examples/policy/protect-critical.yaml --num-requests 600 \
    --evaluation-json "$OUT/control_plane.evaluation.json"
run gateway_trace --workload-spec examples/policy/bursty-two-tenant.yaml --num-requests 600 \
    --flow-control --max-gateway-queue-depth 10 --request-ttl 300ms --max-concurrency 8 \
    --saturation-detector concurrency --admission-latency 1ms --routing-latency 500us \
    --trace-level detailed --trace-output "$OUT/gateway_trace.trace.jsonl" \
    --timeseries "$OUT/gateway_trace.timeseries.csv"
run decision_trace --scenario mixed-slo --num-requests 200 --request-routing-policy weighted \
    --routing-weights queue=1,prefix=1 --trace-level detailed --counterfactual-k 2 \
    --trace-output "$OUT/decision_trace.trace.jsonl"

# Client timeouts on an overloaded instance: alone, behind a control plane (timeouts in the
# gateway queue too), and on a P/D pair.
cat >"$TMP/timeouts.yaml" <<'YAML'
version: "2"
seed: 11
category: language
aggregate_rate: 12
num_requests: 600
clients:
  - id: impatient
    tenant_id: web
    slo_class: critical
    rate_fraction: 0.5
    timeout: 1500000
    arrival: { process: poisson }
    input_distribution: { type: gaussian, params: { mean: 800, std_dev: 200, min: 50, max: 2000 } }
    output_distribution: { type: exponential, params: { mean: 200 } }
  - id: patient
    tenant_id: bulk
    slo_class: batch
    rate_fraction: 0.5
    timeout: 6000000
    arrival: { process: gamma, cv: 3 }
    input_distribution: { type: gaussian, params: { mean: 1500, std_dev: 300, min: 100, max: 3000 } }
    output_distribution: { type: constant, params: { value: 300 } }
YAML
run timeouts --workload-spec "$TMP/timeouts.yaml" --trace-level detailed \
    --trace-output "$OUT/timeouts.trace.jsonl"
run timeouts_control --workload-spec "$TMP/timeouts.yaml" --flow-control --max-concurrency 16 \
    --saturation-detector concurrency --admission-latency 2ms --routing-latency 1ms \
    --trace-level detailed --trace-output "$OUT/timeouts_control.trace.jsonl"
if [ -d "$LS/configs/cluster" ]; then
    run timeouts_pd --workload-spec "$TMP/timeouts.yaml" \
        --cluster-config "$LS/configs/cluster/single_node_pd_instance.json" \
        --profile-dir "$LS/profiler/perf" --trace-level detailed \
        --trace-output "$OUT/timeouts_pd.trace.jsonl"
fi

# Autoscaling: the diurnal example under each drain mode (an immediate drain drops requests).
for drain in wait immediate redirect; do
    run "autoscale_$drain" --scenario diurnal-cycle --model Qwen3-32B \
        --policy-config examples/policy/autoscale-diurnal.yaml --drain-mode "$drain" \
        --timeseries "$OUT/autoscale_$drain.timeseries.csv" --trace-level detailed \
        --trace-output "$OUT/autoscale_$drain.trace.jsonl"
done
# The same kinds of runs without a request CSV: the BLIS comparison spec, P/D, DP, PP,
# timeouts, autoscaling and agentic sessions.
BLIS=$SHARED/bench/blis-compare
if [ -d "$BLIS" ]; then
    summary_only nocsv_blis_k16 --cluster-config "$BLIS/cluster_k16.json" \
        --workload-spec "$BLIS/w_k16.yaml" --num-requests 20000
fi
if [ -d "$LS/configs/cluster" ]; then
    for config in single_node_pd_instance single_node_dp_instance single_node_pp_instance \
        single_node_moe_dp_pp_instance; do
        summary_only "nocsv_${config#single_node_}" \
            --cluster-config "$LS/configs/cluster/$config.json" \
            --profile-dir "$LS/profiler/perf" --dataset "$TRACE"
    done
fi
summary_only nocsv_timeouts --workload-spec "$TMP/timeouts.yaml"
summary_only nocsv_autoscale --scenario diurnal-cycle --model Qwen3-32B \
    --policy-config examples/policy/autoscale-diurnal.yaml --drain-mode redirect
summary_only nocsv_react --scenario react-search --num-requests 200
summary_only nocsv_prefix_heavy --scenario prefix-heavy --num-requests 300 \
    --request-routing-policy prefix-affinity
echo "outputs in $OUT"
