package nodes_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/test/harness"
)

// pushEmbargoBR pushes a change of edge-firewall and asks n1 to reconcile.
func (e *env) pushEmbargoBR() {
	e.t.Helper()
	changed := strings.Replace(e.files["edge-firewall/policy.toml"], embargo, "['CU', 'IR', 'KP', 'SY', 'BR']", 1)
	e.git.Commit(e.clone, map[string]string{"edge-firewall/policy.toml": changed}, "embargo BR")
	e.git.Push(e.clone, "main")
	e.post(e.node("n1"), "/v1/cluster:reconcile", "{}", nil)
}

// servesAfter waits until every node given answers from a generation
// above before and returns it.
func (e *env) servesAfter(before uint64, nodes ...*harness.Node) uint64 {
	e.t.Helper()
	var after uint64
	e.eventually(harness.IDs(nodes)+" serve a generation after "+fmt.Sprint(before), func() error {
		for _, n := range nodes {
			code, d := e.evaluate(n, denied)
			if code != 200 || d.Generation <= before {
				return fmt.Errorf("%s answers %d from generation %d", n.ID, code, d.Generation)
			}
			after = d.Generation
		}
		return nil
	})
	return after
}

// TestPausedNodeIsLeftBehind: a node SIGSTOPped while a generation is
// staged still counts as reachable (heartbeat_timeout is long here), so
// only the staging timeout lets the others promote without it; the leader
// logs it, and once SIGCONT'd the node catches up and is ready again.
func TestPausedNodeIsLeftBehind(t *testing.T) {
	e := startWith(t, func(c *harness.Config) {
		c.NodeExtra = "staging_timeout = \"1s\"\nheartbeat_timeout = \"5m\"\n"
	})
	n1, n3 := e.node("n1"), e.node("n3")
	_, before := e.evaluate(n1, denied)
	e.c.Pause(n3)
	e.eventually("n3 stopped", func() error {
		if !n3.Stopped() {
			return fmt.Errorf("n3 still running")
		}
		return nil
	})
	e.pushEmbargoBR()
	after := e.servesAfter(before.Generation, n1, e.node("n2"))
	if !n3.Stopped() {
		t.Fatal("n3 was resumed before the others promoted: nothing was left behind")
	}
	// A paused node is late for the staging timeout and, as it applies
	// nothing, does not follow the log either (follow_timeout is capped
	// by staging_timeout): whichever rule the leader's sweep meets first
	// names it.
	e.eventually("the leader logs n3 left behind", func() error {
		for _, n := range e.c.Nodes {
			for _, why := range []string{"not Ready within the staging timeout", "node does not follow the raft log"} {
				for _, l := range n.LogLines(why) {
					if strings.Contains(l, `"n3"`) {
						return nil
					}
				}
			}
		}
		return fmt.Errorf("no node logged n3 left behind")
	})
	e.c.Resume(n3)
	if got := e.servesAfter(before.Generation, n3); got != after {
		t.Fatalf("n3 serves %d after SIGCONT, want %d", got, after)
	}
	e.eventually("n3 back in rotation", func() error {
		if code := e.readyz(n3); code != 200 {
			return fmt.Errorf("readyz %d", code)
		}
		return nil
	})
}

// redefinedEmbargo is a fragment of edge-firewall defining its embargo
// rule again: merge_default "override" takes it, "fail" refuses the policy.
const redefinedEmbargo = `[[rules]]
name = "deny-embargoed-countries"
priority = 1100
action = "deny"
match = '''
'cf-ipcountry' in request.headers &&
request.headers['cf-ipcountry'] in ['CU', 'IR', 'KP', 'SY', 'BY']
'''
`

// TestNodeThatCannotCompileIsLeftBehind is issue 17's generation 12 with
// real processes: a member restarted with another [policy] merge_default
// (a member keeps its state across restarts, it is not held PASSIVE)
// cannot compile a generation the others can. The others promote it, it is
// not INVALID; the node keeps answering from its generation, out of
// rotation with the compile error in /readyz and GET /v1/nodes/n3, and
// rejoins rotation when a later generation loads there.
func TestNodeThatCannotCompileIsLeftBehind(t *testing.T) {
	e := startWith(t, func(c *harness.Config) { c.Extra += "\n[policy]\nmerge_default = \"override\"" })
	n1, n3 := e.node("n1"), e.node("n3")
	if err := n3.Terminate(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(n3.Config)
	if err != nil {
		t.Fatal(err)
	}
	fail := strings.Replace(string(cfg), `merge_default = "override"`, `merge_default = "fail"`, 1)
	if err := os.WriteFile(n3.Config, []byte(fail), 0o644); err != nil {
		t.Fatal(err)
	}
	e.c.Restart(n3)
	e.waitState(n1, "n3", "ACTIVE")
	_, before := e.evaluate(n1, denied)

	e.git.Commit(e.clone, map[string]string{"edge-firewall/zz-embargo.toml": redefinedEmbargo}, "embargo BY")
	e.git.Push(e.clone, "main")
	e.post(n1, "/v1/cluster:reconcile", "{}", nil)
	after := e.servesAfter(before.Generation, n1, e.node("n2"))
	var g struct {
		State  string   `json:"state"`
		Errors []string `json:"errors"`
	}
	if err := client.GetJSON(fmt.Sprintf("%s/v1/generations/%d", n1.Base(), after), &g); err != nil ||
		g.State != "ACTIVE" || !strings.Contains(strings.Join(g.Errors, "\n"), "node n3: edge-firewall/zz-embargo.toml") {
		t.Fatalf("generation %d = %+v %v", after, g, err)
	}
	var logged []string
	for _, n := range e.c.Nodes {
		logged = append(logged, n.LogLines("cannot load the staged generation")...)
	}
	if len(logged) != 1 || !strings.Contains(logged[0], `"n3"`) || !strings.Contains(logged[0], "already defined") {
		t.Errorf("the leader logged the node it left behind %d times, want once with its error: %q", len(logged), logged)
	}
	if code, d := e.evaluate(n3, denied); code != 200 || d.Generation != before.Generation {
		t.Errorf("n3 answers %d from generation %d, want its generation %d", code, d.Generation, before.Generation)
	}
	e.eventually("n3 out of rotation, saying why", func() error {
		code, body, err := client.Get(n3.Base() + "/readyz")
		if err == nil && (code != 503 || !strings.Contains(string(body), "which it cannot load")) {
			err = fmt.Errorf("readyz %d %s", code, body)
		}
		return err
	})
	e.eventually("n3's load failure in GET /v1/nodes/n3", func() error {
		var n struct {
			LoadFailures []struct {
				Generation uint64   `json:"generation"`
				Errors     []string `json:"errors"`
			} `json:"loadFailures"`
		}
		err := client.GetJSON(n1.Base()+"/v1/nodes/n3", &n)
		if err == nil && (len(n.LoadFailures) != 1 || n.LoadFailures[0].Generation != after ||
			!strings.Contains(n.LoadFailures[0].Errors[0], "already defined")) {
			err = fmt.Errorf("loadFailures %+v", n.LoadFailures)
		}
		return err
	})

	e.git.Commit(e.clone, map[string]string{"edge-firewall/zz-embargo.toml": gittest.Deleted}, "back to one definition")
	e.git.Push(e.clone, "main")
	e.post(n1, "/v1/cluster:reconcile", "{}", nil)
	e.servesAfter(after, n1, e.node("n2"), n3)
	e.eventually("n3 back in rotation", func() error {
		if code := e.readyz(n3); code != 200 {
			return fmt.Errorf("readyz %d", code)
		}
		return nil
	})
}
