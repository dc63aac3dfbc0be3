#!/usr/bin/env bash
# Install the Debian packages the full test lane needs, in one apt call: a headless browser for
# the HTML report's tests (chromium + chromium-driver) and a Prometheus server for the metrics
# endpoint's test. Idempotent and quiet: does nothing when they are already there. Needs root
# (or sudo).
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 \
    && command -v prometheus >/dev/null 2>&1; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver prometheus >/dev/null
command -v chromium >/dev/null
command -v prometheus >/dev/null
