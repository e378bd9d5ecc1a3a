#!/usr/bin/env bash
# Regenerates src/chakra/et_def.rs, the Rust types of the Chakra execution-trace schema
# (proto/et_def.proto), with the generator crate in scripts/chakra_proto (prost-build, protox).
# `--check` writes nothing and fails if the checked-in file is not what the schema generates
# (CI runs that). The generator builds in its own target folder, so the project's own builds
# never compile prost-build, protox and their dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
generated=src/chakra/et_def.rs
target="${CARGO_TARGET_DIR:-target}/chakra-proto"
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
cargo run --quiet --locked --manifest-path scripts/chakra_proto/Cargo.toml \
    --target-dir "$target" -- "$PWD" >"$tmp"
if [[ "${1:-}" == --check ]]; then
    if ! cmp -s "$tmp" "$generated"; then
        echo "$generated is not what proto/et_def.proto generates: run scripts/chakra_proto.sh" >&2
        diff -u "$generated" "$tmp" | head -40 >&2
        exit 1
    fi
    echo "$generated is current"
else
    cp "$tmp" "$generated"
    echo "wrote $generated"
fi
