#!/usr/bin/env bash
# Scale benchmark (issues 19 and 36): N generated requests (default 1,000,000; Poisson, no
# token ids) on one H100 instance at 20 req/s, on 16 H100 instances (2 nodes x 8,
# scripts/bench_cluster.sh's cluster) at 320 req/s, and on 10,000 H100 instances (1,250 nodes
# x 8, round-robin routing: RR) at 200,000 req/s; then N requests generated in memory from the
# mixed-slo and prefix-heavy scenarios (streamed), N requests in conversations of five turns
# and in N/1,000 conversations of 1,000 turns, from 100 closed-loop users, and in ReAct agent
# sessions of 11 LLM calls (sessions, streamed; a conversation drawn a turn at a time), and
# 100,000 autoscaler replica slots. Prints each run's wall time, CPU
# time and peak RSS (GNU time), with and without the per-request CSV, and
# (unless RATES=0) the generated tokens and events per second at that wall time
# (scripts/rates.sh: one more, untimed run per case). The bounds: peak RSS under 500 MB for 1
# and 16 instances and for the scenarios and specs, under 2 GB and 60 s for 10,000 instances.
#   scripts/bench_scale.sh              # 1,000,000 requests
#   CSV=0 scripts/bench_scale.sh 10000000   # without the CSV cases (10M rows: ~26 GB)
#   ONLY=big scripts/bench_scale.sh     # only the 10,000-instance and scenario cases
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
CSV=${CSV:-1}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

cargo build --release --quiet
BIN=target/release/blis-cosim
. scripts/rates.sh
RATES=${RATES:-1}

ONLY=${ONLY:-all}

# cluster NODES PATH: a cluster config of NODES nodes of 8 Llama-3.1-8B H100 instances.
cluster() {
    python3 - "$1" "$2" <<'PY'
import json, sys
instance = {"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM", "pd_type": None,
            "tp_size": 1, "npu_mem": {"mem_size": 80, "mem_bw": 3350, "mem_latency": 0},
            # the limits every recorded timing used (vLLM's H100 default is 1,024 / 8,192)
            "max_num_seqs": 128, "max_num_batched_tokens": 2048}
node = {"num_instances": 8, "cpu_mem": {"mem_size": 512, "mem_bw": 256, "mem_latency": 0},
        "instances": [instance] * 8}
nodes = int(sys.argv[1])
json.dump({"num_nodes": nodes, "link_bw": 16, "link_latency": 0, "nodes": [node] * nodes},
          open(sys.argv[2], "w"), indent=1)
PY
}

# measure LABEL ARGS...: one run under GNU time; prints wall time, CPU time (user + system: on
# a shared machine the wall time is not the run's own) and peak RSS.
measure() {
    local label=$1
    shift
    /usr/bin/time -f '%e %M %U %S' -o "$TMP/time" "$BIN" "$@" >/dev/null 2>"$TMP/stderr" || {
        cat "$TMP/stderr" >&2
        exit 1
    }
    read -r wall kb user sys <"$TMP/time"
    printf '%-46s wall %8.1f s   CPU %6.1f + %4.1f s   peak RSS %6d MB\n' "$label" "$wall" \
        "$user" "$sys" $((kb / 1024))
    rm -f "$TMP/out.csv"
    [ "$RATES" = 1 ] && rates "  at that wall time" "$wall" "$@"
    rm -f "$TMP/out.csv"
}

if [ "$ONLY" != big ]; then
    python3 scripts/gen_workload.py --num-requests "$N" --rate 20 --seed 7 --no-token-ids \
        --out "$TMP/one.jsonl"
    measure "$N req, 1 instance, no CSV" --dataset "$TMP/one.jsonl" --hardware H100-SXM \
        --max-num-seqs 128 --max-num-batched-tokens 2048
    if [ "$CSV" = 1 ]; then
        measure "$N req, 1 instance, CSV" --dataset "$TMP/one.jsonl" --hardware H100-SXM \
            --max-num-seqs 128 --max-num-batched-tokens 2048 --output "$TMP/out.csv"
    fi
    rm "$TMP/one.jsonl"
    python3 scripts/gen_workload.py --num-requests "$N" --rate 320 --seed 7 --no-token-ids \
        --out "$TMP/sixteen.jsonl"
    cluster 2 "$TMP/cluster.json"
    measure "$N req, 16 instances, no CSV" --cluster-config "$TMP/cluster.json" \
        --dataset "$TMP/sixteen.jsonl"
    if [ "$CSV" = 1 ]; then
        measure "$N req, 16 instances, CSV" --cluster-config "$TMP/cluster.json" \
            --dataset "$TMP/sixteen.jsonl" --output "$TMP/out.csv"
    fi
    rm "$TMP/sixteen.jsonl"
