// Package nodes_test checks node management (ONAP's PDP states) with real
// processes: three `reconciler serve` nodes in group default and one in
// group edge, subgroup eu, following one git repository.
//
//	go test -count=1 ./test/nodes/
package nodes_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/test/harness"
)

var client = harness.NewClient(30*time.Second, 8)

// denied is a request edge-firewall denies: an embargoed country.
const denied = `{"method":"GET","path":"/","host":"shop.example.com","scheme":"https","headers":{"cf-ipcountry":"KP"},"source_ip":"198.18.10.46","time":"2025-05-31T12:10:27Z"}`

const embargo = "['CU', 'IR', 'KP', 'SY']"

type env struct {
	t     *testing.T
	c     *harness.Cluster
	git   *gittest.Server
	clone string
	files map[string]string
}

// start runs n1..n3 in group default and n4 in edge/eu.
func start(t *testing.T) *env { return startWith(t, nil) }

// startWith is start with each node's config completed by configure.
func startWith(t *testing.T, configure func(*harness.Config)) *env {
	e := newEnv(t, configure)
	e.c.StartAll()
	return e
}

// newEnv is startWith without starting the nodes.
func newEnv(t *testing.T, configure func(*harness.Config)) *env {
	srv := gittest.NewServer(t, gittest.Options{})
	files := harness.ExampleFiles(t)
	files["edge-only/policy.toml"] = edgeOnly
	srv.InitRepo("policies", files)
	c := harness.NewCluster(t, harness.ClusterOptions{
		Size: 4, Race: true,
		Configure: func(cfg *harness.Config) {
			cfg.GitURL, cfg.Poll = srv.URL("policies"), "@every 1h"
			cfg.Extra = edgeSubgroups
			if cfg.ID == "n4" {
				cfg.Group, cfg.Subgroup = "edge", "eu"
			}
			if configure != nil {
				configure(cfg)
			}
		},
	})
	return &env{t: t, c: c, git: srv, clone: srv.Clone(srv.URL("policies")), files: files}
}

func (e *env) node(id string) *harness.Node {
	for _, n := range e.c.Nodes {
		if n.ID == id {
			return n
		}
	}
	e.t.Fatalf("no node %s", id)
	return nil
}

// post sends body and decodes the JSON answer into out (when not nil),
// waiting out an election (DoRetry: these posts are idempotent).
func (e *env) post(n *harness.Node, path, body string, out any) int {
	e.t.Helper()
	code, data, err := client.DoRetry(http.MethodPost, n.Base()+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("POST %s: %v: %s", path, err, data)
		}
	}
	return code
}

// changeState posts a changeState to n1 (or whichever node is given) and
// returns the ids it changed.
func (e *env) changeState(via *harness.Node, body string) (int, []string) {
	e.t.Helper()
	var a apiv1.StateChangeList
	code := e.post(via, "/v1/nodes:changeState", body, &a)
	var ids []string
	for _, c := range a.Changed {
		ids = append(ids, c.ID)
	}
	return code, ids
}

func (e *env) nodeInfo(via *harness.Node, id string) (apiv1.Node, error) {
	var n apiv1.Node
	err := client.GetJSON(via.Base()+"/v1/nodes/"+id, &n)
	return n, err
}

// waitState waits until via shows node id in state.
func (e *env) waitState(via *harness.Node, id, state string) {
	e.t.Helper()
	err := harness.Eventually(30*time.Second, func() error {
		n, err := e.nodeInfo(via, id)
		if err == nil && n.State != state {
			err = fmt.Errorf("%s is %s", id, n.State)
		}
		return err
	})
	if err != nil {
		e.t.Fatalf("waiting for %s %s: %v", id, state, err)
	}
}

type decision struct {
	Decision          string `json:"decision"`
	Enforced          *bool  `json:"enforced"`
	EvaluatedDecision string `json:"evaluatedDecision"`
	Generation        uint64 `json:"generation"`
	Error             struct {
		Status string `json:"status"`
	} `json:"error"`
}

func (e *env) evaluate(n *harness.Node, body string) (int, decision) {
	e.t.Helper()
	var d decision
	code := e.post(n, "/v1/policies/edge-firewall:evaluate", body, &d)
	return code, d
}

func (e *env) readyz(n *harness.Node) int {
	code, _, err := client.Get(n.Base() + "/readyz")
	if err != nil {
		e.t.Fatal(err)
	}
	return code
}

