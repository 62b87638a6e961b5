package api

import (
	"net/http"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/cluster"
)

// statusView is a leader's view of n1 and n2 as heartbeats at t leave it.
func statusView(t time.Time, reachable bool, executed uint64) cluster.View {
	node := func(id string, ok bool) cluster.NodeView {
		return cluster.NodeView{LastHeartbeat: t, Generation: 6, Reachable: ok, AppliedIndex: uint64(t.Unix()),
			Status: &cluster.NodeStatus{Version: "1", State: "ACTIVE", Healthy: "HEALTHY", Group: "default",
				Subgroup: "default", Generation: 6, Statistics: cluster.Statistics{PolicyExecutedCount: executed}}}
	}
	return cluster.View{Leader: "n1", Time: t, Source: cluster.SourceStatus{Commit: "c6", Time: t},
		Nodes: map[string]cluster.NodeView{"n1": node("n1", true), "n2": node("n2", reachable)}}
}

// TestStatusETagIgnoresHeartbeatTimes: /v1/status carries heartbeat
// times, applied indexes, the source's read time and decision counters,
// which move on every heartbeat of a cluster where nothing happens. Its
// tag leaves them out, so a console polling an unchanged cluster is
// answered 304; a change of what the cluster is (a node unreachable)
// changes the tag.
func TestStatusETagIgnoresHeartbeatTimes(t *testing.T) {
	fc := &fakeCluster{state: clusterState(), view: statusView(ts, true, 10)}
	e, _ := newGuardedEnv(t, Config{Cluster: fc})
	auth := bearer(readerToken)
	first := e.do(http.MethodGet, statusPath, nil, auth)
	tag := first.header.Get("ETag")
	if first.code != 200 || tag == "" {
		t.Fatalf("GET %s: %d, ETag %q", statusPath, first.code, tag)
	}
	cond := map[string]string{"Authorization": auth["Authorization"], "If-None-Match": tag}

	fc.mu.Lock()
	fc.view = statusView(ts.Add(7*time.Second), true, 500)
	fc.mu.Unlock()
	if again := e.do(http.MethodGet, statusPath, nil, cond); again.code != http.StatusNotModified {
		t.Fatalf("GET %s after heartbeats only: %d, ETag %s (was %s)", statusPath, again.code, again.header.Get("ETag"), tag)
	}
	if full := e.do(http.MethodGet, statusPath, nil, auth); full.code != 200 || full.header.Get("ETag") != tag {
		t.Fatalf("GET %s without a tag: %d, ETag %s; want 200 with %s", statusPath, full.code, full.header.Get("ETag"), tag)
	}

	fc.mu.Lock()
	fc.view = statusView(ts.Add(9*time.Second), false, 500)
	fc.mu.Unlock()
	if changed := e.do(http.MethodGet, statusPath, nil, cond); changed.code != 200 || changed.header.Get("ETag") == tag {
		t.Fatalf("GET %s after n2 went unreachable: %d, ETag %s (was %s)", statusPath, changed.code, changed.header.Get("ETag"), tag)
	}
}
