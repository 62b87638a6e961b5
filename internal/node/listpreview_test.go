package node

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// listPolicy denies the sources in the IP list "block".
const listPolicy = `default_action = "allow"

[[rules]]
name = "blocked"
priority = 1
action = "deny"
match = 'inIpList(request.source_ip, "block")'
`

// blockList is the "block" list with extra entries after the first.
func blockList(extra ...string) string {
	return "# test block list\n10.0.0.0/8\n" + strings.Join(extra, "\n") + "\n"
}

// evaluateFrom asks base for a live decision of web for a request from ip.
func evaluateFrom(t *testing.T, base, ip string) decision {
	t.Helper()
	var d decision
	if code := call(t, http.MethodPost, base+"/v1/policies/web:evaluate",
		fmt.Sprintf(`{"path":"/","source_ip":%q}`, ip), &d); code != 200 {
		t.Fatalf("evaluate from %s on %s: HTTP %d", ip, base, code)
	}
	return d
}

// TestBranchChangingAListIsPreviewedOnEveryNode: a branch that adds a
// CIDR to a list the live policy uses is an experiment that every node
// evaluates (the list data reaches the followers through the raft log),
// and what it would deny is counted on each of them.
func TestBranchChangingAListIsPreviewedOnEveryNode(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	r := c.repo
	r.srv.Commit(r.work, map[string]string{"web/policy.toml": listPolicy, "_lists/block.netset": blockList()}, "block list")
	r.srv.Push(r.work, "main")
	c.start("n1", nil)
	c.start("n2", nil)
	c.start("n3", nil)
	all := []string{"n1", "n2", "n3"}
	c.allServe(1, all...)
	leader := c.leader(all...)

	r.srv.CreateBranch(r.work, "more-blocks")
	r.srv.Commit(r.work, map[string]string{"_lists/block.netset": blockList("192.0.2.0/24", "2001:db8::/32")}, "block the docs ranges")
	r.srv.Push(r.work, "more-blocks")
	r.srv.Checkout(r.work, "main")
	c.reconcile(leader)

	url := c.base(followerOf(leader, all)) + "/v1/policies/web/experiments/branch-more-blocks"
	var exp experimentAnswer
	eventually(t, waitTimeout, "the list experiment ACTIVE", func() error {
		if code := call(t, http.MethodGet, url, "", &exp); code != 200 {
			return fmt.Errorf("HTTP %d", code)
		}
		if exp.PreviewMetadata == nil || exp.PreviewMetadata.State != "ACTIVE" {
			return fmt.Errorf("experiment = %+v", exp)
		}
		return nil
	})
	// Every node evaluates the experiment: a request it would deny is
	// counted by the node that served it.
	for _, id := range all {
		if d := evaluateFrom(t, c.base(id), "10.1.2.3"); d.Decision != "DENY" {
			t.Fatalf("%s: live decision %+v, want DENY", id, d)
		}
	}
	// Only requests the experiment denies from now on: each node must count
	// every one as allowToDeny, which it can only with the branch's list;
	// the three above are the only unchanged ones (when they came after
	// the node compiled the experiment).
	eventually(t, waitTimeout, "allowToDeny counted on every node", func() error {
		for _, id := range all {
			if d := evaluateFrom(t, c.base(id), "192.0.2.7"); d.Decision != "ALLOW" {
				t.Fatalf("%s: live decision %+v, want ALLOW", id, d)
			}
		}
		call(t, http.MethodGet, url, "", &exp)
		s := exp.Stats
		if s == nil || len(s.Nodes) != len(all) {
			return fmt.Errorf("stats = %+v", s)
		}
		for _, n := range s.Nodes {
			if n.Evaluated < 2 {
				return fmt.Errorf("node %s evaluated %d", n.Node, n.Evaluated)
			}
		}
		if s.Evaluated-s.AllowToDeny > uint64(len(all)) || s.AllowToDeny < 2*uint64(len(all)) {
			return fmt.Errorf("%d of %d evaluations allowToDeny: %+v", s.AllowToDeny, s.Evaluated, s)
		}
		return nil
	})
	var full struct {
		ListChanges []struct {
			Name           string
			Added, Removed int
		} `json:"listChanges"`
		ListChunks map[string]any `json:"listChunks"`
	}
	call(t, http.MethodGet, url, "", &full)
	if len(full.ListChanges) != 1 || full.ListChanges[0].Name != "block" || full.ListChanges[0].Added != 2 ||
		full.ListChanges[0].Removed != 0 || full.ListChunks != nil {
		t.Errorf("list changes %+v, chunks %v", full.ListChanges, full.ListChunks)
	}
}
