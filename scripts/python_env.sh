#!/usr/bin/env bash
# Creates target/pyvenv (a Python virtual environment) with Ray and jsonschema from PyPI and
# the blis-cosim-ray package of python/, for the Ray sweep test (tests/python/sweep_ray.rs), the
# evaluation schema check (tests/python/evaluation_schema.rs) and for running sweeps on Ray from
# this checkout.
#   scripts/python_env.sh            # creates or updates target/pyvenv
#   RAY_VERSION=2.40.0 JSONSCHEMA_VERSION=4.26.0 scripts/python_env.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=target/pyvenv
PYTHON=${PYTHON:-python3}
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "ray==${RAY_VERSION:-2.40.0}" "jsonschema==${JSONSCHEMA_VERSION:-4.26.0}"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check ./python
"$VENV/bin/python" -c 'import ray, jsonschema, blis_cosim_ray; from importlib.metadata import version
print("ray", ray.__version__, "and jsonschema", version("jsonschema"), "ready in target/pyvenv")'
