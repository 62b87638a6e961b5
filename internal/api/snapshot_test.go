package api

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/policyrollout/reconciler/internal/backup"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// leadingCluster is the fake cluster on the node that leads.
type leadingCluster struct{ *fakeCluster }

func (l leadingCluster) Leader() string { return l.NodeID() }

// snapshotFunc adapts a function to Snapshotter.
type snapshotFunc func(w io.Writer) (backup.Header, error)

func (f snapshotFunc) SaveSnapshot(w io.Writer) (backup.Header, error) { return f(w) }

// TestSnapshotOnlyForAdminsOnTheLeader: a follower points to the leader
// without taking a snapshot; the leader streams one; a second request
// while one streams is refused rather than queued; an error before the
// first byte is an AIP-193 answer.
func TestSnapshotOnlyForAdminsOnTheLeader(t *testing.T) {
	taken := 0
	save := snapshotFunc(func(w io.Writer) (backup.Header, error) {
		taken++
		_, err := io.WriteString(w, "snapshot-bytes")
		return backup.Header{Index: 3}, err
	})
	fc := &fakeCluster{state: clusterState()}
	follower := newTestEnv(t, Config{Cluster: fc, Token: "token", Snapshots: save})
	req, _ := http.NewRequest(http.MethodGet, follower.http.URL+snapshotPath, nil)
	req.Header.Set("Authorization", "Bearer token")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != "http://h1"+snapshotPath || taken != 0 {
		t.Fatalf("follower: %d Location %q (taken %d)", resp.StatusCode, resp.Header.Get("Location"), taken)
	}

	leader := newTestEnv(t, Config{Cluster: leadingCluster{fc}, Token: "token", Snapshots: save})
	wantError(t, leader.do(http.MethodGet, snapshotPath, nil, nil), 401, "UNAUTHENTICATED")
	if a := leader.do(http.MethodHead, snapshotPath, nil, bearer("token")); a.code != 200 || taken != 0 {
		t.Fatalf("HEAD: %d, %d snapshots taken", a.code, taken)
	}
	a := leader.do(http.MethodGet, snapshotPath, nil, bearer("token"))
	if a.code != 200 || string(a.body) != "snapshot-bytes" || a.header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("leader: %d %q %v", a.code, a.body, a.header)
	}

	release, started := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	blocking := snapshotFunc(func(w io.Writer) (backup.Header, error) {
		if calls.Add(1) == 1 { // the first one holds until released
			close(started)
			<-release
		}
		return backup.Header{}, raftstore.ErrNotLeader
	})
	busy := newTestEnv(t, Config{Cluster: leadingCluster{fc}, Token: "token", Snapshots: blocking})
	var wg sync.WaitGroup
	wg.Add(1)
	var first answer
	go func() { defer wg.Done(); first = busy.do(http.MethodGet, snapshotPath, nil, bearer("token")) }()
	<-started
	second := busy.do(http.MethodGet, snapshotPath, nil, bearer("token"))
	close(release)
	wg.Wait()
	wantError(t, second, 429, "RESOURCE_EXHAUSTED")
	if first.code == 200 || !strings.Contains(string(first.body), `"error"`) {
		t.Fatalf("a snapshot that failed before its first byte: %d %s", first.code, first.body)
	}
}
