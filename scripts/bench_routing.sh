#!/usr/bin/env bash
# Wall-time benchmark of routing scorers and stale router signals (issue 20), on
# bench_cluster.sh's case: 16 H100-SXM instances (2 nodes x 8) serving Llama-3.1-8B, 100,000
# generated requests at 320 req/s, whole process with the CSV. Per workload it times
#   least-loaded, fresh signals                                  (the reference)
#   weighted prefix-affinity:2,queue-depth:1,kv-utilization:1, fresh signals
#   the same scorers with 50 ms snapshot and cache-signal delays
#   the same with precise-prefix-cache instead of prefix-affinity (reads the stale cache view)
# on two workloads: without token ids (bench_cluster.sh's) and with token ids, half of each
# prompt a shared prefix (so that the prefix signals have something to find).
#   scripts/bench_routing.sh            # best/median of RUNS runs per case
#   RUNS=5 scripts/bench_routing.sh
#   BIN=path/to/blis-cosim scripts/bench_routing.sh   # a binary built elsewhere, no build
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

if [ -z "${BIN:-}" ]; then
    cargo build --release --quiet
    BIN=target/release/blis-cosim
fi

python3 scripts/gen_workload.py --num-requests 100000 --rate 320 --seed 7 --no-token-ids \
    --out "$TMP/plain.jsonl"
python3 scripts/gen_workload.py --num-requests 100000 --rate 320 --seed 7 \
    --shared-prefix-fraction 0.5 --out "$TMP/prefix.jsonl"
python3 - "$TMP/cluster.json" <<'PY'
import json, sys
instance = {"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM", "pd_type": None,
            "tp_size": 1, "npu_mem": {"mem_size": 80, "mem_bw": 3350, "mem_latency": 0},
            # the limits every recorded timing used (vLLM's H100 default is 1,024 / 8,192)
            "max_num_seqs": 128, "max_num_batched_tokens": 2048}
node = {"num_instances": 8, "cpu_mem": {"mem_size": 512, "mem_bw": 256, "mem_latency": 0},
        "instances": [instance] * 8}
json.dump({"num_nodes": 2, "link_bw": 16, "link_latency": 0, "nodes": [node, node]},
          open(sys.argv[1], "w"), indent=1)
PY

# The cases of one workload, interleaved: each round times every case once (so that a busy
# spell of a shared machine hits every case alike); per case, the best and median wall time
# and the best CPU time (user + system) over RUNS rounds, in ms, and each case's best against
# the reference (least-loaded, fresh).
affinity=prefix-affinity:2,queue-depth:1,kv-utilization:1
precise=precise-prefix-cache:2,queue-depth:1,kv-utilization:1
stale="--snapshot-refresh-interval 50ms --cache-signal-delay 50ms"
labels=("least-loaded, fresh" "$affinity, fresh" "$affinity, 50 ms stale"
        "$precise, fresh" "$precise, 50 ms stale")
flags=("--request-routing-policy least-loaded"
       "--request-routing-policy weighted --routing-scorers $affinity"
       "--request-routing-policy weighted --routing-scorers $affinity $stale"
       "--request-routing-policy weighted --routing-scorers $precise"
       "--request-routing-policy weighted --routing-scorers $precise $stale")
for w in plain prefix; do
    : >"$TMP/times"
    for _ in $(seq "$RUNS"); do
        for k in "${!labels[@]}"; do
            # shellcheck disable=SC2086 # the flags are words
            /usr/bin/time -f "$k %e %U %S" -a -o "$TMP/times" "$BIN" \
                --cluster-config "$TMP/cluster.json" --dataset "$TMP/$w.jsonl" \
                --output "$TMP/out.csv" ${flags[$k]} >/dev/null 2>&1
        done
    done
    python3 - "$TMP/times" "$w" "${labels[@]}" <<'PY'
import sys
path, workload, labels = sys.argv[1], sys.argv[2], sys.argv[3:]
walls, cpus = {}, {}
for line in open(path):
    k, wall, user, sys_ = line.split()
    walls.setdefault(int(k), []).append(float(wall) * 1000)
    cpus.setdefault(int(k), []).append((float(user) + float(sys_)) * 1000)
for k, label in enumerate(labels):
    w, c = sorted(walls[k]), sorted(cpus[k])
    print(f"{workload}: {label:<58} wall best {w[0]:6.0f} median {w[(len(w) - 1) // 2]:6.0f} ms,"
          f" CPU best {c[0]:6.0f} ms; vs least-loaded: wall {w[0] / min(walls[0]):.3f},"
          f" CPU {c[0] / min(cpus[0]):.3f}")
PY
done
