#!/usr/bin/env bash
# Install Debian's headless browser for the HTML report's tests (chromium + chromium-driver).
# Idempotent and quiet: does nothing when chromium is already there. Needs root (or sudo).
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
command -v chromium >/dev/null
