#!/usr/bin/env bash
# Set up what the tests need, lint, type-check, then run them. Extra arguments go to pytest.
#   bash scripts/test.sh          everything (what CI runs)
#   bash scripts/test.sh --fast   the edit-test loop: the tests not marked slow (none trains a
#                                 model, starts a framework, or needs the framework environments
#                                 or the browser); sets up only .venv and the empty `bare` one
set -euo pipefail
cd "$(dirname "$0")/.."
fast=0
if [ "${1:-}" = "--fast" ]; then
    fast=1
    shift
fi
# Check the disk once for everything still to be made, before the setups start at once.
parts=()
[ -x .venv/bin/python ] || parts+=(venv)
if [ "$fast" = 0 ]; then
    for env in bare tf-cpu tf-conflict torch-cpu py312-jax py313-jax py310-jax; do  # what scripts/test-envs.sh makes
        if [ ! -f ".venvs/$env/.done" ] && [ ! -f ".venvs/$env/.absent" ]; then
            parts+=(test-envs)
            break
        fi
    done
    [ -d .venv/lib/python3*/site-packages/transformers ] 2>/dev/null || parts+=(zoo)
fi
bash scripts/need-space.sh "Setting up the test environments" "${parts[@]}"
lint() {
    .venv/bin/python -m ruff check src tests bench examples &&
        .venv/bin/python -m ruff format --check src tests bench examples &&
        .venv/bin/python -m mypy
}
if [ "$fast" = 1 ]; then
    # `bare` holds nothing (seconds, no download): jobs under test run in it because `gpuwhy run`
    # probes the job's interpreter, which answers at once there.
    bash scripts/test-envs.sh bare & envs=$!
    bash scripts/setup.sh
    lint & linted=$!
else
    # The main environment, the framework test environments and the Debian packages (the
    # browser for the HTML report's tests, Prometheus for the metrics test) are independent:
    # set them up at once. Lint and type-check once .venv holds gpuwhy and its tools, beside the
    # zoo's libraries going in (src/gpuwhy imports none of them).
    bash scripts/test-envs.sh & envs=$!
    bash scripts/system-packages.sh & packages=$!
    bash scripts/setup.sh
    lint & linted=$!
    bash scripts/zoo-deps.sh  # into .venv: after setup.sh, while the others go on
    wait "$packages"
fi
wait "$envs"
linted_status=0
wait "$linted" || linted_status=$?
[ "$linted_status" = 0 ] || exit "$linted_status"
# Where PYTHONDONTWRITEBYTECODE is set (some images set it), every process the tests start would
# compile gpuwhy's modules from source again: ~0.13 s of CPU for each `gpuwhy` command.
.venv/bin/python -m compileall -q -j 0 src tests > /dev/null
export GPUWHY_TEST_ENVS="$PWD/.venvs"
# Three passes. First every test that measures no wall-clock time, one worker per core, a test
# file per worker (a file's fixtures are built once). Then the `timing` tests, which hold
# measured times to a truth: two at a time, each file on its own core (their jobs mostly wait on
# a delay, and a truth is alternated with what it checks), the longest files first
# (tests/conftest.py), but the `alone` ones by themselves on a quiet machine. All run even if
# one fails; the slowest tests are named: the whole run has to stay under half an hour.
# A test that misses is run once more (a stall of this shared machine is not gpuwhy's: real jobs
# beside other tests still read their own waits and clocks, in the zoo, across nodes); the
# summary names every such test with what its first attempt missed.
# Each pass's output is also kept, so that the run ends with every pass's failures, each with
# what it missed: a long log shown by its tail still names them all.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# One probe cache for every pass and worker (tests/conftest.py), as a user has one per machine.
export GPUWHY_TEST_CACHE_DIR="$logs/probe-cache"
select="not timing"
[ "$fast" = 1 ] && select="not slow and not timing"
status=0
.venv/bin/python -m pytest -m "$select" -n "${GPUWHY_TEST_WORKERS:-auto}" --dist loadfile \
    --reruns 1 --durations=30 "$@" 2>&1 | tee "$logs/1" || status=$?
slow=""
[ "$fast" = 1 ] && slow=" and not slow"
paired=0
.venv/bin/python -m pytest -m "timing and not alone$slow" -n "${GPUWHY_TIMING_WORKERS:-2}" \
    --dist loadfile --no-loadscope-reorder --reruns 1 --durations=30 "$@" 2>&1 |
    tee "$logs/2" || paired=$?
alone=0
.venv/bin/python -m pytest -m "alone$slow" --reruns 1 --durations=30 "$@" 2>&1 |
    tee "$logs/3" || alone=$?
echo "=== passes: tests $status, timing tests in pairs $paired, timing tests alone $alone" \
    "(0 passed, 5 none selected) ==="
grep -hE '^(FAILED|ERROR) ' "$logs/1" "$logs/2" "$logs/3" | cut -c1-400 || true
# 5 is "nothing selected": a failure only when no pass ran a test.
if [ "$status$paired$alone" = 555 ]; then exit 5; fi
for code in "$status" "$paired" "$alone"; do
    if [ "$code" != 0 ] && [ "$code" != 5 ]; then exit "$code"; fi
done
exit 0
