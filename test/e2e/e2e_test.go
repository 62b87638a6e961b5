package e2e

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// gitToken is what the git server requires and the nodes send.
const gitToken = "e2e-git-token-Zq81"

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: starts real processes; skipped by -short")
	}
}

// push kinds.
const (
	valid    = "valid"
	invalid  = "invalid"
	noPolicy = "no-policy"
)

type push struct {
	i      int
	kind   string
	commit string
}

// kindOf is the pattern of the 20 pushes: a commit touching no policy
// follows a valid one, an invalid one follows valid ones, the last is valid.
func kindOf(i int) string {
	switch i % 5 {
	case 2:
		return noPolicy
	case 4:
		return invalid
	}
	return valid
}

// TestPushesInARowAndRollback: 20 pushes to main in a row, some valid,
// some invalid, some touching no policy, with reconciles triggered after
// some of them and the 1 s poll for the others. Every valid push ends
// active on all nodes, in order, or is superseded by a newer one; every
// invalid one is reported INVALID and never served; pushes touching no
// policy make no generation. Then `reconciler rollback` restores earlier
// decisions, twice.
func TestPushesInARowAndRollback(t *testing.T) {
	skipShort(t)
	repo := harness.NewRepo(t, harness.RepoOptions{Token: gitToken})
	c := startCluster(t, repo, "@every 1s", "5s")
	mon := watch(c)
	var pushes []push
	for i := 1; i <= 20; i++ {
		p := push{i: i, kind: kindOf(i)}
		switch p.kind {
		case valid:
			p.commit = repo.Write(i)
		case invalid:
			p.commit = repo.WriteInvalid()
		case noPolicy:
			p.commit = repo.Push(map[string]string{"README.md": fmt.Sprintf("policies, edit %d\n", i)}, "docs")
		}
		pushes = append(pushes, p)
		if i%3 == 0 {
			trigger(t, c, c.Nodes[i%len(c.Nodes)])
		}
	}
	final := c.WaitServing(20, nil, time.Minute)
	answers := mon.stop()
	gens := checkGenerations(t, c, pushes, final)
	checkNeverServedInvalid(t, answers, gens)

	// Roll back to tree 18 through a follower, with the CLI.
	target := gens[pushes[17].commit]
	follower := c.Nodes[0]
	if follower == c.Leader(harness.LeaderTimeout) {
		follower = c.Nodes[1]
	}
	out := rollbackCLI(t, follower, "--to", fmt.Sprint(target.Generation))
	if !strings.Contains(out, "is ACTIVE") {
		t.Errorf("rollback said:\n%s", out)
	}
	back := c.WaitServing(18, nil, 30*time.Second)
	msg := repo.Git.Git(repo.Git.RepoPath(harness.RepoName), "log", "-1", "--format=%s", "main")
	if back <= final || msg != fmt.Sprintf("Revert to generation %d (%s)", target.Generation, target.Commit) {
		t.Errorf("after rollback: generation %d (was %d), main's head %q", back, final, msg)
	}
	// And back again: the default target is the generation before the active one.
	rollbackCLI(t, c.Leader(harness.LeaderTimeout))
	if again := c.WaitServing(20, nil, 30*time.Second); again <= back {
		t.Errorf("second rollback served from generation %d", again)
	}
}

// checkGenerations checks what every node reports about the pushes and
// returns the generations by commit.
func checkGenerations(t *testing.T, c *harness.Cluster, pushes []push, final uint64) map[string]harness.Generation {
	t.Helper()
	var byCommit map[string][]harness.Generation
	for _, n := range c.Nodes {
		got, err := generations(c, n)
		if err != nil {
			t.Fatal(err)
		}
		if byCommit == nil {
			byCommit = got
		} else if fmt.Sprint(summary(got)) != fmt.Sprint(summary(byCommit)) {
			t.Errorf("%s reports other generations:\n%v\n%v", n.ID, summary(got), summary(byCommit))
		}
	}
	out := map[string]harness.Generation{}
	var last uint64
	activeAfter := false // a later valid push was active
	for i := len(pushes) - 1; i >= 0; i-- {
		p := pushes[i]
		gs := byCommit[p.commit]
		switch {
		case p.kind == noPolicy && len(gs) > 0:
			t.Errorf("push %d touched no policy but made generation %d", p.i, gs[0].Generation)
		case p.kind == invalid && (len(gs) != 1 || gs[0].State != "INVALID" || !strings.Contains(strings.Join(gs[0].Errors, "\n"), "pth")):
			t.Errorf("invalid push %d: %+v", p.i, gs)
		case p.kind == valid && len(gs) == 0 && !activeAfter:
			t.Errorf("valid push %d made no generation and nothing newer was active", p.i)
		case p.kind == valid && len(gs) == 1:
			g := gs[0]
			if g.ActivateTime == "" && !activeAfter {
				t.Errorf("valid push %d: generation %d %s, never active, nothing newer active", p.i, g.Generation, g.State)
			}
			if g.ActivateTime != "" && !slices.Equal(g.ReadyNodes, []string{"n1", "n2", "n3"}) {
				t.Errorf("generation %d activated with ready nodes %v", g.Generation, g.ReadyNodes)
			}
			activeAfter = activeAfter || g.ActivateTime != ""
		}
		if len(gs) > 0 {
			if last != 0 && gs[0].Generation >= last {
				t.Errorf("push %d is generation %d, after a later push's %d: out of order", p.i, gs[0].Generation, last)
			}
			last = gs[0].Generation
			out[p.commit] = gs[0]
		}
	}
	if g := out[pushes[len(pushes)-1].commit]; g.Generation != final || g.State != "ACTIVE" {
		t.Errorf("the last push is generation %+v, served %d", g, final)
	}
	t.Logf("20 pushes made %d generations: %v", len(out), summary(byCommit))
	return out
}

