#!/usr/bin/env bash
# Debian's Prometheus server for the end-to-end test of `spikelens incident --prometheus`.
# Idempotent; skipped (the test then skips with a reason) where apt is unavailable or we are not root.
set -u
if command -v prometheus >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "setup-prometheus: not root or no apt-get; the Prometheus test will be skipped" >&2
  exit 0
fi
apt-get update -qq >/dev/null 2>&1 || true
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1 \
  || echo "setup-prometheus: could not install prometheus; the Prometheus test will be skipped" >&2
exit 0
