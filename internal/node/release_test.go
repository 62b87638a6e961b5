package node

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/reconcile"
)

// TestLoaderReleasesAfterLargeLists: a generation whose lists reach
// releaseListBytes hands its garbage back (and the raft log's pages) once
// served, not while staged (its report goes out first); small ones and
// syncs with nothing new never pay for it.
func TestLoaderReleasesAfterLargeLists(t *testing.T) {
	t.Parallel()
	tl := newTestLoader(t, raftstore.NewState())
	drops, reportsAtDrop := 0, 0
	tl.dropLogPages = func() error {
		drops++
		reportsAtDrop = len(tl.reports)
		return nil
	}
	ctx := context.Background()
	tl.store.apply(t, stage(t, 1, 1), activate(1))
	tl.sync(ctx)
	tl.sync(ctx)
	if drops != 0 {
		t.Fatalf("a generation without lists released memory %d times", drops)
	}

	var hosts strings.Builder
	for i := 0; hosts.Len() < releaseListBytes; i++ {
		fmt.Fprintf(&hosts, "host-%d.example\n", i)
	}
	big := stage(t, 2, 2)
	big.Files = map[string][]byte{"web/policy.toml": big.Files["web/policy.toml"], "_lists/hosts.txt": []byte(hosts.String())}
	v := reconcile.Validate(big.Files, policy.LoadOptions{}, engine.DefaultOptions())
	if len(v.Problems) > 0 {
		t.Fatal(v.Problems)
	}
	big.Etags = v.Etags
	tl.store.apply(t, big)
	tl.sync(ctx)
	if drops != 0 || len(tl.reports) != 1 {
		t.Fatalf("staging a %d-byte list: %d releases, %d reports (want none, the Ready of 2)", hosts.Len(), drops, len(tl.reports))
	}
	if r, ok := tl.reports[0].(*raftstore.ReportReady); !ok || r.Generation != 2 {
		t.Fatalf("report = %#v", tl.reports[0])
	}
	tl.store.apply(t, activate(2))
	tl.sync(ctx)
	if cur := tl.gens.Current(); cur == nil || cur.Generation != 2 || drops != 1 || reportsAtDrop != 1 {
		t.Fatalf("serving generation 2 (%+v): %d releases, want 1", cur, drops)
	}
	tl.sync(ctx)
	if drops != 1 {
		t.Fatalf("a sync with nothing new released again (%d)", drops)
	}
}

func TestListBytes(t *testing.T) {
	files := map[string][]byte{
		"web/policy.toml":      []byte("12345"),
		"_lists/a.netset":      []byte("123"),
		"_lists/b.txt":         []byte("12"),
		"web/_lists/c.txt":     []byte("1"), // the policies root's only
		"_lists_not/d.txt":     []byte("1"),
		"web/lists/_lists.txt": []byte("1"),
	}
	if got := listBytes(files); got != 3+2 {
		t.Errorf("listBytes = %d, want 5", got)
	}
}
