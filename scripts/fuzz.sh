#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME (default 10s) each.
set -euo pipefail
fuzztime=${FUZZTIME:-10s}
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "== $pkg $target ($fuzztime)"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
  done
done
