#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME (default 10s) each, and
# lists the targets that failed at the end (a failing input is saved under
# the package's testdata/fuzz, where `go test` replays it from then on).
set -uo pipefail
fuzztime=${FUZZTIME:-10s}
failed=()
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "== $pkg $target ($fuzztime)"
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"; then
      failed+=("$pkg $target")
    fi
  done
done
if ((${#failed[@]})); then
  printf 'FAILED: %s\n' "${failed[@]}"
  exit 1
fi
