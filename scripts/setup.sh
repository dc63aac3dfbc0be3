#!/usr/bin/env bash
# Create .venv with gpuwhy and what the bundled examples and the tests need (CPU builds only).
# Idempotent: a second run only checks what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# A fresh .venv takes 3.6 GB (measured 2026-11-23: TensorFlow 1.9 GB, PyTorch 0.8 GB, JAX 0.4 GB).
[ -x .venv/bin/python ] || bash scripts/need-space.sh 3900 "Setting up .venv"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# torch==2.13.0 is pinned because a CPU wheel of it is what CPU machines are given; an unpinned
# torch pulls gigabytes of CUDA packages. tensorflow is the plain (CUDA-enabled) Linux wheel.
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]' \
    'tensorflow==2.21.0' 'torch==2.13.0' 'jax[cpu]'
