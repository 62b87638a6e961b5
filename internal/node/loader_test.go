package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/reconcile"
)

// stateStore is a loaderStore over a state the test replaces.
type stateStore struct {
	mu sync.Mutex
	st *raftstore.State
}

func (s *stateStore) State() *raftstore.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

func (s *stateStore) Subscribe() (<-chan struct{}, func()) { return make(chan struct{}), func() {} }

// apply applies payloads to the state with raftstore's Applier.
func (s *stateStore) apply(t *testing.T, ps ...raftstore.Payload) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.st.Clone()
	for _, p := range ps {
		cmd, err := raftstore.NewCommand(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := (&raftstore.Applier{State: next}).Apply(cmd); err != nil {
			t.Fatal(err)
		}
	}
	s.st = next
}

// stage is a StageGeneration of web version k with etags the leader
// computed.
func stage(t *testing.T, n uint64, k int) *raftstore.StageGeneration {
	t.Helper()
	files := map[string][]byte{"web/policy.toml": []byte(webPolicy(k))}
	v := reconcile.Validate(files, policy.LoadOptions{}, engine.DefaultOptions())
	if len(v.Problems) > 0 {
		t.Fatal(v.Problems)
	}
	return &raftstore.StageGeneration{Generation: n, Commit: fmt.Sprintf("%040x", k), Files: files, Etags: v.Etags,
		CreateTime: time.Unix(int64(n), 0)}
}

func activate(n uint64) *raftstore.ActivateGeneration {
	return &raftstore.ActivateGeneration{Generation: n, Time: time.Unix(int64(n)+1, 0)}
}

type testLoader struct {
	*loader
	store    *stateStore
	mu       sync.Mutex
	reports  []raftstore.Payload
	failWith error
}

func newTestLoader(t *testing.T, st *raftstore.State) *testLoader {
	t.Helper()
	tl := &testLoader{store: &stateStore{st: st}}
	tl.loader = newLoader(loader{
		nodeID: "n1", store: tl.store, gens: &generations{}, log: hclog.NewNullLogger(),
		metrics: newNodeMetrics(prometheus.NewRegistry()),
		compile: func(files map[string][]byte) (*engine.Bundle, []string) {
			return reconcile.Compile(files, policy.LoadOptions{}, engine.DefaultOptions())
		},
		propose: func(_ context.Context, p raftstore.Payload) (raftstore.Result, error) {
			tl.mu.Lock()
			defer tl.mu.Unlock()
			if tl.failWith != nil {
				return raftstore.Result{}, tl.failWith
			}
			tl.reports = append(tl.reports, p)
			return raftstore.Result{}, nil
		},
	})
	return tl
}

func TestLoaderReportsAndSwaps(t *testing.T) {
	tl := newTestLoader(t, raftstore.NewState())
	ctx := context.Background()
	tl.store.apply(t, stage(t, 1, 1))
	if !tl.sync(ctx) || len(tl.reports) != 1 {
		t.Fatalf("reports = %v", tl.reports)
	}
	if r, ok := tl.reports[0].(*raftstore.ReportReady); !ok || r.Generation != 1 || r.NodeID != "n1" {
		t.Errorf("report = %#v", tl.reports[0])
	}
	if tl.gens.Current() != nil {
		t.Fatal("served a staged generation")
	}
	tl.store.apply(t, activate(1), stage(t, 2, 2))
	tl.failWith = errors.New("no leader") // reports are retried
	if tl.sync(ctx) {
		t.Error("a failed report was not kept for a retry")
	}
	if cur := tl.gens.Current(); cur == nil || cur.Generation != 1 {
		t.Fatalf("current = %+v", cur)
	}
	tl.failWith = nil
	if !tl.sync(ctx) || len(tl.reports) != 2 {
		t.Errorf("retried reports = %v", tl.reports)
	}
	tl.store.apply(t, activate(2))
	tl.sync(ctx)
	if tl.gens.Current().Generation != 2 || tl.gens.Get(1) == nil {
		t.Error("generation 2 active with 1 kept")
	}
	// A staged generation that does not compile here is reported failed
	// with its problems; the served generation stays.
	bad := stage(t, 3, 3)
	bad.Files = map[string][]byte{"web/policy.toml": []byte(brokenPolicy)}
	tl.store.apply(t, bad)
	tl.sync(ctx)
	f, ok := tl.reports[2].(*raftstore.ReportFailed)
	if !ok || f.Generation != 3 || !strings.Contains(f.Errors[0], "pth") || tl.gens.Current().Generation != 2 {
		t.Errorf("report = %#v", tl.reports[2])
	}
}

// TestLoaderRefusesOtherEtags: a node that compiles a bundle with other
// etags than the leader's must not serve it.
func TestLoaderRefusesOtherEtags(t *testing.T) {
	tl := newTestLoader(t, raftstore.NewState())
	s := stage(t, 1, 1)
	s.Etags = map[string]string{"web": "not-this-one"}
	tl.store.apply(t, s)
	tl.sync(context.Background())
	f, ok := tl.reports[0].(*raftstore.ReportFailed)
	if !ok || !strings.Contains(f.Errors[0], "merge_default") {
		t.Errorf("report = %#v", tl.reports[0])
	}
}
