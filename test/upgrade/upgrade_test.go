// Package upgrade_test upgrades a running cluster of real processes from
// the previous release (built from the repository's history, RELEASES) to
// this build, one node at a time, while commits keep being promoted:
//
//	go test -count=1 -v ./test/upgrade/
package upgrade_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/internal/version"
	"github.com/policyrollout/reconciler/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// previous is the release the cluster starts on.
const previous = "v1.0.0"

var client = harness.NewClient(30*time.Second, 8)

// TestRollingUpgrade starts three nodes of the previous release, then
// stops each in turn, commits while it is down, and starts this build on
// its data directory; before the last, it makes a node of this build lead
// the older ones and commits again. Every commit goes through the
// experiments API, so the leader completes a commit operation each time:
// the write the cluster version gates (raftstore PutOperation version 2,
// which the previous release refuses). It holds that every commit is
// promoted on every running node, that every node applied every operation
// write alike (a node that refused one would still show it running) and
// never logged a refusal, that the cluster version stays the previous
// release until the last node runs this build, and that the gated feature
// is on after that and used by a last commit.
func TestRollingUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release and starts processes")
	}
	began := time.Now()
	old := harness.ReleaseBinary(t, previous)
	cur := harness.Binary(t)
	built := time.Since(began)

	srv := gittest.NewServer(t, gittest.Options{})
	url := srv.InitRepo("policies", map[string]string{"README.md": "policies\n", "edge/policy.toml": edgePolicy(0)})
	c := harness.NewCluster(t, harness.ClusterOptions{Size: 3, Bin: old, Configure: func(cfg *harness.Config) {
		cfg.GitURL, cfg.Poll = url, "@every 1h"
	}})
	c.StartAll()
	u := &upgrade{t: t, c: c, srv: srv, upgraded: map[string]bool{}}
	u.commit(c.Nodes)

	for i, n := range c.Nodes {
		if err := n.Terminate(30 * time.Second); err != nil {
			t.Fatalf("stopping %s: %v", n.ID, err)
		}
		u.commit(c.Others(n)) // a quorum promotes without it
		c.Bin = cur
		c.Restart(n)
		u.upgraded[n.ID] = true
		if i < len(c.Nodes)-1 {
			u.commitUnderUpgradedLeader(old)
			u.checkAuthors(false) // the leader of this build left the history out
		} else {
			u.commit(c.Nodes)
		}
		want := version.Oldest
		if i == len(c.Nodes)-1 {
			want = version.Current
		}
		u.waitClusterVersion(want)
	}
	u.commit(c.Nodes)    // completed with a conditional write
	u.checkAuthors(true) // staged with its history (StageGeneration version 3)
	u.checkNoRefusals()
	t.Logf("rolling upgrade %s -> %s of 3 nodes with %d commits: %v (building %s: %v)",
		previous, version.Current, u.commits, time.Since(began).Round(time.Second), previous, built.Round(time.Second))
}

// commitUnderUpgradedLeader commits while a node of this build leads
// nodes of the previous release: then only the gate keeps the leader from
// writing what they refuse. A commit during which leadership moved to a
// node of the previous release proves nothing and is made again.
func (u *upgrade) commitUnderUpgradedLeader(old string) {
	u.t.Helper()
	for range 3 {
		leader := u.leadFromUpgraded(old)
		u.commit(u.c.Nodes)
		if u.leader(u.c.Nodes) == leader {
			return
		}
		u.t.Logf("leadership left %s during the commit; again", leader.ID)
	}
	u.t.Fatal("leadership left the nodes of this build during three commits")
}

// leadFromUpgraded restarts the leader, on the release it runs, until a
// node of this build leads, and returns it: there is no leadership
// transfer in the previous release, and each election is won by either
// remaining node.
func (u *upgrade) leadFromUpgraded(old string) *harness.Node {
	u.t.Helper()
	for try := 1; try <= 20; try++ {
		leader := u.leader(u.c.Nodes)
		if u.upgraded[leader.ID] {
			u.t.Logf("%s of this build leads after %d restarts of a leader of %s", leader.ID, try-1, previous)
			return leader
		}
		if err := leader.Terminate(30 * time.Second); err != nil {
			u.t.Fatalf("stopping %s: %v", leader.ID, err)
		}
		u.leader(u.c.Others(leader))
		if err := leader.Start(old); err != nil {
			u.t.Fatal(err)
		}
		u.c.WaitReady(leader)
	}
	u.t.Fatalf("no node of this build won 20 elections")
	return nil
}

