#!/usr/bin/env bash
# need-space.sh WHAT PART...: stop at once, in one line, when the disk holding the checkout has
# less free space than the PARTs together need (`venv`, `test-envs`, or a number of MB), instead
# of failing a minute later inside pip with "No space left on device" from several installs at
# once. Exit code 3 tells this apart from a failed install.
set -euo pipefail
what=$1
shift
cd "$(dirname "$0")/.."
# Measured on a fresh clone (2026-11-23), plus room for pip's downloads: .venv takes 3.6 GB
# (TensorFlow 1.9 GB, PyTorch 0.8 GB, JAX 0.4 GB); the test environments in .venvs 4.6 GB (6.0 GB
# with py310-jax and py313-jax, 2026-11-27); the zoo's libraries (scripts/zoo-deps.sh) 0.33 GB
# more in .venv.
need_mb=0
for part in "$@"; do
    case $part in
        venv) need_mb=$((need_mb + 3900)) ;;
        test-envs) need_mb=$((need_mb + 6400)) ;;
        zoo) need_mb=$((need_mb + 500)) ;;
        *) need_mb=$((need_mb + part)) ;;
    esac
done
free_mb=$(df -Pm . | awk 'NR == 2 {print $4}')
if [ "$free_mb" -lt "$need_mb" ]; then
    echo "$what needs about $(( (need_mb + 1023) / 1024 )) GB free on the disk holding $PWD," \
        "and $free_mb MB is free: free some space there and run it again" >&2
    exit 3
fi
