#!/usr/bin/env bash
# Create .venv with gpuwhy and what the bundled examples and the tests need (CPU builds only).
# Idempotent: a second run only checks what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    bash scripts/need-space.sh "Setting up .venv" venv
    "$PY" -m venv .venv
fi
# torch==2.13.0 is pinned because a CPU wheel of it is what CPU machines are given; an unpinned
# torch pulls gigabytes of CUDA packages. tensorflow is the plain (CUDA-enabled) Linux wheel.
# The development tools (pytest, ruff, mypy, jsonschema) are pinned in constraints-dev.txt.
bash scripts/install.sh .venv/bin/python -c constraints-dev.txt -e '.[dev]' \
    'tensorflow==2.21.0' 'torch==2.13.0' 'jax[cpu]'
