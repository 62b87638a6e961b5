#!/usr/bin/env bash
# Installs the system packages the tests need (tests never skip for want of them),
# or fails loudly saying what is missing.
set -euo pipefail
need=()
command -v git >/dev/null 2>&1 || need+=(git)
# test/gateway runs a real nginx (auth_request and mirror); Debian puts it in /usr/sbin.
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
# deploy/ builds the container image with podman and checks the alert rules with promtool.
command -v podman >/dev/null 2>&1 || need+=(podman)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
# test/console drives the web console in a real headless Chromium (Debian's chromium package).
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
echo "deps: installing ${need[*]}" >&2
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
else
  echo "deps: missing ${need[*]}: install them (Debian: apt-get install ${need[*]}) and run again" >&2
  exit 1
fi
