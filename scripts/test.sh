#!/usr/bin/env bash
# The test suite: `cargo test --release --locked --workspace --no-fail-fast` (the workspace
# takes in the profiler of scripts/profile.sh, which plain cargo leaves out; any arguments are
# passed on, e.g. `scripts/test.sh --test engine pd::`), then one last line counting the tests
# passed, failed and skipped, the skips by reason:
#   tests: 800 passed, 0 failed, 142 skipped (no LLMServingSim data: 130, no traces: 12)
# A test that finds no data (or no python3, Ray, GNU time, real ASTRA-Sim) returns early and
# records why in the file BLIS_COSIM_SKIP_LOG names (tests/common/shared_data.rs); libtest
# counts it as passed, so here it is counted as skipped instead (and a test that went on
# without a part of it as passed, with the part named). Exits with cargo's status.
set -uo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
mkdir -p "$target"
skips="$(realpath "$target")/test-skips.tsv"
: >"$skips"
export BLIS_COSIM_SKIP_LOG="$skips"

cargo test --release --locked --workspace --no-fail-fast "$@" 2>&1 | tee "$target/test-output.log"
status=${PIPESTATUS[0]}

# The libtest (and astra harness) result lines, summed.
read -r passed failed < <(awk '
    /^test result: / {
        for (i = 1; i < NF; i++) {
            if ($(i + 1) ~ /^passed/) p += $i
            if ($(i + 1) ~ /^failed/) f += $i
        }
    }
    END { print p + 0, f + 0 }' "$target/test-output.log")
# The skips (reason, test, test|part, detail), counted once per test by reason: whole tests
# (a test that records several counts under its first reason), and the passed tests that
# skipped a part.
tally=$(awk -F'\t' '
    function counts(kind,   s, i) {
        for (i = 1; i <= k[kind]; i++)
            s = s (i > 1 ? ", " : "") order[kind, i] ": " by[kind, order[kind, i]]
        return s
    }
    function add(kind, reason) {
        if (!((kind, reason) in by)) order[kind, ++k[kind]] = reason
        by[kind, reason]++
        n[kind]++
    }
    $3 == "test" && !whole[$2]++ { add("test", $1) }
    $3 == "part" && !($2 in parts) { parts[$2] = $1 }
    END {
        for (t in parts) if (!(t in whole)) add("part", parts[t])
        line = (n["test"] + 0) " skipped"
        if (n["test"]) line = line " (" counts("test") ")"
        if (n["part"]) line = line "; " n["part"] " passed with a part skipped (" counts("part") ")"
        print line
    }' "$skips")
skipped=${tally%% *}
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
    echo "cargo test exited with status $status (a build error, or a test binary that stopped" \
        "before its result line: see above)"
fi
echo "tests: $((passed - skipped)) passed, $failed failed, $tally"
exit "$status"
