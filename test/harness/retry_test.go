package harness

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// electing answers the API's "between leaders" 503 (reason) to the first
// n requests, then 200; it counts the requests it saw.
func electing(t *testing.T, n int32, reason string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var seen atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) <= n {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":{"code":503,"status":"UNAVAILABLE","message":"not the leader",` +
				`"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"` + reason + `","domain":"reconciler"}]}}`))
			return
		}
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

func TestDoRetryWaitsOutAnElection(t *testing.T) {
	for _, reason := range []string{"NO_LEADER", "NOT_LEADER", "LEADERSHIP_LOST", "FORWARD_FAILED"} {
		srv, seen := electing(t, 2, reason)
		code, body, err := NewClient(5*time.Second, 0).DoRetry(http.MethodPost, srv.URL+"/v1/cluster:reconcile", "{}")
		if err != nil || code != http.StatusOK || string(body) != `{"ok":true}` {
			t.Fatalf("%s: %d %s %v, want 200 after the election", reason, code, body, err)
		}
		if got := seen.Load(); got != 3 {
			t.Fatalf("%s: %d requests, want 3", reason, got)
		}
	}
}

// A 503 for load (no reason, Retry-After), a 429 and a 503 of another
// reason are answers some tests assert: DoRetry hands them back at once.
func TestDoRetryKeepsOtherRefusals(t *testing.T) {
	answers := map[string]func(http.ResponseWriter){
		"shed": func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"error":{"code":503,"status":"UNAVAILABLE","message":"too many decisions in flight"}}`, 503)
		},
		"429": func(w http.ResponseWriter) {
			http.Error(w, `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","message":"too many waiters"}}`, 429)
		},
		"other reason": func(w http.ResponseWriter) {
			http.Error(w, `{"error":{"code":503,"status":"UNAVAILABLE","message":"x","details":[{"reason":"RAFT_UNREACHABLE"}]}}`, 503)
		},
		"not json": func(w http.ResponseWriter) { http.Error(w, "NO_LEADER", 503) },
	}
	for name, answer := range answers {
		var seen atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			seen.Add(1)
			answer(w)
		}))
		code, _, err := NewClient(5*time.Second, 0).DoRetry(http.MethodPost, srv.URL+"/x", "{}")
		srv.Close()
		if err != nil || (code != 503 && code != 429) {
			t.Fatalf("%s: %d %v", name, code, err)
		}
		if got := seen.Load(); got != 1 {
			t.Fatalf("%s: %d requests, want 1 (not retried)", name, got)
		}
	}
}

// A cluster that stays without a leader gets the 503 back once the
// client's LeaderWait is spent, not a wait without end.
func TestDoRetryIsBounded(t *testing.T) {
	srv, seen := electing(t, 1<<30, "NO_LEADER")
	c := NewClient(5*time.Second, 0)
	c.LeaderWait = 300 * time.Millisecond
	code, _, err := c.DoRetry(http.MethodPost, srv.URL+"/x", "{}")
	if err != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("%d %v, want the last 503", code, err)
	}
	if seen.Load() < 2 {
		t.Fatalf("%d requests, want retries before giving up", seen.Load())
	}
}

// A refused connection (a node restarting while the others elect) is
// retried until the bound; the last error comes back.
func TestDoRetryRetriesARefusedConnection(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if !betweenLeaders(0, nil, func() error { _, err := http.Get("http://" + addr + "/"); return err }()) {
		t.Fatal("a refused connection is not taken for an election")
	}
	c := NewClient(5*time.Second, 0)
	c.LeaderWait = 200 * time.Millisecond
	if _, _, err := c.DoRetry(http.MethodPost, "http://"+addr+"/x", "{}"); err == nil {
		t.Fatal("no error from a port nobody listens on")
	}
}

// DoRetryRefused sends again only what no leader took (NO_LEADER,
// NOT_LEADER): a LEADERSHIP_LOST or FORWARD_FAILED may come after the
// work was done, and comes back at once.
func TestDoRetryRefusedRetriesOnlyWhatWasNotTaken(t *testing.T) {
	for reason, want := range map[string]int32{"NO_LEADER": 3, "NOT_LEADER": 3, "LEADERSHIP_LOST": 1, "FORWARD_FAILED": 1} {
		srv, seen := electing(t, 2, reason)
		code, _, err := NewClient(5*time.Second, 0).DoRetryRefused(http.MethodPost, srv.URL+"/v1/generations:rollback", "{}")
		if got := seen.Load(); err != nil || got != want || (want == 3) != (code == http.StatusOK) {
			t.Errorf("%s: %d requests, answer %d %v; want %d requests", reason, got, code, err, want)
		}
	}
}
