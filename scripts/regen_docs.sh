#!/usr/bin/env bash
# Regenerates the printed outputs of the README and the guide from the binary: the flag
# reference (docs/src/flags-reference.md) and every block marked `<!-- example ... -->`
# (with the files those examples write, such as docs/src/sweep-capacity.svg). Run it after
# changing anything a page prints, review `git diff`, and commit the pages with the change;
# `cargo test` fails while a page and the binary disagree. Examples that need the shared data
# (`needs:`) are regenerated only where ../shared/data has it.
set -euo pipefail
cd "$(dirname "$0")/.."
BLIS_COSIM_BLESS_DOCS=1 cargo test --release --locked --test cli docs_
git status --short -- README.md docs
