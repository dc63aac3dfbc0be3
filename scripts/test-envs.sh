#!/usr/bin/env bash
# Real framework environments that `gpuwhy doctor --python` is tested against (.venvs/NAME).
# They are independent, so they are built concurrently (scripts/install.sh: one cache for all).
#   bash scripts/test-envs.sh            all of them (bare, tf-cpu, torch-cpu, tf-conflict, py312-jax,
#                                        py313-jax, py310-jax)
#   bash scripts/test-envs.sh bare ...   only those named (`bare`: seconds, nothing installed)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
mkdir -p .venvs

make_env() {  # make_env NAME [pip args...]: a venv holding exactly these distributions
    local name=$1; shift
    [ -f ".venvs/$name/.done" ] && return 0
    rm -rf ".venvs/$name"
    "$PY" -m venv ".venvs/$name"
    if [ $# -gt 0 ]; then bash scripts/install.sh ".venvs/$name/bin/python" "$@"; fi
    touch ".venvs/$name/.done"
}

make_conflict_env() {  # tensorflow-cpu and tensorflow in one environment: a real conflict
    [ -f .venvs/tf-conflict/.done ] && return 0
    make_env tf-conflict 'tensorflow-cpu==2.21.0'
    rm .venvs/tf-conflict/.done
    bash scripts/install.sh .venvs/tf-conflict/bin/python --no-deps 'tensorflow==2.21.0'
    touch .venvs/tf-conflict/.done
}

python_at() {  # python_at 3.12 [override]: that interpreter, if this machine has one
    local version=$1 found
    for found in "${2:-}" "$(pyenv root 2>/dev/null)"/versions/"$version".*/bin/python \
        "$(command -v "python$version" || true)"; do
        if [ -n "$found" ] && "$found" -c \
            "import sys; assert '%d.%d' % sys.version_info[:2] == '$version'" 2>/dev/null; then
            echo "$found"
            return 0
        fi
    done
    return 1
}


make_jax_env() {  # make_jax_env 3.12: that Python (sys.monitoring) with JAX, Flax and Optax
    local version=$1 name="py${1/./}-jax" py override
    [ -f ".venvs/$name/.done" ] && return 0
    override="PYTHON${1/./}"
    if ! py=$(python_at "$version" "${!override:-}"); then  # framework_env skips on the note
        mkdir -p ".venvs/$name"
        echo "no Python $version on this machine (set $override)" > ".venvs/$name/.absent"
        echo "test-envs.sh: no Python $version here: the tests that need it are skipped" >&2
        return 0
    fi
    rm -f ".venvs/$name/.absent"
    PY=$py make_env "$name" -c constraints-dev.txt 'jax==0.10.2' 'jaxlib==0.10.2' \
        'flax==0.12.8' 'optax==0.2.8'
}

make_py310_env() {  # the oldest Python gpuwhy supports, with JAX (its last releases for 3.10)
    [ -f .venvs/py310-jax/.done ] && return 0
    local py
    if ! py=$(python_at 3.10 "${PYTHON310:-}"); then
        mkdir -p .venvs/py310-jax
        echo "no Python 3.10 on this machine (set PYTHON310)" > .venvs/py310-jax/.absent
        echo "test-envs.sh: no Python 3.10 here: the tests that need it are skipped" >&2
        return 0
    fi
    rm -f .venvs/py310-jax/.absent
    # gpuwhy's own dependencies too: every module of it is imported there (not gpuwhy itself:
    # the tests run this checkout's).
    PY=$py make_env py310-jax 'jax[cpu]==0.6.2' 'jaxlib==0.6.2' 'numpy==2.2.6' \
        'rich>=13' 'psutil>=5.9' 'nvidia-ml-py>=12.535' 'ijson>=3.2'
}

make_named() {
    case $1 in
        bare) make_env bare ;;
        tf-cpu) make_env tf-cpu 'tensorflow-cpu==2.21.0' ;;
        torch-cpu) make_env torch-cpu 'torch==2.13.0' ;;
        tf-conflict) make_conflict_env ;;
        py312-jax) make_jax_env 3.12 ;;
        py313-jax) make_jax_env 3.13 ;;
        py310-jax) make_py310_env ;;
    esac
}

ALL=(bare tf-cpu torch-cpu tf-conflict py312-jax py313-jax py310-jax)
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
