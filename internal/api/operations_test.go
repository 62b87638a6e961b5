package api

import (
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// withOperation stores op in the fake's state, as raft would apply it.
func (f *fakeCluster) withOperation(t *testing.T, op *preview.Operation) {
	t.Helper()
	p, err := op.PutPayload()
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	next := f.state.Clone()
	next.Operations[p.ID] = raftstore.Operation{ID: p.ID, Data: p.Data}
	f.state = next
}

// TestWaitOperation: :wait answers a running operation as it is when its
// timeout passes, answers as soon as it is done, refuses timeouts beyond
// the bound naming the parameter, and leaves no goroutine behind when
// its client goes away.
func TestWaitOperation(t *testing.T) {
	fc := &fakeCluster{state: clusterState()}
	e := newTestEnv(t, Config{Cluster: fc})
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	op := preview.NewOperation("0a1b", preview.MethodCommit, "policies/web/experiments/e", at)
	fc.withOperation(t, op)
	const path = "/v1/operations/0a1b:wait"

	start := time.Now()
	a := e.post(path, `{"timeout":"0.2s"}`)
	var got preview.Operation
	if err := json.Unmarshal(a.body, &got); a.code != 200 || err != nil || got.Done || got.Name != op.Name {
		t.Fatalf("wait on a running operation: %d %s", a.code, a.body)
	}
	t.Logf("a 0.2s wait on a running operation answered after %v", time.Since(start))

	go func() {
		time.Sleep(300 * time.Millisecond)
		done, _ := op.Succeed(nil, at)
		fc.withOperation(t, done)
	}()
	start = time.Now()
	a = e.post(path, `{"timeout":"30s"}`)
	if err := json.Unmarshal(a.body, &got); a.code != 200 || err != nil || !got.Done {
		t.Fatalf("wait until done: %d %s", a.code, a.body)
	}
	t.Logf("a 30s wait answered %v after its start, once the operation was done", time.Since(start))

	for _, bad := range []string{`{"timeout":"61s"}`, `{"timeout":"-1s"}`, `{"timeout":"NaNs"}`, `{"timeout":"5m"}`,
		`{"timeout":"Infs"}`, `{"timeout":5}`, `{"timeout":"0s"}`} {
		a := e.post(path, bad)
		wantError(t, a, 400, "INVALID_ARGUMENT")
		if !strings.Contains(string(a.body), "timeout") {
			t.Errorf("%s: the error does not name timeout: %s", bad, a.body)
		}
	}
	wantError(t, e.post("/v1/operations/NOPE:wait", `{}`), 404, "NOT_FOUND")
	wantError(t, e.post("/v1/operations/0a1b:wait/x", `{}`), 404, "NOT_FOUND")
	wantError(t, e.do(http.MethodGet, "/v1/operations/0a1b:wait", nil, nil), 405, "UNIMPLEMENTED")
	wantError(t, e.do(http.MethodPut, "/v1/operations/0a1b", strings.NewReader("{}"), nil), 405, "UNIMPLEMENTED")
}

// TestWaitEndsWithItsClient: a waiter whose client goes away ends at
// once; none is left running.
func TestWaitEndsWithItsClient(t *testing.T) {
	fc := &fakeCluster{state: clusterState()}
	e := newTestEnv(t, Config{Cluster: fc})
	fc.withOperation(t, preview.NewOperation("0a1b", preview.MethodCommit, "policies/web/experiments/e", time.Now()))
	before := runtime.NumGoroutine()
	const waiters = 20
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, waiters)
	for range waiters {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.http.URL+"/v1/operations/0a1b:wait",
				strings.NewReader(`{"timeout":"60s"}`))
			req.Header.Set("Content-Type", "application/json")
			resp, err := e.http.Client().Do(req)
			if err == nil {
				resp.Body.Close()
			}
			errc <- err
		}()
	}
	time.Sleep(200 * time.Millisecond)
	cancel()
	for range waiters {
		if err := <-errc; err == nil {
			t.Error("a waiter answered before its 60s timeout or its client went away")
		}
	}
	e.http.CloseClientConnections()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("goroutines: %d before %d waiters, %d after they left", before, waiters, runtime.NumGoroutine())
	if n := runtime.NumGoroutine(); n > before+2 {
		t.Errorf("%d goroutines left after the waiters' clients went away (%d before)", n, before)
	}
}

// TestWaitersAreBounded: a node holds at most maxWaiters :wait calls
// open; the next is RESOURCE_EXHAUSTED with Retry-After, and a slot
// frees when a waiter leaves.
func TestWaitersAreBounded(t *testing.T) {
	fc := &fakeCluster{state: clusterState()}
	e := newTestEnv(t, Config{Cluster: fc})
	fc.withOperation(t, preview.NewOperation("0a1b", preview.MethodCommit, "policies/web/experiments/e", time.Now()))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, maxWaiters)
	for range maxWaiters {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.http.URL+"/v1/operations/0a1b:wait",
				strings.NewReader(`{"timeout":"60s"}`))
			req.Header.Set("Content-Type", "application/json")
			resp, err := e.http.Client().Do(req)
			if err == nil {
				resp.Body.Close()
			}
			errc <- err
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for e.srv.ops.waiters.Load() < maxWaiters && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	a := e.post("/v1/operations/0a1b:wait", `{"timeout":"1s"}`)
	wantError(t, a, 429, "RESOURCE_EXHAUSTED")
	if a.header.Get("Retry-After") == "" {
		t.Error("no Retry-After on a refused waiter")
	}
	cancel()
	for range maxWaiters {
		<-errc
	}
	for e.srv.ops.waiters.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if a := e.post("/v1/operations/0a1b:wait", `{"timeout":"0.1s"}`); a.code != 200 {
		t.Fatalf("a waiter once the others left: %d %s", a.code, a.body)
	}
}
