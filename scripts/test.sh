#!/usr/bin/env bash
# Set up everything the test suite needs, then run it. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# Check the disk once for everything still to be made, before three setups start at once.
parts=()
[ -x .venv/bin/python ] || parts+=(venv)
for env in bare tf-cpu tf-conflict torch-cpu; do  # what scripts/test-envs.sh makes
    if [ ! -f ".venvs/$env/.done" ]; then parts+=(test-envs); break; fi
done
bash scripts/need-space.sh "Setting up the test environments" "${parts[@]}"
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
