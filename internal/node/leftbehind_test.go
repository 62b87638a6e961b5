package node

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/internal/policy"
)

// redefinesV1 is a fragment of policy web that defines rule v1 again:
// merge_default "override" takes it, "fail" refuses the policy.
const redefinesV1 = `[[rules]]
name = "v1"
priority = 2
action = "allow"
match = 'request.path == "/v1" || request.path == "/redefined"'
`

// TestNodeThatCannotLoadIsLeftBehind reproduces issue 17's generation 12:
// one member restarted with another [policy] merge_default (an existing
// member is not held PASSIVE) cannot compile a generation the others can.
// The generation is promoted without it instead of becoming INVALID for
// everyone; the node keeps answering from its generation, out of rotation
// with its error in /readyz and GET /v1/nodes/{id}, and rejoins rotation
// when it loads a later generation.
func TestNodeThatCannotLoadIsLeftBehind(t *testing.T) {
	c := newTestCluster(t)
	override := func(cfg *config.Config) { cfg.Policy.MergeDefault = policy.StrategyOverride }
	c.start("n1", override)
	c.allServe(1, "n1")
	c.start("n2", override)
	c.start("n3", override)
	all := []string{"n1", "n2", "n3"}
	c.allServe(1, all...)
	eventually(t, waitTimeout, "three registered nodes", func() error {
		if n := len(c.nodes["n1"].Store().State().Nodes); n != 3 {
			return fmt.Errorf("%d registered", n)
		}
		return nil
	})
	leader := c.leader(all...)
	bad := "n3"
	if leader == bad {
		bad = "n2"
	}
	good := slices.DeleteFunc(slices.Clone(all), func(id string) bool { return id == bad })

	c.stop(bad)
	c.configs[bad].Policy.MergeDefault = policy.StrategyFail
	c.run(bad)
	c.allServe(1, bad)

	c.repo.srv.Commit(c.repo.work, map[string]string{"web/zz-extra.toml": redefinesV1}, "redefine v1")
	c.repo.srv.Push(c.repo.work, "main")
	c.reconcile(leader)
	c.allServe(2, good...)
	g := generation(t, c.base(leader), 2, "ACTIVE")
	if slices.Contains(g.ReadyNodes, bad) || !strings.Contains(strings.Join(g.Errors, "\n"), "node "+bad+": web/zz-extra.toml") {
		t.Errorf("generation 2 = %+v: want it active without %s, with its error on record", g, bad)
	}
	if err := serves(c.base(bad), 1); err != nil {
		t.Errorf("the node left behind must keep answering from generation 1: %v", err)
	}
	// The node learns of the activation when it applies it: wait for that.
	eventually(t, waitTimeout, bad+" out of rotation", func() error {
		code, data, err := tryCall(http.MethodGet, c.base(bad)+"/readyz", "")
		if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(string(data), "which it cannot load") ||
			!strings.Contains(string(data), "already defined") {
			return fmt.Errorf("readyz of %s = %d %s %v", bad, code, data, err)
		}
		return nil
	})
	var n struct {
		LoadFailures []struct {
			Generation uint64   `json:"generation"`
			Errors     []string `json:"errors"`
		} `json:"loadFailures"`
	}
	call(t, http.MethodGet, c.base(good[0])+"/v1/nodes/"+bad, "", &n)
	if len(n.LoadFailures) != 1 || n.LoadFailures[0].Generation != 2 || !strings.Contains(n.LoadFailures[0].Errors[0], "already defined") {
		t.Errorf("GET /v1/nodes/%s loadFailures = %+v", bad, n.LoadFailures)
	}

	var hc struct {
		Nodes []struct {
			ID      string   `json:"id"`
			Healthy string   `json:"healthy"`
			Reasons []string `json:"reasons"`
		} `json:"nodes"`
	}
	call(t, http.MethodPost, c.base(leader)+"/v1/nodes:healthCheck", `{"name":"`+bad+`"}`, &hc)
	if len(hc.Nodes) != 1 || hc.Nodes[0].Healthy != "NOT_HEALTHY" || !strings.Contains(strings.Join(hc.Nodes[0].Reasons, ";"), "does not load here") {
		t.Errorf("health check of %s = %+v", bad, hc)
	}

	// A later generation it can load: it catches up and rejoins rotation.
	c.repo.srv.Commit(c.repo.work, map[string]string{"web/zz-extra.toml": gittest.Deleted}, "drop the redefinition")
	c.repo.srv.Push(c.repo.work, "main")
	c.reconcile(leader)
	c.allServe(3, all...)
	eventually(t, waitTimeout, bad+" back in rotation", func() error {
		code, data, err := tryCall(http.MethodGet, c.base(bad)+"/readyz", "")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("readyz %d %s", code, data)
		}
		return err
	})
	n.LoadFailures = nil
	call(t, http.MethodGet, c.base(leader)+"/v1/nodes/"+bad, "", &n)
	if n.LoadFailures != nil {
		t.Errorf("caught up, still shows %+v", n.LoadFailures)
	}
}
