// Package system holds the system tests of reconciler: real `reconciler
// serve` processes on 127.0.0.1, started, killed with SIGKILL, paused with
// SIGSTOP and restarted on the same data directories while goroutines send
// decisions to every node and an invariant checker watches the answers
// (rqlite's system_test, hashicorp/raft's fuzzy tests).
//
// The processes, the git server, the policy trees and the API answers come
// from test/harness, the one process harness of the tests; this package
// adds what only its tests need: Cluster remembers every generation read
// (for the invariants), Load sends decisions to every node and Checker
// holds what they must satisfy.
//
// Running:
//
//	go test -count=1 -v ./test/system/                  # the system tests (skipped by -short)
//	RECONCILER_SYSTEM_BENCH=1 go test -count=1 -v -run '^TestBench' -timeout 30m ./test/system/
//	RECONCILER_SYSTEM_RACE=1 go test ...                # build the daemon with -race too
//	RECONCILER_SYSTEM_LOGS=200 go test ...              # print node logs of passing tests too
//
// Measurements (TestBench*) print their numbers and never assert on timings;
// a failed decision or a broken invariant still fails them.
package system
