#!/usr/bin/env bash
# Wheels the GPU machine lacks, into .whl/ (git-ignored), for bench/gpu_truth.py: Keras itself
# (its Keras scenarios), at the version this repository's environment holds, and the two of its
# requirements that machine does not have (namex, optree); jsonschema and its requirements, which
# six test modules import, so that their gpu-marked tests run there too. Its Python is 3.12,
# x86-64.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
keras=$("$PY" -c 'import importlib.metadata as m; print(m.version("keras"))')
rm -rf .whl && mkdir -p .whl
"$PY" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "keras==$keras" namex optree jsonschema jsonschema-specifications referencing rpds-py
ls .whl
