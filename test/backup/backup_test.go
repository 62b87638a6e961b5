// Package backup_test saves a snapshot of a running 3-node cluster with
// the real binary, destroys every data directory, restores them from the
// file and checks that the cluster serves the same generation, the same
// decisions and the same experiments (issue 25, deliverable 2).
package backup_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

const (
	adminToken = "backup-admin-token"
	expPolicy  = "edge-firewall"
	expURL     = "/v1/policies/" + expPolicy + "/experiments"
	samples    = 300 // traffic lines replayed against each policy
)

var policies = []string{"admin-api", "edge-firewall"}

func TestSaveDestroyRestoreServesTheSameState(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	files := harness.ExampleFiles(t)
	repo := harness.NewRepo(t, harness.RepoOptions{Files: files})
	c := harness.StartCluster(t, harness.ClusterOptions{Size: 3, Repo: repo, APIToken: adminToken})
	c.WaitConverged(c.Nodes, 1, harness.PromoteTimeout)
	// A second generation: a cluster rebuilt from git rather than
	// restored would number its generation 1 and stamp it anew.
	c.Repo.Push(map[string]string{"admin-api/policy.toml": files["admin-api/policy.toml"] + extraRule("backup-main")}, "deny /backup-main")
	c.Trigger()
	st := c.WaitConverged(c.Nodes, 2, harness.PromoteTimeout)
	addExperiment(t, c, files[expPolicy+"/policy.toml"])
	before := snapshotOf(t, c, c.Nodes[2], st.ActiveGeneration)

	dir := t.TempDir()
	file := filepath.Join(dir, "cluster.snapshot")
	follower := followerOf(t, c)
	out := cli(t, c.Bin, 0, "snapshot", "save", file, "--server", follower.Base(), "--token-env", harness.APITokenEnv)
	t.Logf("save via follower %s: %s", follower.ID, out)
	var h struct {
		ActiveGeneration uint64
		Experiments      int
		Servers          []struct{ ID string }
	}
	out = cli(t, c.Bin, 0, "snapshot", "inspect", file, "--format", "json")
	if err := json.Unmarshal([]byte(out), &h); err != nil || h.ActiveGeneration != st.ActiveGeneration ||
		h.Experiments != 1 || len(h.Servers) != 3 {
		t.Fatalf("inspect: %v, want generation %d, 1 experiment, 3 servers:\n%s", err, st.ActiveGeneration, out)
	}
	refusesBadFiles(t, c, file)

	// A running node's data directory is not overwritten without --force.
	out = cli(t, c.Bin, 1, append([]string{"snapshot", "restore", file}, restoreArgs(c, c.Nodes[0])...)...)
	if !strings.Contains(out, "not empty") {
		t.Fatalf("restore into a used data dir: %s", out)
	}

	for _, n := range c.Nodes {
		n.Kill()
	}
	for _, n := range c.Nodes {
		if err := os.RemoveAll(n.DataDir); err != nil {
			t.Fatal(err)
		}
		cli(t, c.Bin, 0, append([]string{"snapshot", "restore", file}, restoreArgs(c, n)...)...)
	}
	for _, n := range c.Nodes {
		c.Start(n)
	}
	for _, n := range c.Nodes {
		c.WaitReady(n)
	}
	after := snapshotOf(t, c, c.Nodes[0], st.ActiveGeneration)
	if !reflect.DeepEqual(before.Generation, after.Generation) || !reflect.DeepEqual(before.Etags, after.Etags) ||
		!reflect.DeepEqual(before.Experiments, after.Experiments) {
		t.Errorf("after restore: %+v %v %v\nbefore: %+v %v %v", after.Generation, after.Etags, after.Experiments,
			before.Generation, before.Etags, before.Experiments)
	}
	if len(before.Decisions) != len(after.Decisions) {
		t.Fatalf("%d decisions after restore, %d before", len(after.Decisions), len(before.Decisions))
	}
	for i := range before.Decisions {
		if before.Decisions[i] != after.Decisions[i] {
			t.Fatalf("decision %d after restore: %s, before: %s", i, after.Decisions[i], before.Decisions[i])
		}
	}
	c.WaitLeader(harness.LeaderTimeout)
}

// observed is what the test compares before and after the restore.
type observed struct {
	Generation  harness.Generation
	Etags       map[string]string
	Experiments []string // name and etag
	Decisions   []string // per node: policy, line, decision, rule, etag, generation
}