// eventually waits until f holds, failing with what it last said.
func (e *env) eventually(what string, f func() error) {
	e.t.Helper()
	if err := harness.Eventually(30*time.Second, f); err != nil {
		e.t.Fatalf("waiting for %s: %v", what, err)
	}
}

func TestStateScopes(t *testing.T) {
	e := start(t)
	n1, n4 := e.node("n1"), e.node("n4")

	if code, ids := e.changeState(n1, `{"state":"PASSIVE","group":"edge"}`); code != 200 || strings.Join(ids, ",") != "n4" {
		t.Fatalf("group scope: %d %v", code, ids)
	}
	if code, ids := e.changeState(e.node("n2"), `{"state":"TEST","group":"edge","subgroup":"eu"}`); code != 200 || strings.Join(ids, ",") != "n4" {
		t.Fatalf("subgroup scope through a follower: %d %v", code, ids)
	}
	if code, ids := e.changeState(n1, `{"state":"SAFE","group":"default","subgroup":"default"}`); code != 200 || strings.Join(ids, ",") != "n1,n2,n3" {
		t.Fatalf("default subgroup: %d %v", code, ids)
	}
	if code, ids := e.changeState(n1, `{"state":"ACTIVE","name":"n2"}`); code != 200 || strings.Join(ids, ",") != "n2" {
		t.Fatalf("name scope: %d %v", code, ids)
	}
	var again apiv1.StateChangeList
	if code := e.post(n1, "/v1/nodes:changeState", `{"state":"ACTIVE","name":"n2"}`, &again); code != 200 ||
		len(again.Changed) != 0 || strings.Join(again.Unchanged, ",") != "n2" {
		t.Fatalf("repeat: %d %+v", code, again)
	}
	for body, want := range map[string]int{
		`{"state":"ACTIVE","group":"nowhere"}`:          404,
		`{"state":"ACTIVE","name":"n9"}`:                404,
		`{"state":"ACTIVE"}`:                            400,
		`{"state":"ACTIVE","name":"n2","group":"edge"}`: 400,
		`{"state":"BUSY","name":"n2"}`:                  400,
		`{"state":"ACTIVE","name":"n2","x":1}`:          400,
	} {
		if code, _ := e.changeState(n1, body); code != want {
			t.Errorf("%s: %d, want %d", body, code, want)
		}
	}
	e.waitState(n4, "n4", "TEST")
	e.waitState(n4, "n1", "SAFE")
}

func TestPassiveAndTest(t *testing.T) {
	e := start(t)
	n1, n4 := e.node("n1"), e.node("n3") // n4 serves group edge only
	if code, d := e.evaluate(n1, denied); code != 200 || d.Decision != "DENY" {
		t.Fatalf("the request must be denied to test TEST: %d %+v", code, d)
	}

	e.changeState(n1, `{"state":"PASSIVE","name":"n3"}`)
	e.eventually("n4 refuses decisions", func() error {
		if code, d := e.evaluate(n4, denied); code != 503 || d.Error.Status != "UNAVAILABLE" {
			return fmt.Errorf("evaluate %d %+v", code, d)
		}
		if code := e.readyz(n4); code != 503 {
			return fmt.Errorf("readyz %d", code)
		}
		return nil
	})
	if code := e.readyz(n1); code != 200 {
		t.Fatalf("n1 readyz %d", code)
	}

	e.changeState(n1, `{"state":"TEST","name":"n3"}`)
	e.eventually("n4 answers allow, not enforced", func() error {
		code, d := e.evaluate(n4, denied)
		if code != 200 || d.Decision != "ALLOW" || d.Enforced == nil || *d.Enforced || d.EvaluatedDecision != "DENY" {
			return fmt.Errorf("evaluate %d %+v", code, d)
		}
		return nil
	})
	code, _, err := client.Do(http.MethodGet, n4.Base()+"/v1/policies/edge-firewall:authorize/", "")
	if err != nil || code != 200 {
		t.Fatalf("authorize in TEST: %d %v", code, err)
	}
	if log, _ := os.ReadFile(n4.Log); !strings.Contains(string(log), "decision not enforced (node in TEST)") {
		t.Fatal("n4 did not log its unenforced decision")
	}
	if code := e.readyz(n4); code != 200 {
		t.Fatalf("TEST node readyz %d", code)
	}
	// The decisions show in n4's PDP_STATUS, as the leader shows it.
	e.eventually("n4's statistics on n1", func() error {
		var n struct {
			Status *struct {
				Version, State string
				Generation     uint64
				Etags          map[string]string
				Statistics     struct{ PolicyExecutedCount, PolicyDeploySuccessCount uint64 }
			}
		}
		err := client.GetJSON(n1.Base()+"/v1/nodes/n3", &n)
		if err == nil && (n.Status == nil || n.Status.State != "TEST" || n.Status.Statistics.PolicyExecutedCount < 2 ||
			n.Status.Statistics.PolicyDeploySuccessCount < 1 || n.Status.Etags["edge-firewall"] == "" || n.Status.Version == "") {
			err = fmt.Errorf("n4 status %+v", n.Status)
		}
		return err
	})
}

