package harness

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

// writeTree writes files under a new directory and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestTreesSayWhatExpectSays checks the fixtures with the CLI: every tree
// validates (its policy test passes), every request gets the decision and
// rule Expect gives, and the invalid tree is refused for its typo.
func TestTreesSayWhatExpectSays(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := Binary(t)
	for _, k := range []int{0, 1, 7} {
		dir := writeTree(t, Tree(k))
		if out, err := exec.Command(bin, "validate", dir).CombinedOutput(); err != nil {
			t.Fatalf("tree %d does not validate: %v\n%s", k, err, out)
		}
		// The probe, /admin, /public, the /g path tree k denies and one it allows.
		for _, i := range []int{0, 1, 2, 3 + k, 3 + (k+1)%ProbePaths} {
			path := RequestPaths[i]
			cmd := exec.Command(bin, "eval", "--policy", filepath.Join(dir, Policy), "--input", "-")
			cmd.Stdin = strings.NewReader(Requests[i])
			out, err := cmd.Output()
			var d Decision
			if err == nil {
				err = json.Unmarshal(out, &d)
			}
			wantDecision, wantRule := Expect(k, path)
			if err != nil || d.Decision != wantDecision || d.Rule != wantRule {
				t.Errorf("tree %d, %s: %s/%q (%v), Expect says %s/%q", k, path, d.Decision, d.Rule, err, wantDecision, wantRule)
			}
		}
		if got, ok := TreeOf(ProbeRule(k)); !ok || got != k {
			t.Errorf("TreeOf(%q) = %d, %v", ProbeRule(k), got, ok)
		}
	}
	bad := Tree(0)
	bad[Policy+"/policy.toml"] = InvalidWebPolicy
	out, err := exec.Command(bin, "validate", writeTree(t, bad)).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "pth") {
		t.Errorf("the invalid tree: %v\n%s", err, out)
	}
}

// TestClusterLifecycle drives a 3-node cluster through what the harness
// offers: promotion from the repository, SIGKILL of the leader and a new
// leader, a restart on the same data, SIGSTOP and SIGCONT of a follower
// across a promotion, and a graceful stop with exit status 0.
func TestClusterLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	c := StartCluster(t, ClusterOptions{Size: 3, Repo: NewRepo(t, RepoOptions{}), Race: true})
	c.WaitServing(0, nil, PromoteTimeout)
	c.Promote(1)
	gen := c.WaitServing(1, nil, PromoteTimeout)
	c.WaitActive(gen, PromoteTimeout)

	leader := c.Leader(LeaderTimeout)
	c.Kill(leader)
	if leader.Running() || leader.Pid() != 0 {
		t.Fatalf("%s still runs after Kill", leader.ID)
	}
	next := c.Leader(LeaderTimeout, c.Others(leader)...)
	if next == leader {
		t.Fatalf("%s, killed, is still the leader", leader.ID)
	}
	c.Restart(leader)
	if got := c.WaitServing(1, []*Node{leader}, PromoteTimeout); got != gen {
		t.Errorf("%s restarted serves generation %d, want %d", leader.ID, got, gen)
	}

	paused := c.Others(next)[0]
	c.Pause(paused)
	if ok, _ := paused.Healthy(); ok || !paused.Paused() {
		t.Errorf("%s paused but counted healthy (%v) or not paused (%v)", paused.ID, ok, paused.Paused())
	}
	if l := c.Leader(LeaderTimeout); l == paused { // the paused node is left out, not waited for
		t.Errorf("the paused %s is the leader", paused.ID)
	}
	c.Promote(2, next)
	c.Resume(paused)
	later := c.WaitServing(2, nil, PromoteTimeout)
	st := c.WaitConverged(c.Nodes, later, PromoteTimeout)
	if st.Etag(StablePolicy) == "" || st.Etag(Policy) == "" {
		t.Errorf("status shows no etags: %+v", st.Policies)
	}
	gens, err := c.Client.Generations(next)
	if err != nil || len(gens) == 0 {
		t.Fatalf("generations: %v %v", gens, err)
	}

	for _, n := range c.Nodes {
		if err := n.Terminate(30 * time.Second); err != nil {
			t.Errorf("graceful stop: %v", err)
		} else if err := n.ExitErr(); err != nil {
			t.Errorf("%s: after SIGTERM: %v, want exit status 0", n.ID, err)
		}
	}
}

func TestPercentiles(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if got, want := Percentiles(ds), "n=100 p50=51ms p90=91ms p99=100ms max=100ms"; got != want {
		t.Errorf("Percentiles = %q, want %q", got, want)
	}
	if got := Percentiles(nil); got != "no samples" {
		t.Errorf("Percentiles(nil) = %q", got)
	}
	if got := Quantile(nil, 0.5); got != 0 {
		t.Errorf("Quantile(nil) = %v", got)
	}
}
