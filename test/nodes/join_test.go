package nodes_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/test/harness"
)

// addNode starts one more node joining n1, with its config completed by
// configure; it is killed at the end of the test.
func (e *env) addNode(id string, configure func(*harness.Config)) *harness.Node {
	e.t.Helper()
	addrs := harness.FreeAddrs(e.t, 2)
	dir := filepath.Join(e.t.TempDir(), id)
	n := &harness.Node{ID: id, HTTPAddr: addrs[0], RaftAddr: addrs[1], Dir: dir, Log: filepath.Join(dir, "node.log"),
		Env: harness.ChildEnv()}
	cfg := harness.Config{ID: id, DataDir: filepath.Join(dir, "data"), HTTPAddr: n.HTTPAddr, RaftAddr: n.RaftAddr,
		Join: []string{e.node("n1").HTTPAddr}, GitURL: e.git.URL("policies"), Poll: "@every 1h", Extra: edgeSubgroups}
	configure(&cfg)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(cfg.TOML()), 0o644); err != nil {
		e.t.Fatal(err)
	}
	n.Args = []string{"serve", "--config", path}
	if err := n.Start(e.c.Bin); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(n.Kill)
	return n
}

// TestInconsistentNodesJoinPassive: a node with another merge_default, a
// node of a group no policy names and a node of an undeclared subgroup
// join PASSIVE, each with its reason named, and the others keep promoting.
func TestInconsistentNodesJoinPassive(t *testing.T) {
	e := start(t)
	n1 := e.node("n1")
	e.addNode("n5", func(c *harness.Config) { c.Extra += "\n[policy]\nmerge_default = \"override\"" })
	e.addNode("n6", func(c *harness.Config) { c.Group = "nowhere" })
	e.addNode("n7", func(c *harness.Config) { c.Group, c.Subgroup = "edge", "ue" })
	for id, reason := range map[string]string{"n5": "policy.merge_default", "n6": `group "nowhere"`,
		"n7": `subgroup "ue" of group "edge"`} {
		e.waitState(n1, id, "PASSIVE")
		e.eventually(id+"'s reason named", func() error {
			var n struct{ HeldReasons []string }
			err := client.GetJSON(n1.Base()+"/v1/nodes/"+id, &n)
			if err == nil && !strings.Contains(strings.Join(n.HeldReasons, ";"), reason) {
				err = fmt.Errorf("heldReasons %v", n.HeldReasons)
			}
			return err
		})
	}

	_, before := e.evaluate(n1, denied)
	changed := strings.Replace(e.files["edge-firewall/policy.toml"], embargo, "['CU', 'IR', 'KP', 'SY', 'BR']", 1)
	e.git.Commit(e.clone, map[string]string{"edge-firewall/policy.toml": changed}, "embargo BR")
	e.git.Push(e.clone, "main")
	e.post(n1, "/v1/cluster:reconcile", "{}", nil)
	e.eventually("the others promote", func() error {
		for _, n := range []*harness.Node{n1, e.node("n2"), e.node("n3")} {
			if _, d := e.evaluate(n, denied); d.Generation <= before.Generation {
				return fmt.Errorf("%s serves %d", n.ID, d.Generation)
			}
		}
		return nil
	})
}