func TestSafeFreezesWhileOthersPromote(t *testing.T) {
	e := start(t)
	n1, n2 := e.node("n1"), e.node("n2")
	_, before := e.evaluate(n2, denied)
	e.changeState(n1, `{"state":"SAFE","name":"n2"}`)
	e.waitState(n2, "n2", "SAFE")

	changed := strings.Replace(e.files["edge-firewall/policy.toml"], embargo, "['CU', 'IR', 'KP', 'SY', 'BR']", 1)
	e.git.Commit(e.clone, map[string]string{"edge-firewall/policy.toml": changed}, "embargo BR")
	e.git.Push(e.clone, "main")
	e.post(n1, "/v1/cluster:reconcile", "{}", nil)

	var after uint64
	e.eventually("n1 and n3 serve the new generation", func() error {
		for _, n := range []*harness.Node{n1, e.node("n3")} {
			_, d := e.evaluate(n, denied)
			if d.Generation <= before.Generation {
				return fmt.Errorf("%s serves %d", n.ID, d.Generation)
			}
			after = d.Generation
		}
		return nil
	})
	if _, d := e.evaluate(n2, denied); d.Generation != before.Generation {
		t.Fatalf("SAFE n2 serves %d, want %d (active %d)", d.Generation, before.Generation, after)
	}
	e.changeState(n1, `{"state":"ACTIVE","name":"n2"}`)
	e.eventually("n2 catches up once ACTIVE", func() error {
		if _, d := e.evaluate(n2, denied); d.Generation != after {
			return fmt.Errorf("n2 serves %d", d.Generation)
		}
		return nil
	})
}

// edgeSubgroups declares edge's subgroups: a node joining in another one
// is held PASSIVE.
const edgeSubgroups = "[groups.edge]\nsubgroups = [\"eu\", \"us\"]"

// edgeOnly is a policy of group edge: only n4 serves it.
const edgeOnly = "group = \"edge\"\ndefault_action = \"allow\"\n[[rules]]\nname = \"no-x\"\npriority = 1\naction = \"deny\"\nmatch = 'request.method == \"X\"'\n"

// TestGroupsDecideWhatANodeServes: a policy of group edge is answered by
// the edge node only; the default group's policies by the others only.
func TestGroupsDecideWhatANodeServes(t *testing.T) {
	e := start(t)
	n1, n4 := e.node("n1"), e.node("n4")
	if code, _ := e.evaluate(n4, denied); code != 404 {
		t.Fatalf("edge node answered a default policy: %d", code)
	}
	if code := e.post(n4, "/v1/policies/edge-only:evaluate", `{"method":"GET"}`, nil); code != 200 {
		t.Fatalf("edge node: %d", code)
	}
	var d decision
	if code := e.post(n1, "/v1/policies/edge-only:evaluate", `{"method":"GET"}`, &d); code != 404 || d.Error.Status != "NOT_FOUND" {
		t.Fatalf("n1 answered an edge policy: %d %+v", code, d)
	}
	// n4 compiled only its group's policies: it lists only those, and
	// sends only their etags in its heartbeats.
	var list struct{ Policies []struct{ Name string } }
	if err := client.GetJSON(n4.Base()+"/v1/policies", &list); err != nil || len(list.Policies) != 1 ||
		list.Policies[0].Name != "policies/edge-only" {
		t.Fatalf("n4 holds %+v %v", list, err)
	}
	code, body, err := client.Get(n4.Base() + "/v1/policies/edge-firewall")
	if err != nil || code != 404 || !strings.Contains(string(body), `group \"default\"`) {
		t.Fatalf("GET edge-firewall on n4: %d %s %v", code, body, err)
	}
	e.eventually("n4's etags on n1", func() error {
		var n struct {
			Status *struct{ Etags map[string]string }
		}
		err := client.GetJSON(n1.Base()+"/v1/nodes/n4", &n)
		if err == nil && (n.Status == nil || len(n.Status.Etags) != 1 || n.Status.Etags["edge-only"] == "") {
			err = fmt.Errorf("n4 status %+v", n.Status)
		}
		return err
	})
}

