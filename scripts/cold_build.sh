#!/usr/bin/env bash
# Cold test build, measured: builds each given revision (or, with none, the working tree: tracked
# and untracked files git does not ignore) from scratch in a fresh target folder, all of them
# started together so that they share one load, and prints each build's user + sys CPU, wall
# time and peak memory. CPU is the figure to compare on a shared machine (wall follows the load).
#   scripts/cold_build.sh 163bb68 HEAD         # the issue-35 comparison, side by side
#   scripts/cold_build.sh                      # the working tree alone
#   UNITS=1 scripts/cold_build.sh HEAD         # also each compiler process's CPU, largest first
#   CARGO_ARGS="build --release --locked" scripts/cold_build.sh HEAD
# Everything (sources, target folders) lives under one temporary folder (in TMPDIR, default
# /tmp; about 0.6 GB per build) removed on exit, also when interrupted. Crates must be in
# cargo's cache or reachable on crates.io. The load average is sampled every 20 s.
set -euo pipefail
cd "$(dirname "$0")/.."
read -r -a ARGS <<<"${CARGO_ARGS:-test --release --locked --no-run}"
REVS=("$@")
[ ${#REVS[@]} -gt 0 ] || REVS=(worktree)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cold_build.XXXXXX")
PIDS=()
LOAD_PID=
cleanup() {
    for pid in "${PIDS[@]}" $LOAD_PID; do kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}" $LOAD_PID; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# The per-unit logger (UNITS=1): a RUSTC_WRAPPER that runs rustc under GNU time and logs the
# unit's crate name, kind and CPU (its linker included).
cat >"$WORK/rustc_wrap" <<'EOF'
#!/usr/bin/env bash
rustc=$1; shift
name=; kind=lib; prev=
for a in "$@"; do
    case $prev in --crate-name) name=$a ;; --crate-type) kind=$a ;; esac
    [ "$a" = --test ] && kind=test
    prev=$a
done
[ -n "$name" ] && [ "$name" != ___ ] || exec "$rustc" "$@"
t=$(mktemp "$UNIT_LOG.XXXXXX")
rc=0
/usr/bin/time -f '%U %S' -o "$t" "$rustc" "$@" || rc=$?
read -r u s < <(tail -1 "$t")
rm -f "$t"
echo "$name $kind $u $s" >>"$UNIT_LOG"
exit $rc
EOF
chmod +x "$WORK/rustc_wrap"

for i in "${!REVS[@]}"; do
    rev=${REVS[$i]}
    dir=$WORK/$i
    mkdir -p "$dir/src"
    if [ "$rev" = worktree ]; then
        git ls-files -z -co --exclude-standard | tar --null -T - -c | tar -x -C "$dir/src"
    else
        git archive "$rev" | tar -x -C "$dir/src"
    fi
done

(while sleep 20; do cut -d' ' -f1 /proc/loadavg; done) >"$WORK/load" &
LOAD_PID=$!
start=$(date -u +%H:%M:%S)
for i in "${!REVS[@]}"; do
    dir=$WORK/$i
    (
        cd "$dir/src"
        export CARGO_TARGET_DIR=$dir/target
        if [ -n "${UNITS:-}" ]; then
            export RUSTC_WRAPPER=$WORK/rustc_wrap UNIT_LOG=$dir/units
        fi
        exec setsid /usr/bin/time -f '%U %S %e %M' -o "$dir/time" cargo "${ARGS[@]}" >"$dir/log" 2>&1
    ) &
    PIDS+=($!)
done
echo "started ${#REVS[@]} build(s) at $start UTC: cargo ${ARGS[*]}" >&2

status=0
for i in "${!REVS[@]}"; do
    wait "${PIDS[$i]}" || { status=1; echo "${REVS[$i]}: the build failed:" >&2; tail -20 "$WORK/$i/log" >&2; }
done
PIDS=()
kill "$LOAD_PID" 2>/dev/null || true
wait "$LOAD_PID" 2>/dev/null || true
LOAD_PID=

printf '%-12s %12s %10s %9s\n' revision 'user+sys s' 'wall s' 'peak MB'
for i in "${!REVS[@]}"; do
    read -r u s e m < <(tail -1 "$WORK/$i/time")
    printf '%-12s %12.1f %10.1f %9.0f\n' "${REVS[$i]}" "$(echo "$u + $s" | bc -l)" "$e" "$((m / 1024))"
done
awk '{ s += $1; n++ } END { if (n) printf "mean load average %.1f (%d samples)\n", s / n, n }' "$WORK/load"
if [ -n "${UNITS:-}" ]; then
    for i in "${!REVS[@]}"; do
        echo "${REVS[$i]}: CPU by unit (user + sys s), largest first"
        awk '{ c[$1 " (" $2 ")"] += $3 + $4; t += $3 + $4 }
             END { for (k in c) printf "%8.1f  %s\n", c[k], k; printf "%8.1f  (all units)\n", t }' \
            "$WORK/$i/units" | sort -rn | head -25
    done
fi
exit $status
