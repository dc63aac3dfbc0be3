#!/usr/bin/env bash
# Real framework environments that `gpuwhy doctor --python` is tested against (.venvs/NAME).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
mkdir -p .venvs
make_env() {  # make_env NAME [pip args...]: a venv holding exactly these distributions
    local name=$1; shift
    [ -f ".venvs/$name/.done" ] && return 0
    rm -rf ".venvs/$name"
    "$PY" -m venv ".venvs/$name"
    if [ $# -gt 0 ]; then .venvs/$name/bin/python -m pip install -q --disable-pip-version-check "$@"; fi
    touch ".venvs/$name/.done"
}
make_env bare
make_env tf-cpu 'tensorflow-cpu==2.21.0'
make_env torch-cpu 'torch==2.13.0'
# tensorflow-cpu and tensorflow in one environment: a real conflict people end up with.
if [ ! -f .venvs/tf-conflict/.done ]; then
    make_env tf-conflict 'tensorflow-cpu==2.21.0'
    rm .venvs/tf-conflict/.done
    .venvs/tf-conflict/bin/python -m pip install -q --disable-pip-version-check --no-deps 'tensorflow==2.21.0'
    touch .venvs/tf-conflict/.done
fi
