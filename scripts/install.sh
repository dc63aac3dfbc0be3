#!/usr/bin/env bash
# install.sh PYTHON ARGS...: install ARGS (pip's syntax: -c FILE, -e PATH, --no-deps, specs) into
# the environment of the interpreter PYTHON. With uv, which installs the same distributions as
# pip does here (`pip list` identical), faster: parallel downloads, one cache for every
# environment, files linked from it (on a fresh clone, 2026-11-30, bytecode compiled as pip
# does: every environment in 167 s against pip's 317 s). uv itself goes into .tools once
# (pinned); where it cannot be had, pip does the install.
set -euo pipefail
cd "$(dirname "$0")/.."
python=$1
shift
UV_VERSION=0.13.9
uv=.tools/bin/uv
if [ ! -x "$uv" ]; then
    exec 9> .tools.lock  # the setups run at once: one of them makes .tools
    flock 9
    if [ ! -x "$uv" ]; then
        rm -rf .tools
        python3 -m venv .tools &&
            .tools/bin/python -m pip install -q --disable-pip-version-check "uv==$UV_VERSION" ||
            echo "install.sh: uv could not be installed: pip installs instead (slower)" >&2
    fi
    flock -u 9
fi
if [ ! -x "$uv" ]; then
    exec "$python" -m pip install -q --disable-pip-version-check "$@"
fi
# Wheels this machine keeps on disk for pip (a CPU build of torch, say) are uv's to find too.
links=()
for dir in ${PIP_FIND_LINKS:-} $(python3 -m pip config get global.find-links 2>/dev/null || true); do
    if [ -d "$dir" ]; then links+=(--find-links "$dir"); fi
done
exec "$uv" pip install -q --compile-bytecode --python "$python" "${links[@]}" "$@"