// leader waits until nodes agree on a leader among them and returns it.
func (u *upgrade) leader(nodes []*harness.Node) *harness.Node {
	u.t.Helper()
	var leader *harness.Node
	u.eventually("a leader among "+harness.IDs(nodes), func() error {
		leader = nil
		for _, n := range nodes {
			st, err := client.Status(n)
			if err != nil {
				return err
			}
			l := u.c.Node(st.Leader)
			if l == nil || (leader != nil && l != leader) || !slices.Contains(nodes, l) {
				return fmt.Errorf("%s sees leader %q", n.ID, st.Leader)
			}
			leader = l
		}
		return nil
	})
	return leader
}

// upgrade is the cluster under upgrade and its repository.
type upgrade struct {
	t        *testing.T
	c        *harness.Cluster
	srv      *gittest.Server
	upgraded map[string]bool // nodes running this build
	commits  int
}

// edgePolicy is version k of the one policy, as an experiment sends it.
func edgePolicy(k int) string {
	return fmt.Sprintf(`default_action = "allow"
group = "default"

[[rules]]
name = "deny-blocked"
priority = 100
action = "deny"
match = "request.source_ip == '198.51.100.%d'"
`, k+1)
}

type operation struct {
	Name  string          `json:"name"`
	Done  bool            `json:"done"`
	Error json.RawMessage `json:"error"`
}

// commit creates an experiment changing the policy and commits it
// through nodes[0]; then every node of nodes must serve the new head, and
// every one must hold the completed operation as the leader wrote it.
func (u *upgrade) commit(nodes []*harness.Node) {
	u.t.Helper()
	u.commits++
	id := fmt.Sprintf("up-%d", u.commits)
	body := fmt.Sprintf(`{"policy":{"default_action":"allow","group":"default","on_error":"deny","rules":[{"name":"deny-blocked",`+
		`"priority":100,"action":"deny","match":"request.source_ip == '198.51.100.%d'"}]}}`, u.commits+1)
	u.wait(nodes[0], http.MethodPost, "/v1/policies/edge/experiments?experimentId="+id, body)
	var x struct{ Name, Etag string }
	if code := client.Fetch(u.t, http.MethodGet, nodes[0].Base()+"/v1/policies/edge/experiments/"+id, "", &x); code != 200 {
		u.t.Fatalf("experiment %s: %d", id, code)
	}
	op := u.wait(nodes[0], http.MethodPost, "/v1/"+x.Name+":commit", fmt.Sprintf(`{"etag":%q}`, x.Etag))
	head := u.srv.Head("policies", "main")
	u.eventually("every node serving "+head+" and holding "+op.Name+" done", func() error {
		return u.converged(nodes, head, op.Name)
	})
}

// wait sends a method answering an operation to n and waits until the
// operation is done without an error.
func (u *upgrade) wait(n *harness.Node, method, path, body string) operation {
	u.t.Helper()
	var op operation
	// 503 while the followers elect a leader after one stopped: the
	// request reached no leader, so sending it again is safe.
	var code int
	var answer []byte
	err := harness.Eventually(harness.LeaderTimeout, func() error {
		var err error
		code, answer, err = client.Do(method, n.Base()+path, body)
		if err == nil && code == http.StatusServiceUnavailable {
			return fmt.Errorf("%d %s", code, answer)
		}
		return nil
	})
	if err != nil || code != 200 || json.Unmarshal(answer, &op) != nil {
		u.t.Fatalf("%s %s on %s: %d %s %v", method, path, n.ID, code, answer, err)
	}
	u.eventually(op.Name+" done", func() error {
		if !op.Done {
			client.Fetch(u.t, http.MethodGet, n.Base()+"/v1/"+op.Name, "", &op)
		}
		if !op.Done {
			return fmt.Errorf("%s running", op.Name)
		}
		return nil
	})
	if len(op.Error) > 0 {
		u.t.Fatalf("%s %s: %s", method, path, op.Error)
	}
	return op
}

