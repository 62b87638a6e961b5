package node

import (
	"encoding/json"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/preview"
)

// A heartbeat's preview stats may carry fields this build does not know
// (a newer node's, as the series once were to older ones): the leader's
// merge and a node's adoption of it read them leniently, keeping the
// counts they know, so adding a field to preview.Stats needs no new raft
// command and no lock-step upgrade.
func TestPreviewStatsIgnoreUnknownFields(t *testing.T) {
	p := &previewRuntime{nodeID: "n1", log: hclog.NewNullLogger(),
		shadow: preview.New(preview.Config{Node: "n1", RecordRequests: -1})}
	future := `{"node":"n2","futureNodeField":1,"stats":[{"experiment":"policies/web/experiments/x",` +
		`"experimentEtag":"e1","evaluated":7,"allowToDeny":2,"futureStatsField":{"a":[1,2,3]},` +
		`"series":{"start":"2025-06-01T12:00:00Z","stepSeconds":60,"evaluated":[7],"changed":[2],"allowToDeny":[2],"denyToAllow":[0]}}]}`
	merged := p.Merge(map[string]json.RawMessage{"n2": json.RawMessage(future)})
	if merged == nil {
		t.Fatal("the leader dropped stats with an unknown field")
	}
	var withFuture []map[string]any
	if err := json.Unmarshal(merged, &withFuture); err != nil || len(withFuture) != 1 {
		t.Fatalf("merged %s: %v", merged, err)
	}
	withFuture[0]["futureMergedField"] = "x"
	again, _ := json.Marshal(withFuture)
	p.Adopt(again)
	got := p.Stats()
	if len(got) != 1 || got[0].Evaluated != 7 || got[0].AllowToDeny != 2 || got[0].Series == nil || got[0].Series.Evaluated[0] != 7 {
		t.Fatalf("adopted %+v from %s", got, again)
	}
}
