package main

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// electingAPI answers the first n requests with the API's 503 of a
// cluster between leaders (reason), then with answer; it counts requests.
func electingAPI(t *testing.T, n int32, reason, answer string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var seen atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) <= n {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":{"code":503,"status":"UNAVAILABLE","message":"no leader is known",` +
				`"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"` + reason + `","domain":"reconciler"}]}}`))
			return
		}
		w.Write([]byte(answer))
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

// An idempotent write (a state change to a state) and a read are sent
// again while the cluster elects a leader, and succeed once it has one.
func TestCLIWaitsOutAnElection(t *testing.T) {
	srv, seen := electingAPI(t, 2, "NO_LEADER", `{"changed":[{"id":"n2","from":"ACTIVE","to":"DRAINING"}]}`)
	if code, out, errOut := cli(t, "", "nodes", "state", "--server", srv.URL, "--name", "n2", "draining"); code != exitOK || seen.Load() != 3 {
		t.Fatalf("nodes state = %d after %d requests: %s %s", code, seen.Load(), out, errOut)
	}
	srv, seen = electingAPI(t, 1, "FORWARD_FAILED", `{"experiments":[]}`)
	if code, _, errOut := cli(t, "", "experiments", "list", "--server", srv.URL, "web"); code != exitOK || seen.Load() != 2 {
		t.Fatalf("experiments list = %d after %d requests: %s", code, seen.Load(), errOut)
	}
}

// A write that is not harmless twice (a rollback rolls back again) is
// sent once: the 503 is the answer, for the operator to decide.
func TestCLIDoesNotRepeatARollback(t *testing.T) {
	srv, seen := electingAPI(t, 1, "LEADERSHIP_LOST", `{}`)
	if code, _, errOut := cli(t, "", "rollback", "--server", srv.URL); code != exitCheck || seen.Load() != 1 {
		t.Fatalf("rollback = %d after %d requests: %s", code, seen.Load(), errOut)
	}
}

// A 503 for another reason (load) is not retried, and a cluster that stays
// without a leader gets its 503 once leaderWait is spent.
func TestCLILeaderWaitIsBounded(t *testing.T) {
	srv, seen := electingAPI(t, 1, "", `{}`)
	if code, _, _ := cli(t, "", "nodes", "state", "--server", srv.URL, "--name", "n2", "active"); code != exitCheck || seen.Load() != 1 {
		t.Fatalf("a 503 without an election's reason: %d after %d requests", code, seen.Load())
	}
	defer func(w time.Duration) { leaderWait = w }(leaderWait)
	leaderWait = 500 * time.Millisecond
	srv, seen = electingAPI(t, 1<<30, "NOT_LEADER", `{}`)
	if code, _, _ := cli(t, "", "nodes", "state", "--server", srv.URL, "--name", "n2", "active"); code != exitCheck || seen.Load() < 2 {
		t.Fatalf("no leader ever: %d after %d requests", code, seen.Load())
	}
}
