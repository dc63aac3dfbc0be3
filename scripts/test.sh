#!/usr/bin/env bash
# Set up everything the test suite needs, then run it. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# The main environment, the framework test environments and the browser for the HTML report's
# tests are independent: set them up at once.
bash scripts/test-envs.sh & envs=$!
bash scripts/browser.sh & browser=$!
bash scripts/setup.sh
wait "$envs"
wait "$browser"
export GPUWHY_TEST_ENVS="$PWD/.venvs"
.venv/bin/python -m ruff check src tests bench examples
.venv/bin/python -m mypy
.venv/bin/python -m pytest "$@"
