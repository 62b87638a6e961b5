package reconcile

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// failingMembers requires its nodes less those that reported the staged
// generation failed, and finds it unloadable once at least limit have.
type failingMembers struct {
	ids   []string
	limit int
}

func (m failingMembers) failed(st *raftstore.State) []string {
	g, _ := st.StagedGeneration()
	var out []string
	for _, id := range m.ids {
		if _, ok := g.NodeErrors[id]; ok {
			out = append(out, id)
		}
	}
	return out
}

func (m failingMembers) Required(st *raftstore.State) []string {
	var out []string
	for _, id := range m.ids {
		if !slices.Contains(m.failed(st), id) {
			out = append(out, id)
		}
	}
	return out
}

func (m failingMembers) Unloadable(st *raftstore.State) []string {
	if f := m.failed(st); len(f) >= m.limit {
		return []string{"cannot be loaded by a majority: " + strings.Join(f, ", ")}
	}
	return nil
}

// TestLoopPromotesWithoutAFailedNode: a node's failure report leaves the
// generation STAGED and the loop activates it once the others are Ready.
func TestLoopPromotesWithoutAFailedNode(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	repo.Commit("main", webPolicy("a"))
	startLoop(t, store, repo, failingMembers{ids: []string{"n1", "n2", "n3"}, limit: 2})
	eventually(t, "generation 1 staged", func() bool { return store.State().Staged == 1 })
	if _, err := store.Propose(context.Background(), &raftstore.ReportFailed{Generation: 1, NodeID: "n3",
		Errors: []string{"web/policy.toml:3: conflict"}}); err != nil {
		t.Fatal(err)
	}
	if g := gen(t, store, 1); g.State != raftstore.GenerationStaged {
		t.Fatalf("one node's failure made generation 1 %s", g.State)
	}
	ready(t, store, 1, "n1", "n2")
	eventually(t, "generation 1 active without n3", func() bool { return store.State().Active == 1 })
}

// TestLoopInvalidatesAnUnloadableGeneration: when the nodes that cannot
// load the staged generation leave no majority, the leader marks it
// INVALID with the reason, and it is never activated.
func TestLoopInvalidatesAnUnloadableGeneration(t *testing.T) {
	store, repo := newFakeStore(), newFakeRepo()
	repo.Commit("main", webPolicy("a"))
	startLoop(t, store, repo, failingMembers{ids: []string{"n1", "n2", "n3"}, limit: 2})
	eventually(t, "generation 1 staged", func() bool { return store.State().Staged == 1 })
	ready(t, store, 1, "n1")
	for _, id := range []string{"n2", "n3"} {
		if _, err := store.Propose(context.Background(), &raftstore.ReportFailed{Generation: 1, NodeID: id,
			Errors: []string{"etag differs"}}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "generation 1 invalid", func() bool { return gen(t, store, 1).State == raftstore.GenerationInvalid })
	g := gen(t, store, 1)
	if len(g.LeaderErrors) != 1 || !strings.Contains(g.LeaderErrors[0], "n2, n3") || store.State().Active != 0 {
		t.Fatalf("generation 1 = %+v", g)
	}
}
