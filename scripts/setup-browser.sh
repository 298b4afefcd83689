#!/usr/bin/env bash
# Headless Chromium + ChromeDriver from Debian for the browser tests of the reports.
# Idempotent; skipped (tests then skip with a reason) where apt is unavailable or we are not root.
set -u
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "setup-browser: not root or no apt-get; browser tests will be skipped" >&2
  exit 0
fi
apt-get update -qq >/dev/null 2>&1 || true
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1 \
  || echo "setup-browser: could not install chromium; browser tests will be skipped" >&2
exit 0
