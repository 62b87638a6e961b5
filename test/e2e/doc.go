// Package e2e holds end-to-end tests of the git source with real
// processes, all from test/harness: a `git http-backend` server in the
// test process (internal/gittest, with a token) and three `reconciler
// serve` processes on 127.0.0.1 following it. A user's clone pushes with the git CLI; the tests
// read what every node serves and reports over HTTP, and run `reconciler
// rollback` as a user would.
//
// Running:
//
//	go test -count=1 -v ./test/e2e/                       # the tests (skipped by -short), under 3 min on 2 cores
//	RECONCILER_E2E_BENCH=1 go test -count=1 -v -run '^TestBench' -timeout 20m ./test/e2e/
//	RECONCILER_E2E_LOGS=1 go test ...                     # print every node's log tail even on success
//
// TestBench* measure merge-to-active (from `git push` returning to the new
// generation served by all three nodes) and print p50/p99; they never
// assert on timings.
package e2e
