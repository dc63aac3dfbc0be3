#!/usr/bin/env bash
# Set up everything the test suite needs, then run it. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/test-envs.sh
export GPUWHY_TEST_ENVS="$PWD/.venvs"
.venv/bin/python -m ruff check src tests bench examples
.venv/bin/python -m mypy
.venv/bin/python -m pytest "$@"
