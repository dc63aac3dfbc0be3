#!/usr/bin/env bash
# The libraries the zoo's real-world scripts use (tests/zoo), into .venv after scripts/setup.sh.
# Pinned, with torch and tensorflow restated so that the CPU wheels setup.sh chose are kept.
# Idempotent: a second run only checks what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh .venv/bin/python -c constraints-dev.txt \
    'torch==2.13.0' 'tensorflow==2.21.0' \
    'tf_keras==2.21.0' 'transformers==5.24.0' 'lightning==2.6.6' 'accelerate==1.15.0' 'flax==0.12.8' 'optax==0.2.8'
