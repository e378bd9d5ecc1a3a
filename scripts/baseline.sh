#!/usr/bin/env bash
# Outputs of a fixed set of runs, for checking that a refactor changes no output byte.
#   scripts/baseline.sh run BIN DIR    # run the set with binary BIN into DIR (replaced)
#   scripts/baseline.sh compare A B    # compare two such folders; exit 1 on any difference
# The set: the three LLMServingSim bench cases (profile and roofline), LLMServingSim example
# configs (P/D, DP, PP, MoE DP+PP, TP+PP, CXL, power, PIM, multi-instance with RAND routing),
# built-in scenarios (three agentic) with the other routing policies, a control-plane run with
# a policy bundle and its evaluation JSON, an autoscaled run, and two sweeps. Each run keeps
# its request CSV, summary JSON, stdout and exit status (stderr holds wall times: kept, not
# compared; the evaluation's wall time is zeroed). Needs ../shared/data (the LLMServingSim data).
#   ASTRA_DOUBLE=PATH adds two co-simulated runs against that ASTRA-Sim (e.g. a wrapper
#   running the tests' double: BLIS_ASTRA_DOUBLE=fork exec target/release/deps/astra-<hash>).
set -uo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-../shared/data/llmservingsim}
CFG=$DATA/configs/cluster
W=$DATA/workloads
BENCH=$DATA/bench/examples

# case NAME ARGS...: one run of $BIN into $OUT/NAME.
case_run() {
    local name=$1
    shift
    local dir=$OUT/$name
    mkdir -p "$dir"
    "$BIN" "$@" --output "$dir/out.csv" --summary-json "$dir/summary.json" \
        >"$dir/stdout.txt" 2>"$dir/stderr.txt"
    echo $? >"$dir/status"
    printf '%-28s exit %s\n' "$name" "$(cat "$dir/status")"
}

# sweep NAME SPEC [FLAGS...]: a sweep of $BIN into $OUT/NAME (its timings and log dropped).
sweep_run() {
    local name=$1 spec=$2
    shift 2
    local dir=$OUT/$name
    mkdir -p "$dir"
    "$BIN" sweep --space "$spec" --out "$dir/out" --jobs 2 "$@" >"$dir/stdout.txt" 2>"$dir/stderr.txt"
    echo $? >"$dir/status"
    rm -f "$dir/out/timings.csv" "$dir/out/sweep.log"
    printf '%-28s exit %s\n' "$name" "$(cat "$dir/status")"
}