func summary(byCommit map[string][]harness.Generation) []string {
	var s []string
	for _, gs := range byCommit {
		for _, g := range gs {
			s = append(s, fmt.Sprintf("%d:%s", g.Generation, g.State))
		}
	}
	slices.Sort(s)
	return s
}

// answer is one decision a node gave during the pushes.
type answer struct {
	node string
	gen  uint64
	rule string
}

type monitor struct {
	stopc chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	seen  []answer
	errs  []error
}

// watch asks every node for the probe decision continuously.
func watch(c *harness.Cluster) *monitor {
	m := &monitor{stopc: make(chan struct{})}
	for _, n := range c.Nodes {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			for {
				select {
				case <-m.stopc:
					return
				case <-time.After(5 * time.Millisecond):
				}
				d, err := c.Client.Probe(n)
				m.mu.Lock()
				if err != nil {
					m.errs = append(m.errs, err)
				} else {
					m.seen = append(m.seen, answer{n.ID, d.Generation, d.Rule})
				}
				m.mu.Unlock()
			}
		}()
	}
	return m
}

func (m *monitor) stop() *monitor {
	close(m.stopc)
	m.wg.Wait()
	return m
}

// checkNeverServedInvalid: no node answered from an invalid generation or
// with a rule of the invalid tree, no decision failed, and each node's
// generation never went down.
func checkNeverServedInvalid(t *testing.T, m *monitor, gens map[string]harness.Generation) {
	t.Helper()
	invalidGen := map[uint64]bool{}
	for _, g := range gens {
		if g.State == "INVALID" {
			invalidGen[g.Generation] = true
		}
	}
	for _, err := range m.errs {
		t.Errorf("a decision failed: %v", err)
	}
	last := map[string]uint64{}
	served := map[uint64]bool{}
	for _, a := range m.seen {
		if invalidGen[a.gen] || !strings.HasPrefix(a.rule, "probe-") {
			t.Errorf("%s answered %q from generation %d", a.node, a.rule, a.gen)
		}
		if a.gen < last[a.node] {
			t.Errorf("%s went back from generation %d to %d", a.node, last[a.node], a.gen)
		}
		last[a.node], served[a.gen] = a.gen, true
	}
	t.Logf("%d decisions during the pushes, from generations %v", len(m.seen), slices.Sorted(mapsKeys(served)))
}

func mapsKeys(m map[uint64]bool) func(func(uint64) bool) {
	return func(yield func(uint64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// rollbackCLI runs `reconciler rollback --server <n> args...` and returns
// its output; a failure fails the test.
func rollbackCLI(t *testing.T, n *harness.Node, args ...string) string {
	t.Helper()
	cmd := exec.Command(harness.Binary(t), append([]string{"rollback", "--server", n.HTTPAddr, "--wait", "30s"}, args...)...)
	cmd.Env = harness.ChildEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("reconciler rollback %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestRemoteDownOrSlow: the git server stopped, then answering slower than
// git.timeout. Every node shows PullError within the deadline plus a poll,
// the leader's goroutines do not pile up, decisions go on from the active
// generation, and everything recovers when the remote is back.
func TestRemoteDownOrSlow(t *testing.T) {
	skipShort(t)
	repo := harness.NewRepo(t, harness.RepoOptions{Token: gitToken})
	c := startCluster(t, repo, "@every 1s", "1s")
	gen := c.WaitServing(0, nil, time.Minute)
	leader := c.Leader(harness.LeaderTimeout)
	k := 0
	for _, tc := range []struct {
		name, reason string
		fail, heal   func()
	}{
		{"stopped", "network", repo.Git.Down, repo.Git.Up},
		{"slow", "timeout", func() { repo.Git.Slow(3 * time.Second) }, func() { repo.Git.Slow(0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, err := c.Client.Metric(leader, "go_goroutines")
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			tc.fail()
			for _, n := range c.Nodes {
				harness.WaitFor(t, 20*time.Second, n.ID+" shows PullError", func() error {
					s, err := c.Client.Status(n)
					if err == nil && !strings.Contains(pullError(s), tc.reason) {
						err = fmt.Errorf("PullError %q, source %+v", pullError(s), s.Source)
					}
					return err
				})
			}
			t.Logf("%s: PullError on every node %v after the remote broke (git.timeout 1s, poll 1s)",
				tc.name, time.Since(start).Round(10*time.Millisecond))
			time.Sleep(5 * time.Second) // five more failing polls
			after, _ := c.Client.Metric(leader, "go_goroutines")
			t.Logf("%s: leader goroutines %v before, %v after 5 s of failing polls", tc.name, before, after)
			if after > before+20 {
				t.Errorf("goroutines grew from %v to %v", before, after)
			}
			if got, err := c.ServingTree(k, c.Nodes); err != nil || got != gen {
				t.Errorf("decisions during the outage: generation %d, %v", got, err)
			}
			tc.heal()
			k++
			repo.Write(k)
			gen = c.WaitServing(k, nil, 30*time.Second)
			for _, n := range c.Nodes {
				harness.WaitFor(t, 10*time.Second, n.ID+" clears PullError", func() error {
					s, err := c.Client.Status(n)
					if err == nil && pullError(s) != "" {
						err = fmt.Errorf("still %q", pullError(s))
					}
					return err
				})
			}
		})
	}
}
