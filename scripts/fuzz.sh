#!/usr/bin/env bash
# Mutation fuzzing of the binary's inputs (issue 19): for MINUTES per input kind, mutates the
# bundled examples (examples/sample.jsonl, held whole and read as the run goes;
# examples/scenarios/*.yaml), a 4-instance cluster config, the bundled policy bundles
# (examples/policy/*.yaml) and sweep specs (examples/sweeps/*.yaml, expanded into their
# points), the bundled hardware files and model configs (given as paths), and, when ../shared
# holds them, LLMServingSim's cluster configs, a copy of the RTX4090 Llama-3.1-8B profile
# bundle, the production traces' first lines (read as the run goes and held whole) and a real
# vLLM run's requests.jsonl and meta.json (as `validate` and `calibrate` read them). Runs the
# release binary on each mutant under a 20 s CPU-time limit (and 180 s of wall time, so that a
# run starved by a loaded machine is not a hang) and an 8 GB address-space limit, and reports
# panics, hangs, runs above 2 GB peak RSS and other crashes; a mutant read as the run goes that
# gives another exit status or request CSV than the same file held whole, or a spec than on one
# thread, is a mismatch. The development guide's "Fuzzing" lists the kinds.
#   scripts/fuzz.sh MINUTES [jsonl|stream|spec|cluster|policy|sweep|hardware|model|profile|trace|validate|calibrate|all]
#   FUZZ_SEED=7 FUZZ_OUT=/tmp/findings scripts/fuzz.sh 10
# Exits 1 when it found anything; the offending inputs and their stderr are kept in FUZZ_OUT
# (default target/fuzz-findings).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -lt 1 || $# -gt 2 ]]; then
    echo "usage: $0 MINUTES [jsonl|stream|spec|cluster|policy|sweep|hardware|model|profile|trace|validate|calibrate|all]" >&2
    exit 2
fi
MINUTES=$1
KIND=${2:-all}
case $KIND in
    jsonl | stream | spec | cluster | policy | sweep | hardware | model | profile | trace | validate | calibrate | all) ;;
    *) echo "$0: unknown input kind '$KIND' (jsonl, stream, spec, cluster, policy, sweep, hardware, model, profile, trace, validate, calibrate or all)" >&2; exit 2 ;;
esac
OUT=${FUZZ_OUT:-target/fuzz-findings}
cargo build --release --quiet
exec python3 scripts/fuzz.py target/release/blis-cosim "$PWD" "$MINUTES" "$KIND" "$OUT"