run_set() {
    local sharegpt=$W/sharegpt-llama-3.1-8b-300-sps10.jsonl
    local profile=(--profile-dir "$DATA/profiler/perf")
    case_run bench-rtx4090-profile --cluster-config "$BENCH/RTX4090/Llama-3.1-8B/config.json" \
        "${profile[@]}" --dataset "$sharegpt" --max-num-seqs 256
    case_run bench-rtxpro6000-profile --cluster-config "$BENCH/RTXPRO6000/Llama-3.1-8B/config.json" \
        "${profile[@]}" --dataset "$sharegpt"
    case_run bench-rtxpro6000-roofline --cluster-config "$BENCH/RTXPRO6000/Llama-3.1-8B/config.json" \
        --dataset "$sharegpt" --async-scheduling
    case_run bench-moe-profile --cluster-config "$BENCH/RTXPRO6000/Qwen3-30B-A3B-Instruct-2507/config.json" \
        "${profile[@]}" --dataset "$W/sharegpt-qwen3-30b-a3b-300-sps10.jsonl"
    case_run bench-moe-roofline --cluster-config "$BENCH/RTXPRO6000/Qwen3-30B-A3B-Instruct-2507/config.json" \
        --dataset "$W/sharegpt-qwen3-30b-a3b-300-sps10.jsonl"
    local trace=$W/example_trace.jsonl
    case_run lss-pd --cluster-config "$CFG/single_node_pd_instance.json" --dataset "$trace"
    case_run lss-dp --cluster-config "$CFG/single_node_dp_instance.json" --dataset "$trace"
    case_run lss-pp --cluster-config "$CFG/single_node_pp_instance.json" --dataset "$trace"
    case_run lss-moe-dp-pp --cluster-config "$CFG/single_node_moe_dp_pp_instance.json" --dataset "$trace"
    case_run lss-tp-pp --cluster-config "$CFG/single_node_tp_pp_instance.json" --dataset "$trace"
    case_run lss-cxl --cluster-config "$CFG/single_node_cxl_instance.json" --dataset "$trace" \
        --prefix-storage CXL
    case_run lss-power --cluster-config "$CFG/single_node_power_instance.json" --dataset "$trace"
    # The keys of LLMServingSim's DDR4_8GB_3200_pim.ini that the PIM model reads.
    mkdir -p "$OUT/pim"
    printf '%s\n' '[dram_structure]' 'bankgroups = 2' 'banks_per_group = 4' 'rows = 65536' \
        'columns = 1024' 'device_width = 16' '[timing]' 'tCK = 0.63' 'CL = 22' '[system]' \
        'channel_size = 8192' 'bus_width = 64' '[other]' 'data_rate = 3200' 'idle_power = 623' \
        'peak_power = 3803' >"$OUT/pim/DDR4_8GB_3200_pim.ini"
    case_run lss-pim --cluster-config "$CFG/single_node_pim_instance.json" --dataset "$trace" \
        --enable-attn-offloading --pim-config-dir "$OUT/pim"
    case_run lss-multi-rand --cluster-config "$CFG/single_node_multi_instance.json" --dataset "$trace" \
        --request-routing-policy RAND --timeseries "$OUT/lss-multi-rand/series.csv"
    case_run scenario-mixed-slo --scenario mixed-slo --num-requests 400
    case_run scenario-react-search --scenario react-search --num-requests 200 \
        --sessions-output "$OUT/scenario-react-search/sessions.csv"
    case_run scenario-fork-join --scenario fork-join-research --num-requests 200
    case_run scenario-mcts-code --scenario mcts-code --num-requests 200
    case_run scenario-prefix-affinity --scenario prefix-heavy --num-requests 300 \
        --cluster-config "$CFG/single_node_multi_instance.json" --request-routing-policy prefix-affinity
    case_run scenario-least-loaded --scenario prefix-heavy --num-requests 300 \
        --cluster-config "$CFG/single_node_multi_instance.json" --request-routing-policy least-loaded
    case_run scenario-scorers --scenario prefix-heavy --num-requests 300 \
        --cluster-config "$CFG/single_node_multi_instance.json" --request-routing-policy weighted \
        --routing-scorers prefix-affinity:2,queue-depth:1 --snapshot-refresh-interval 5ms
    case_run control-plane --workload-spec examples/policy/bursty-two-tenant.yaml --num-requests 400 \
        --policy-config examples/policy/protect-critical.yaml --flow-control --request-ttl 20s \
        --admission-latency 20us --routing-latency 100us --slo-targets critical:300ms,batch:10s \
        --evaluation-json "$OUT/control-plane/evaluation.json" --trace-level decisions \
        --trace-output "$OUT/control-plane/trace.jsonl"
    case_run control-tier-shed --scenario unfair-tenants --num-requests 300 --admission-policy tier-shed \
        --tier-shed-threshold 3 --priority-policy deadline-aware --scheduler priority-fcfs \
        --preemption-policy priority --slo-targets critical:300ms,batch:5s
    case_run autoscale --scenario diurnal-cycle --model Qwen3-32B --num-requests 600 \
        --policy-config examples/policy/autoscale-diurnal.yaml --timeseries "$OUT/autoscale/series.csv"
    case_run autoscale-flags --scenario bursty-traffic --num-requests 400 --autoscale queue-depth \
        --autoscale-max 3 --autoscale-interval 2s --autoscale-cooldown 4s --drain-mode redirect
    case_run autoscale-pd --cluster-config "$CFG/single_node_pd_instance.json" --scenario bursty-traffic \
        --num-requests 300 --autoscale threshold --autoscale-max 2 --autoscale-interval 2s
    sweep_run sweep-grid examples/sweeps/scheduler-grid.yaml
    sweep_run sweep-policy examples/sweeps/policy-bucket.yaml
    if [ -n "${ASTRA_DOUBLE:-}" ]; then
        case_run astra-pd --cluster-config "$CFG/single_node_pd_instance.json" --dataset "$trace" \
            --astra-sim "$ASTRA_DOUBLE"
        case_run astra-single --cluster-config "$CFG/single_node_single_instance.json" --dataset "$trace" \
            --astra-sim "$ASTRA_DOUBLE"
    fi
}

case ${1:-} in
run)
    BIN=$(realpath "$2")
    OUT=$3
    rm -rf "$OUT"
    mkdir -p "$OUT"
    OUT=$(realpath "$OUT")
    run_set
    # The evaluation's wall time differs from run to run.
    find "$OUT" -name evaluation.json -exec sed -i -E 's/"wall_time_s": ?[0-9.e+-]+/"wall_time_s":0/' {} +
    ;;
compare)
    # Everything but stderr (wall times).
    if diff -r --exclude=stderr.txt "$2" "$3" >/dev/null; then
        echo "identical: $(find "$2" -type f ! -name stderr.txt | wc -l) files"
    else
        diff -r --exclude=stderr.txt -q "$2" "$3"
        exit 1
    fi
    ;;
*)
    sed -n '2,11p' "$0"
    exit 2
    ;;
esac