// converged checks once that every node serves the active generation, at
// the commit head, and holds operation name done, with the same document.
func (u *upgrade) converged(nodes []*harness.Node, head, name string) error {
	var first []byte
	for _, n := range nodes {
		var st struct {
			ActiveGeneration, ServedGeneration uint64
			Commit                             string
		}
		if err := client.GetJSON(n.Base()+"/v1/status", &st); err != nil {
			return err
		}
		if st.Commit != head || st.ServedGeneration != st.ActiveGeneration {
			return fmt.Errorf("%s: active %d at %s, serving %d", n.ID, st.ActiveGeneration, st.Commit, st.ServedGeneration)
		}
		code, doc, err := client.Get(n.Base() + "/v1/" + name)
		if err != nil || code != 200 {
			return fmt.Errorf("%s: %s: %d %v", n.ID, name, code, err)
		}
		var op operation
		if err := json.Unmarshal(doc, &op); err != nil || !op.Done {
			return fmt.Errorf("%s holds %s running: it did not apply the completion: %s", n.ID, name, doc)
		}
		if first == nil {
			first = doc
		} else if string(doc) != string(first) {
			return fmt.Errorf("%s holds %s as %s, another node as %s", n.ID, name, doc, first)
		}
	}
	return nil
}

// waitClusterVersion waits until every node running this build shows
// want as the cluster version, with the gated feature on exactly when
// want is this release.
func (u *upgrade) waitClusterVersion(want string) {
	u.t.Helper()
	u.eventually("cluster version "+want, func() error {
		for _, n := range u.c.Nodes {
			if !u.upgraded[n.ID] {
				continue // the previous release shows no cluster version
			}
			var st struct {
				ClusterVersion string
				Features       []struct {
					Name    string
					Enabled bool
				}
			}
			if err := client.GetJSON(n.Base()+"/v1/status", &st); err != nil {
				return err
			}
			if st.ClusterVersion != want || len(st.Features) == 0 {
				return fmt.Errorf("%s: cluster version %q, want %s", n.ID, st.ClusterVersion, want)
			}
			for _, f := range st.Features {
				if f.Enabled != (want == version.Current) {
					return fmt.Errorf("%s: at %s, %q enabled=%v", n.ID, want, f.Name, f.Enabled)
				}
			}
		}
		return nil
	})
}

// checkAuthors checks that every running node shows an author for the
// active generation exactly when want: a generation records it only once
// every member runs this build (the previous release refuses the field).
func (u *upgrade) checkAuthors(want bool) {
	u.t.Helper()
	for _, n := range u.c.Nodes {
		if !u.upgraded[n.ID] {
			continue // the previous release does not show it
		}
		var st struct {
			ActiveGeneration uint64
			Author           string
		}
		if err := client.GetJSON(n.Base()+"/v1/status", &st); err != nil {
			u.t.Fatal(err)
		}
		if (st.Author != "") != want {
			u.t.Errorf("%s: generation %d author %q, want one: %v", n.ID, st.ActiveGeneration, st.Author, want)
		}
	}
}

// checkNoRefusals fails the test if any node logged refusing an entry.
// (The previous release refused silently: converged catches that.)
func (u *upgrade) checkNoRefusals() {
	u.t.Helper()
	for _, n := range u.c.Nodes {
		if lines := n.LogLines("upgrade this node"); len(lines) > 0 {
			u.t.Errorf("%s refused entries:\n%s", n.ID, strings.Join(lines, "\n"))
		}
	}
}

func (u *upgrade) eventually(what string, cond func() error) {
	u.t.Helper()
	if err := harness.Eventually(2*harness.PromoteTimeout, cond); err != nil {
		u.t.Fatalf("timed out waiting for %s: %v", what, err)
	}
}
