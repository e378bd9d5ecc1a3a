#!/usr/bin/env bash
# Creates target/pyvenv (a Python virtual environment) with Ray from PyPI and the
# blis-cosim-ray package of python/, for the Ray sweep test (tests/python/sweep_ray.rs) and for
# running sweeps on Ray from this checkout.
#   scripts/python_env.sh            # creates or updates target/pyvenv
#   RAY_VERSION=2.40.0 scripts/python_env.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=target/pyvenv
PYTHON=${PYTHON:-python3}
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "ray==${RAY_VERSION:-2.40.0}"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check ./python
"$VENV/bin/python" -c 'import ray, blis_cosim_ray; print("ray", ray.__version__, "ready in target/pyvenv")'