func TestGroupChangeOnlyWhilePassive(t *testing.T) {
	e := start(t)
	n1, n4 := e.node("n1"), e.node("n4")
	path := filepath.Join(n4.Dir, "config.toml")
	cfg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	moved := strings.Replace(string(cfg), `subgroup = "eu"`, `subgroup = "us"`, 1)
	if err := os.WriteFile(path, []byte(moved), 0o644); err != nil {
		t.Fatal(err)
	}

	n4.Kill()
	if err := n4.StartRefused(e.c.Bin); err != nil {
		t.Fatal(err)
	}
	if err := n4.WaitExit(60 * time.Second); err != nil {
		t.Fatalf("an ACTIVE node moved to another subgroup started: %v", err)
	}
	if log, _ := os.ReadFile(n4.Log); !strings.Contains(string(log), "set it PASSIVE before moving it") {
		t.Fatalf("refusal not logged:\n%s", n4.Tail(20))
	}

	e.changeState(n1, `{"state":"PASSIVE","name":"n4"}`)
	if err := n4.Start(e.c.Bin); err != nil {
		t.Fatal(err)
	}
	e.eventually("n4 registered in edge/us", func() error {
		n, err := e.nodeInfo(n1, "n4")
		if err == nil && (n.Subgroup != "us" || n.State != "PASSIVE") {
			err = fmt.Errorf("n4 is %+v", n)
		}
		return err
	})
	if code, ids := e.changeState(n1, `{"state":"ACTIVE","group":"edge","subgroup":"us"}`); code != 200 || strings.Join(ids, ",") != "n4" {
		t.Fatalf("activate edge/us: %d %v", code, ids)
	}
	e.c.WaitReady(n4)
}

// TestTerminatedByAnAdmin: a node set TERMINATED stops serving and exits;
// started again, it rejoins as a new, ACTIVE member.
func TestTerminatedByAnAdmin(t *testing.T) {
	e := start(t)
	n1, n3 := e.node("n1"), e.node("n3")
	n3.ExpectExit()
	if code, ids := e.changeState(n1, `{"state":"TERMINATED","name":"n3"}`); code != 200 || strings.Join(ids, ",") != "n3" {
		t.Fatalf("terminate n3: %d %v", code, ids)
	}
	if err := n3.WaitExit(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	e.waitState(n1, "n3", "TERMINATED")
	if err := n3.Start(e.c.Bin); err != nil {
		t.Fatal(err)
	}
	e.c.WaitReady(n3)
	e.waitState(n1, "n3", "ACTIVE")
}

func TestTerminatedOnSIGTERM(t *testing.T) {
	e := start(t)
	n1, n3 := e.node("n1"), e.node("n3")
	if err := n3.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := n3.WaitExit(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	e.waitState(n1, "n3", "TERMINATED")
}

// TestGroupChangeRecompiles: n4 moved (while PASSIVE) from edge to the
// default group compiles the generation again for its new group: it then
// serves the default policies and no longer the edge one.
func TestGroupChangeRecompiles(t *testing.T) {
	e := start(t)
	n1, n4 := e.node("n1"), e.node("n4")
	e.changeState(n1, `{"state":"PASSIVE","name":"n4"}`)
	e.waitState(n4, "n4", "PASSIVE")
	path := filepath.Join(n4.Dir, "config.toml")
	cfg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	moved := strings.NewReplacer(`group = "edge"`, `group = "default"`, `subgroup = "eu"`, `subgroup = "default"`).Replace(string(cfg))
	if err := os.WriteFile(path, []byte(moved), 0o644); err != nil {
		t.Fatal(err)
	}
	n4.Kill()
	if err := n4.Start(e.c.Bin); err != nil {
		t.Fatal(err)
	}
	e.eventually("n4 registered in default", func() error {
		n, err := e.nodeInfo(n1, "n4")
		if err == nil && (n.Group != "default" || n.State != "PASSIVE") {
			err = fmt.Errorf("n4 is %+v", n)
		}
		return err
	})
	e.changeState(n1, `{"state":"ACTIVE","name":"n4"}`)
	e.eventually("n4 serves the default group", func() error {
		if code, d := e.evaluate(n4, denied); code != 200 || d.Decision != "DENY" {
			return fmt.Errorf("edge-firewall on n4: %d %+v", code, d)
		}
		return nil
	})
	if code := e.post(n4, "/v1/policies/edge-only:evaluate", `{"method":"GET"}`, nil); code != 404 {
		t.Fatalf("n4 still answers the edge policy: %d", code)
	}
}
