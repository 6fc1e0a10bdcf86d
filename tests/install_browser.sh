#!/usr/bin/env bash
# Install the browser for the dashboard's real-browser tests (tests/test_web_browser.py):
# Debian's chromium, driven by Playwright for Python (a test dependency, installed by pip)
# through executable_path=/usr/bin/chromium. Never `playwright install`: no browser build of
# its own is downloaded. Idempotent: does nothing when chromium is already there.
# Needs root (apt-get) when chromium is missing; AGENTD_CHROMIUM names another binary.
set -euo pipefail
BIN="${AGENTD_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$BIN" ]; then
    echo "chromium already installed: $BIN"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install_browser.sh: $BIN is missing; run as root (apt-get install chromium) or set AGENTD_CHROMIUM" >&2
    exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
echo "chromium installed: $("$BIN" --version 2>/dev/null || echo "$BIN")"
