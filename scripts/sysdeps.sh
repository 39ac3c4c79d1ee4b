#!/usr/bin/env bash
# Install the system packages the tests and benchmarks use, when missing and when we can
# (root with apt-get, as on CI). Elsewhere print what is missing; the tests that need a
# package say so themselves.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v fswatch  >/dev/null 2>&1 || need+=(fswatch)
command -v git      >/dev/null 2>&1 || need+=(git)
command -v wrk      >/dev/null 2>&1 || need+=(wrk)   # load generator for bench/b_40_web.py
command -v jq       >/dev/null 2>&1 || need+=(jq)    # what a bash agent reads the discovery card with
command -v curl     >/dev/null 2>&1 || need+=(curl)
command -v strace   >/dev/null 2>&1 || need+=(strace)  # what a take does before it prints
# the bridge's tests run real servers; Debian installs it in /usr/sbin
command -v nats-server >/dev/null 2>&1 || [[ -x /usr/sbin/nats-server ]] || need+=(nats-server)
((${#need[@]})) || exit 0
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  echo "sysdeps: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
  echo "sysdeps: missing ${need[*]} (install them for the browser tests and benchmarks)" >&2
fi