fi

python3 scripts/gen_workload.py --num-requests "$N" --rate 200000 --seed 7 --no-token-ids \
    --out "$TMP/fleet.jsonl"
cluster 1250 "$TMP/fleet.json"
measure "$N req, 10,000 instances, no CSV" --cluster-config "$TMP/fleet.json" \
    --dataset "$TMP/fleet.jsonl" --request-routing-policy rr
if [ "$CSV" = 1 ]; then
    measure "$N req, 10,000 instances, CSV" --cluster-config "$TMP/fleet.json" \
        --dataset "$TMP/fleet.jsonl" --request-routing-policy rr --output "$TMP/out.csv"
fi
rm "$TMP/fleet.jsonl"
measure "$N req, scenario mixed-slo, no CSV" --scenario mixed-slo --num-requests "$N"
# Prompts with token ids (80 % share a 512-token prefix): streamed, not held.
measure "$N req, scenario prefix-heavy, no CSV" --scenario prefix-heavy --num-requests "$N"
# Sessions: N/5 conversations of five turns on 16 instances, each planned when it starts and
# let go when it ends (with the per-session CSV: an outcome per session stays).
cat >"$TMP/sessions.yaml" <<EOF
version: "2"
seed: 3
aggregate_rate: 100
num_requests: $((N / 5))
clients:
  - id: chat
    rate_fraction: 1
    arrival: {process: poisson}
    input_distribution: {type: uniform, params: {min: 100, max: 1000}}
    output_distribution: {type: uniform, params: {min: 10, max: 100}}
    follow_up: {probability: 1, max_turns: 5, think_time: {type: constant, params: {value: 500000}}}
EOF
cluster 2 "$TMP/cluster.json"
measure "$N req in $((N / 5)) sessions, 16 instances" --workload-spec "$TMP/sessions.yaml" \
    --cluster-config "$TMP/cluster.json" --sessions-output "$TMP/sessions.csv"
rm -f "$TMP/sessions.csv"
# Long conversations: N/1,000 of 1,000 turns, all in flight at once for most of the run; each
# holds the turn it has reached, not its plan.
sed -e "s/num_requests: .*/num_requests: $((N / 1000))/" -e 's/aggregate_rate: 100/aggregate_rate: 2/' \
    -e 's/max_turns: 5,/max_turns: 1000,/' -e 's/value: 500000/value: 2000000/' \
    "$TMP/sessions.yaml" >"$TMP/long.yaml"
measure "$N req in $((N / 1000)) conversations, 16 instances" --workload-spec "$TMP/long.yaml" \
    --cluster-config "$TMP/cluster.json" --sessions-output "$TMP/sessions.csv"
rm -f "$TMP/sessions.csv"
# Closed-loop users: 100, each sending N/100 requests one after another.
cat >"$TMP/users.yaml" <<EOF
version: "2"
seed: 11
num_requests: $N
clients:
  - id: users
    concurrency: 100
    think_time_us: 1000000
    input_distribution: {type: uniform, params: {min: 100, max: 1000}}
    output_distribution: {type: uniform, params: {min: 10, max: 100}}
EOF
measure "$N req from 100 closed-loop users, 16 instances" --workload-spec "$TMP/users.yaml" \
    --cluster-config "$TMP/cluster.json" --sessions-output "$TMP/sessions.csv"
rm -f "$TMP/sessions.csv"
# Agentic DAGs: ReAct sessions of 11 LLM calls and 5 tool calls, 10 a second, no horizon.
sed -e "s/^num_requests: .*/num_requests: $((N / 11))/" -e 's/^aggregate_rate: .*/aggregate_rate: 10/' \
    -e '/^horizon/d' examples/scenarios/react-search.yaml >"$TMP/agents.yaml"
measure "$N req in $((N / 11)) ReAct sessions, 16 instances" --workload-spec "$TMP/agents.yaml" \
    --cluster-config "$TMP/cluster.json" --sessions-output "$TMP/sessions.csv"
rm -f "$TMP/sessions.csv"
# Replica slots: each costs its config, backend and scheduler before it is provisioned.
measure "autoscale-max 100,000 on the sample" --dataset examples/sample.jsonl \
    --autoscale threshold --autoscale-max 100000
