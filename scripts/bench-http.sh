#!/usr/bin/env bash
# bench-http.sh: `make bench-http` (and the first step of `make bench`).
# Side by side on this machine, each server pinned to CPU 0 and wrk to CPU 1:
#
#   evaluate   POST /v1/policies/edge-firewall:evaluate on a one-node cluster
#              serving policies.example
#   trivial    tools/benchref -mode trivial: net/http + encoding/json decoding
#              the same request into a struct
#   nodecode   tools/benchref -mode nodecode: net/http reading the body only
#   fastdecode (BENCH_DECODE=1) tools/benchref -mode fastdecode: nodecode plus
#              the node's own request decoder, and nothing else
#   evaluate1M (BENCH_LIST=1) the same node with 1,000,000 generated CIDRs
#              appended to _lists/abuse-blocklist.netset
#   list100k   (BENCH_OPA=1) a node whose only policy denies the sources in a
#              list of 100,000 generated CIDRs (inIpList)
#   opa100k    (BENCH_OPA=1) OPA on the same 100,000 CIDRs
#              (net.cidr_contains_matches), installed into a temporary GOBIN
#              with `go install` (OPA_VERSION, default v1.22.3), or OPA_BIN
#
# over the 2,500 requests of policies.example/_traffic/sample.jsonl
# (scripts/bench-http.lua cycles through them), in BENCH_ROUNDS interleaved
# rounds of BENCH_DURATION each (the order rotates every round, so a drift in
# background load does not favour one server). It prints req/s (median and
# range) per server and the ratios of the medians.
#
# Knobs: BENCH_ROUNDS (5), BENCH_DURATION (10s), BENCH_CONNS (64),
# BENCH_DECODE (0; 1 adds fastdecode), BENCH_LIST (0; 1 adds evaluate1M), BENCH_OPA (0; 1 adds list100k and opa100k;
# BENCH_OPA_CONNS, 2, connections to OPA), BENCH_PROFILE (a file: the evaluate
# node writes its CPU profile there, read it with `go tool pprof`),
# BENCH_REF_TIMEOUTS (0; 1 runs trivial and nodecode with the node's
# http.Server read, write and idle timeouts, benchref -node-timeouts).
# wrk comes from Debian's package; without it this fails loudly.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${BENCH_ROUNDS:-5}
DURATION=${BENCH_DURATION:-10s}
CONNS=${BENCH_CONNS:-64}
LIST=${BENCH_LIST:-0}
DECODE=${BENCH_DECODE:-0}
OPA=${BENCH_OPA:-0}
GO=${GO:-go}

command -v wrk >/dev/null || { echo "bench-http: wrk is not installed (apt-get install wrk)" >&2; exit 1; }
command -v taskset >/dev/null || { echo "bench-http: taskset is not installed (util-linux)" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "bench-http: needs 2 CPUs (server on one, wrk on the other)" >&2; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

$GO build -o "$work/reconciler" ./cmd/reconciler
$GO build -o "$work/benchref" ./tools/benchref

# freeport: sets fp to a loopback TCP port nobody listens on and this script
# has not handed out (other work on this machine runs servers too: a fixed
# port could measure someone else's).
taken=" "
freeport() {
	while :; do
		fp=$((20000 + RANDOM % 40000))
		case $taken in *" $fp "*) continue ;; esac
		if [ -z "$(ss -Htln "sport = :$fp" 2>/dev/null)" ]; then
			taken="$taken$fp "
			return
		fi
	done
}

# node NAME POLICIES: start a one-node cluster on CPU 0; its URL base is
# http://127.0.0.1:${port[NAME]}.
node() {
	local name=$1 policies=$2 dir="$work/$1" http raft
	freeport; http=$fp; port[$name]=$fp
	freeport; raft=$fp
	mkdir -p "$dir"
	cat >"$dir/config.toml" <<TOML
[node]
id = "$name"
data_dir = "data"
http_addr = "127.0.0.1:$http"
raft_addr = "127.0.0.1:$raft"
bootstrap = true
[git]
url = "policies.git"
branch = "main"
init_from = "$policies"
poll = "@every 1h"
[log]
level = "warn"
TOML
	if [ "$name" = evaluate ] && [ -n "${BENCH_PROFILE:-}" ]; then
		RECONCILER_CPUPROFILE=$(realpath -m "$BENCH_PROFILE") taskset -c 0 "$work/reconciler" serve --config "$dir/config.toml" 2>"$dir/log" &
	else
		taskset -c 0 "$work/reconciler" serve --config "$dir/config.toml" 2>"$dir/log" &
	fi
	pids+=($!)
	pid[$name]=$!
}

