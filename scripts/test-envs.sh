#!/usr/bin/env bash
# Real framework environments that `gpuwhy doctor --python` is tested against (.venvs/NAME).
# They are independent, so they are built concurrently (installs are mostly waiting on disk).
#   bash scripts/test-envs.sh            all of them (bare, tf-cpu, torch-cpu, tf-conflict)
#   bash scripts/test-envs.sh bare ...   only those named (`bare`: seconds, nothing installed)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PIP_FLAGS=(-q --disable-pip-version-check)
mkdir -p .venvs

make_env() {  # make_env NAME [pip args...]: a venv holding exactly these distributions
    local name=$1; shift
    [ -f ".venvs/$name/.done" ] && return 0
    rm -rf ".venvs/$name"
    "$PY" -m venv ".venvs/$name"
    if [ $# -gt 0 ]; then ".venvs/$name/bin/python" -m pip install "${PIP_FLAGS[@]}" "$@"; fi
    touch ".venvs/$name/.done"
}

make_conflict_env() {  # tensorflow-cpu and tensorflow in one environment: a real conflict
    [ -f .venvs/tf-conflict/.done ] && return 0
    make_env tf-conflict 'tensorflow-cpu==2.21.0'
    rm .venvs/tf-conflict/.done
    .venvs/tf-conflict/bin/python -m pip install "${PIP_FLAGS[@]}" --no-deps 'tensorflow==2.21.0'
    touch .venvs/tf-conflict/.done
}

make_named() {
    case $1 in
        bare) make_env bare ;;
        tf-cpu) make_env tf-cpu 'tensorflow-cpu==2.21.0' ;;
        torch-cpu) make_env torch-cpu 'torch==2.13.0' ;;
        tf-conflict) make_conflict_env ;;
    esac
}

ALL=(bare tf-cpu torch-cpu tf-conflict)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${ALL[@]}")
for name in "${names[@]}"; do
    case " ${ALL[*]} " in
        *" $name "*) ;;
        *) echo "test-envs.sh: unknown environment '$name': choose from ${ALL[*]}" >&2; exit 2 ;;
    esac
done
pids=()
for name in "${names[@]}"; do
    make_named "$name" & pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
exit $status