// snapshotOf reads what every node serves once all serve generation gen.
func snapshotOf(t *testing.T, c *harness.Cluster, via *harness.Node, gen uint64) observed {
	t.Helper()
	st := c.WaitConverged(c.Nodes, gen, harness.PromoteTimeout)
	g, err := c.Client.Generation(via, st.ActiveGeneration)
	if err != nil {
		t.Fatal(err)
	}
	o := observed{Generation: *g, Etags: st.Etags()}
	o.Experiments = experiments(t, c, via)
	lines := traffic(t)
	for _, n := range c.Nodes {
		for _, p := range policies {
			for i, l := range lines {
				d, err := c.Client.Evaluate(context.Background(), n, p, l)
				if err != nil {
					t.Fatalf("%s: %s line %d: %v", n.ID, p, i, err)
				}
				o.Decisions = append(o.Decisions, fmt.Sprintf("%s %s %d %s %s %s %d", n.ID, p, i, d.Decision, d.Rule, d.Etag, d.Generation))
			}
		}
	}
	return o
}

func experiments(t *testing.T, c *harness.Cluster, n *harness.Node) []string {
	t.Helper()
	var list struct {
		Experiments []harness.Experiment `json:"experiments"`
	}
	if code := c.Client.Fetch(t, http.MethodGet, n.Base()+expURL, "", &list); code != 200 {
		t.Fatalf("list experiments: HTTP %d", code)
	}
	var out []string
	for _, e := range list.Experiments {
		out = append(out, e.Name+" "+e.Etag+" "+e.Source.Kind+" "+e.Source.HeadCommit)
	}
	sort.Strings(out)
	return out
}

// addExperiment pushes a branch that adds a rule to expPolicy and waits
// until every node lists the experiment.
func addExperiment(t *testing.T, c *harness.Cluster, policy string) {
	t.Helper()
	srv, work := c.Repo.Git, c.Repo.Work
	srv.CreateBranch(work, "backup-rule")
	srv.Commit(work, map[string]string{expPolicy + "/policy.toml": policy + extraRule("backup-branch")}, "deny /backup-branch")
	srv.Push(work, "backup-rule")
	srv.Checkout(work, "main")
	c.Trigger()
	harness.WaitFor(t, harness.PromoteTimeout, "the experiment on every node", func() error {
		for _, n := range c.Nodes {
			if got := experiments(t, c, n); len(got) != 1 {
				return fmt.Errorf("%s lists %v", n.ID, got)
			}
		}
		return nil
	})
}

// extraRule is a rule that denies /name, which no sample requests.
func extraRule(name string) string {
	return fmt.Sprintf("\n[[rules]]\nname = %q\npriority = 1\naction = \"deny\"\nmatch = \"request.path == '/%s'\"\n", name, name)
}

func followerOf(t *testing.T, c *harness.Cluster) *harness.Node {
	t.Helper()
	leader := c.WaitLeader(harness.LeaderTimeout)
	return c.Others(leader)[0]
}

// restoreArgs restores n as itself, in a cluster of the same three.
func restoreArgs(c *harness.Cluster, n *harness.Node) []string {
	var peers []string
	for _, o := range c.Nodes {
		peers = append(peers, o.ID+"="+o.RaftAddr)
	}
	return []string{"--config", n.Config, "--peers", strings.Join(peers, ",")}
}

// refusesBadFiles: a truncated or altered copy is refused by inspect and
// by restore, which then writes nothing.
func refusesBadFiles(t *testing.T, c *harness.Cluster, file string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	altered := bytes.Clone(data)
	altered[len(altered)/2] ^= 1
	for name, bad := range map[string][]byte{"truncated": data[:len(data)*2/3], "altered": altered} {
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		out := cli(t, c.Bin, 1, "snapshot", "inspect", path)
		if !strings.Contains(out, map[string]string{"truncated": "truncated", "altered": "checksum mismatch"}[name]) {
			t.Errorf("inspect of the %s file: %s", name, out)
		}
		dataDir := filepath.Join(t.TempDir(), "data")
		cli(t, c.Bin, 1, "snapshot", "restore", path, "--data-dir", dataDir, "--node-id", "x", "--raft-addr", "127.0.0.1:1")
		if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
			t.Errorf("restore of the %s file wrote %s", name, dataDir)
		}
	}
}

// cli runs the binary with the admin token and wants exit code want.
func cli(t *testing.T, bin string, want int, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = harness.ChildEnv(harness.APITokenEnv + "=" + adminToken)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != want {
		t.Fatalf("reconciler %s: exit %d, want %d:\n%s", strings.Join(args, " "), code, want, out)
	}
	return string(out)
}

// traffic returns the first samples lines of the example traffic.
func traffic(t *testing.T) []string {
	return harness.ExampleTraffic(t)[:samples]
}