# ready URL SERVER: wait until URL answers 200 to one sample request, from
# the process this script started.
ready() {
	local url=$1 body=$work/one.json i
	[ "$2" = opa100k ] && body=$work/one-input.json
	for i in $(seq 1 600); do
		if ! kill -0 "${pid[$2]}" 2>/dev/null; then
			echo "bench-http: $2 exited; logs in $work" >&2
			cat "$work/$2/log" "$work/$2.log" 2>/dev/null >&2 || true
			exit 1
		fi
		if curl -fsS -o /dev/null -H 'Content-Type: application/json' --data-binary "@$body" "$url" 2>/dev/null; then
			return 0
		fi
		sleep 0.2
	done
	echo "bench-http: $url never answered; logs in $work" >&2
	cat "$work"/*/log >&2 || true
	exit 1
}

head -n 1 policies.example/_traffic/sample.jsonl >"$work/one.json"
declare -A url pid port
node evaluate "$PWD/policies.example"
url[evaluate]=http://127.0.0.1:${port[evaluate]}/v1/policies/edge-firewall:evaluate
refflags=()
if [ "${BENCH_REF_TIMEOUTS:-0}" = 1 ]; then
	refflags=(-node-timeouts)
	echo "bench-http: trivial and nodecode run with the node's server timeouts" >&2
fi
refs=(trivial nodecode)
[ "$DECODE" = 1 ] && refs+=(fastdecode)
for mode in "${refs[@]}"; do
	freeport; port[$mode]=$fp
	taskset -c 0 "$work/benchref" -addr "127.0.0.1:${port[$mode]}" -mode $mode "${refflags[@]}" 2>"$work/$mode.log" &
	pids+=($!)
	pid[$mode]=$!
	url[$mode]=http://127.0.0.1:${port[$mode]}/v1/policies/edge-firewall:evaluate
done
servers=(evaluate "${refs[@]}")
if [ "$LIST" = 1 ]; then
	cp -r policies.example "$work/policies-1m"
	"$work/benchref" -gen-list 1000000 >>"$work/policies-1m/_lists/abuse-blocklist.netset"
	node evaluate1M "$work/policies-1m"
	url[evaluate1M]=http://127.0.0.1:${port[evaluate1M]}/v1/policies/edge-firewall:evaluate
	servers+=(evaluate1M)
fi
if [ "$OPA" = 1 ]; then
	opa=${OPA_BIN:-}
	if [ -z "$opa" ]; then
		# Installed for this run only: OPA is never a dependency of the module.
		echo "bench-http: installing OPA ${OPA_VERSION:-v1.22.3} into a temporary GOBIN" >&2
		(cd "$work" && GOBIN="$work/bin" GOFLAGS=-mod=mod $GO install "github.com/open-policy-agent/opa@${OPA_VERSION:-v1.22.3}")
		opa=$work/bin/opa
	fi
	mkdir -p "$work/policies-100k/blocklist" "$work/policies-100k/_lists" "$work/opa"
	"$work/benchref" -gen-list 100000 >"$work/policies-100k/_lists/blocklist.netset"
	cat >"$work/policies-100k/blocklist/policy.toml" <<'TOML'
default_action = "allow"
[[rules]]
name = "deny-blocklist"
priority = 1
action = "deny"
match = "inIpList(request.source_ip, 'blocklist')"
TOML
	cat >"$work/opa/blocklist.rego" <<'REGO'
package edge

default deny := false

deny if count(net.cidr_contains_matches(data.blocklist, input.source_ip)) > 0
REGO
	awk 'BEGIN {printf "{\"blocklist\":["} {printf "%s\"%s\"", (NR > 1 ? "," : ""), $0} END {print "]}"}' \
		"$work/policies-100k/_lists/blocklist.netset" >"$work/opa/data.json"
	node list100k "$work/policies-100k"
	url[list100k]=http://127.0.0.1:${port[list100k]}/v1/policies/blocklist:evaluate
	freeport; port[opa100k]=$fp
	taskset -c 0 "$opa" run --server --log-level error --addr "127.0.0.1:${port[opa100k]}" \
		"$work/opa/blocklist.rego" "$work/opa/data.json" 2>"$work/opa100k.log" &
	pids+=($!)
	pid[opa100k]=$!
	url[opa100k]=http://127.0.0.1:${port[opa100k]}/v1/data/edge/deny
	servers+=(list100k opa100k)
fi
printf '{"input":%s}' "$(cat "$work/one.json")" >"$work/one-input.json"
for s in "${servers[@]}"; do ready "${url[$s]}" "$s"; done
sleep 1
for s in "${servers[@]}"; do
	kill -0 "${pid[$s]}" 2>/dev/null || { echo "bench-http: $s exited (its port taken?)" >&2; exit 1; }
done

export BENCH_TRAFFIC=$PWD/policies.example/_traffic/sample.jsonl
# wrkrun SERVER DURATION: one wrk run against SERVER, its output on stdout.
wrkrun() {
	local wrap="" path conns=$CONNS
	path=/${url[$1]#http://*/}
	# OPA takes tens of milliseconds a decision: with many connections
	# none would finish within a round.
	[ "$1" = opa100k ] && wrap=input && conns=${BENCH_OPA_CONNS:-2}
	BENCH_WRAP=$wrap BENCH_PATH=$path taskset -c 1 wrk -t1 -c"$conns" -d"$2" --timeout 60s -s scripts/bench-http.lua "${url[$1]}"
}
declare -A rates cpus
# ticks PID: CPU time (user+system, clock ticks) the process has used.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
n=${#servers[@]}
# One short warm-up each (connections, caches, the first GC cycles).
for s in "${servers[@]}"; do
	wrkrun "$s" 2s >/dev/null
done
for r in $(seq 1 "$ROUNDS"); do
	for k in $(seq 0 $((n - 1))); do
		s=${servers[$(((k + r) % n))]}
		t0=$(ticks "${pid[$s]}")
		out=$(wrkrun "$s" "$DURATION")
		t1=$(ticks "${pid[$s]}")
		bad=$(awk '/^non-200:/ {print $2}' <<<"$out")
		rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
		reqs=$(awk '/ requests in / {print $1}' <<<"$out")
		if [ -z "$rps" ] || [ "$bad" != 0 ] || [ "${reqs:-0}" = 0 ]; then
			echo "bench-http: $s: ${reqs:-no} answers, ${bad:-?} of them not 200" >&2
			echo "$out" >&2
			exit 1
		fi
		us=$(awk -v t=$((t1 - t0)) -v hz="$hz" -v n="$reqs" 'BEGIN {printf "%.1f", t * 1e6 / hz / n}')
		rates[$s]="${rates[$s]:-} $rps"
		cpus[$s]="${cpus[$s]:-} $us"
		printf 'round %d %-10s %10.0f req/s %6.1f us CPU/request\n' "$r" "$s" "$rps" "$us"
	done
done

# Medians, ranges and ratios.
for s in "${servers[@]}"; do echo "$s ${rates[$s]}"; echo "cpu-$s ${cpus[$s]}"; done | awk '
function median(a, n,   i, j, t) {
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
	name[NR] = $1; n = NF - 1
	for (i = 2; i <= NF; i++) v[i - 1] = $i
	med[$1] = median(v, n); lo[$1] = v[1]; hi[$1] = v[n]
}
END {
	printf "\n%-10s %10s  %-16s %s\n", "server", "req/s", "[range]", "CPU us/request, median [range] (server process)"
	for (k = 1; k <= NR; k += 2) { s = name[k]; c = "cpu-" s
		printf "%-10s %10.0f  [%.0f-%.0f]  %6.1f [%.1f-%.1f]\n", s, med[s], lo[s], hi[s], med[c], lo[c], hi[c] }
	printf "\nthroughput ratios (req/s):                 CPU ratios (reference us / evaluate us):\n"
	printf "evaluate / trivial    = %.2fx                  %.2fx\n", med["evaluate"] / med["trivial"], med["cpu-trivial"] / med["cpu-evaluate"]
	printf "evaluate / nodecode   = %.2fx                  %.2fx\n", med["evaluate"] / med["nodecode"], med["cpu-nodecode"] / med["cpu-evaluate"]
	if ("fastdecode" in med) {
		printf "evaluate / fastdecode = %.2fx                  %.2fx\n", med["evaluate"] / med["fastdecode"], med["cpu-fastdecode"] / med["cpu-evaluate"]
		printf "fastdecode / nodecode = %.2fx                  %.2fx\n", med["fastdecode"] / med["nodecode"], med["cpu-nodecode"] / med["cpu-fastdecode"]
	}
	if ("list100k" in med) printf "list100k / opa100k    = %.0fx                  %.0fx\n", med["list100k"] / med["opa100k"], med["cpu-opa100k"] / med["cpu-list100k"]
	if ("evaluate1M" in med) printf "evaluate1M / evaluate = %.2fx                  %.2fx\n", med["evaluate1M"] / med["evaluate"], med["cpu-evaluate"] / med["cpu-evaluate1M"]
}'
