package node

import (
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// statusAnswer is the part of GET /v1/status the tests read.
type statusAnswer struct {
	NodeID           string `json:"nodeId"`
	Leader           string `json:"leader"`
	RaftState        string `json:"raftState"`
	ActiveGeneration uint64 `json:"activeGeneration"`
	Policies         []struct {
		Name       string `json:"name"`
		Etag       string `json:"etag"`
		Conditions []struct {
			Type       string `json:"type"`
			Status     string `json:"status"`
			NodeID     string `json:"nodeId"`
			Generation uint64 `json:"generation"`
			Message    string `json:"message"`
		} `json:"conditions"`
	} `json:"policies"`
	// Parts are the node's long-running parts by name.
	Parts map[string]struct {
		State   string `json:"state"`
		Message string `json:"message"`
	} `json:"parts"`
	Nodes []struct {
		ID         string `json:"id"`
		HTTPAddr   string `json:"httpAddr"`
		Voter      bool   `json:"voter"`
		Generation uint64 `json:"generation"`
		State      string `json:"state"`
	} `json:"nodes"`
}

// conditionTypes lists "Type(generation[,node])" of policy web.
func (s *statusAnswer) conditionTypes() []string {
	var out []string
	for _, p := range s.Policies {
		if p.Name != "policies/web" {
			continue
		}
		for _, c := range p.Conditions {
			out = append(out, fmt.Sprintf("%s(%d%s)", c.Type, c.Generation, strings.TrimSuffix(","+c.NodeID, ",")))
		}
	}
	return out
}

type generationAnswer struct {
	Generation   uint64            `json:"generation"`
	Commit       string            `json:"commit"`
	State        string            `json:"state"`
	ActivateTime string            `json:"activateTime"`
	ReadyNodes   []string          `json:"readyNodes"`
	Errors       []string          `json:"errors"`
	Etags        map[string]string `json:"etags"`
}

// generation reads GET /v1/generations/{n} from base once it exists.
func generation(t *testing.T, base string, n uint64, state string) generationAnswer {
	t.Helper()
	var g generationAnswer
	eventually(t, waitTimeout, fmt.Sprintf("generation %d %s", n, state), func() error {
		g = generationAnswer{}
		code, data, err := tryCall(http.MethodGet, fmt.Sprintf("%s/v1/generations/%d", base, n), "")
		if err != nil {
			return err
		}
		if code != 200 || !strings.Contains(string(data), `"state":"`+state+`"`) {
			return fmt.Errorf("HTTP %d: %s", code, data)
		}
		return jsonUnmarshal(data, &g)
	})
	return g
}

// servers returns "id=Voter|Nonvoter" of the raft configuration.
func servers(t *testing.T, m *Main) []string {
	t.Helper()
	ss, err := m.Store().Servers()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range ss {
		out = append(out, string(s.ID)+"="+map[bool]string{true: "Voter", false: "Nonvoter"}[s.Suffrage == raft.Voter])
	}
	slices.Sort(out)
	return out
}

// TestClusterPromotion runs three nodes (bootstrap + two joins), promotes
// by editing the shared directory, refuses an invalid tree and a tree
// whose policy tests fail while the old generation keeps serving, forwards
// writes from followers, answers pinned requests, refuses bad joins without
// damage, adds a non-voter and lets it leave.
func TestClusterPromotion(t *testing.T) {
	c := newTestCluster(t)
	c.start("n1", nil)
	c.allServe(1, "n1")
	c.start("n2", nil)
	c.start("n3", nil)
	all := []string{"n1", "n2", "n3"}
	c.allServe(1, all...)
	eventually(t, waitTimeout, "three registered voters", func() error {
		if got := servers(t, c.nodes["n1"]); !slices.Equal(got, []string{"n1=Voter", "n2=Voter", "n3=Voter"}) {
			return fmt.Errorf("servers %v", got)
		}
		if n := len(c.nodes["n2"].Store().State().Nodes); n != 3 {
			return fmt.Errorf("%d registered", n)
		}
		return nil
	})
	leader := c.leader(all...)

	t.Run("status", func(t *testing.T) { checkFollowerStatus(t, c, leader) })
	t.Run("promotion through a follower", func(t *testing.T) { checkPromotion(t, c, leader, all) })
	t.Run("invalid trees keep the active generation", func(t *testing.T) { checkInvalid(t, c, all) })
	t.Run("bad joins", func(t *testing.T) { checkBadJoins(t, c, all) })
	t.Run("non-voter joins and leaves", func(t *testing.T) { checkNonVoter(t, c, all) })
	t.Run("rollback through a follower", func(t *testing.T) { checkRollback(t, c, all) })
	t.Run("branches and pull errors on followers", func(t *testing.T) { checkBranchesAndPullErrors(t, c, all) })
}

func followerOf(leader string, ids []string) string {
	for _, id := range ids {
		if id != leader {
			return id
		}
	}
	return ""
}

func checkFollowerStatus(t *testing.T, c *testCluster, leader string) {
	f := followerOf(leader, c.ids())
	var s statusAnswer
	eventually(t, waitTimeout, "a complete status on "+f, func() error {
		s = statusAnswer{}
		call(t, http.MethodGet, c.base(f)+"/v1/status", "", &s)
		for _, n := range s.Nodes {
			if n.Generation != 1 {
				return fmt.Errorf("node %s serves %d", n.ID, n.Generation)
			}
		}
		if len(s.Nodes) != 3 {
			return fmt.Errorf("%d nodes", len(s.Nodes))
		}
		return nil
	})
	if s.NodeID != f || s.Leader != leader || s.RaftState != "Follower" || s.ActiveGeneration != 1 {
		t.Errorf("status = %+v", s)
	}
	if len(s.Policies) != 1 || s.Policies[0].Name != "policies/web" || s.Policies[0].Etag == "" {
		t.Fatalf("policies = %+v", s.Policies)
	}
	if types := s.conditionTypes(); !slices.Contains(types, "Active(1)") || !slices.Contains(types, "Valid(1)") {
		t.Errorf("conditions = %v", types)
	}
	// Each part reports itself: a follower serves, beats, and does not lead.
	p := s.Parts
	if p["loader"].State != "OK" || p["loader"].Message != "serving generation 1" || p["heartbeats"].State != "OK" ||
		p["preview"].State != "OK" || p["leader"].State != "STOPPED" {
		t.Errorf("follower parts = %+v", p)
	}
	var ls statusAnswer
	eventually(t, waitTimeout, "the leader's parts", func() error {
		ls = statusAnswer{}
		call(t, http.MethodGet, c.base(leader)+"/v1/status", "", &ls)
		if st := ls.Parts["leader"]; st.State != "OK" || !strings.HasPrefix(st.Message, "following main@sha1:") {
			return fmt.Errorf("leader part %+v", st)
		}
		return nil
	})
}

func checkPromotion(t *testing.T, c *testCluster, leader string, all []string) {
	f := followerOf(leader, all)
	head := c.write(webPolicy(2))
	c.reconcile(f)
	c.allServe(2, all...)
	g := generation(t, c.base(f), 2, "ACTIVE")
	if !slices.Equal(g.ReadyNodes, all) || g.ActivateTime == "" || g.Commit != head {
		t.Errorf("generation 2 = %+v", g)
	}
	for _, id := range all {
		d, _, err := evaluate(c.base(id), "/v2", 0)
		if err != nil || d.Rule != "v2" || d.Etag != g.Etags["web"] {
			t.Errorf("%s: %+v %v, want etag %s", id, d, err, g.Etags["web"])
		}
	}
	// Pinned: the active generation and the one before it.
	for gen, rule := range map[uint64]string{1: "v1", 2: "v2"} {
		d, code, err := evaluate(c.base(f), "/v"+fmt.Sprint(gen), gen)
		if err != nil || code != 200 || d.Rule != rule || d.Generation != gen {
			t.Errorf("pinned to %d: %d %+v %v", gen, code, d, err)
		}
	}
	if _, code, _ := evaluate(c.base(f), "/healthz", 9); code != http.StatusNotFound {
		t.Errorf("pinned to 9: %d", code)
	}
	if g1 := generation(t, c.base(leader), 1, "SUPERSEDED"); g1.ActivateTime == "" {
		t.Errorf("generation 1 = %+v", g1)
	}
	var list struct{ Generations []generationAnswer }
	call(t, http.MethodGet, c.base(f)+"/v1/generations", "", &list)
	if len(list.Generations) != 2 || list.Generations[0].Generation != 2 {
		t.Errorf("list = %+v", list)
	}
	// Reconciling an unchanged repository changes nothing.
	c.reconcile(f)
	c.reconcile(leader)
	if st := c.nodes[leader].Store().State(); st.Highest != 2 {
		t.Errorf("unchanged tree made generation %d", st.Highest)
	}
}

func checkInvalid(t *testing.T, c *testCluster, all []string) {
	c.write(brokenPolicy)
	c.reconcile(all[2])
	g := generation(t, c.base(all[1]), 3, "INVALID")
	if len(g.Errors) == 0 || !strings.Contains(g.Errors[0], "web/policy.toml") || !strings.Contains(g.Errors[0], "pth") {
		t.Errorf("generation 3 = %+v", g)
	}
	c.write(failingPolicy)
	c.reconcile(all[1])
	g = generation(t, c.base(all[0]), 4, "INVALID")
	if len(g.Errors) != 1 || !strings.Contains(g.Errors[0], `test "health is allowed"`) {
		t.Errorf("generation 4 = %+v", g)
	}
	for _, id := range all {
		if err := serves(c.base(id), 2); err != nil {
			t.Error(err)
		}
	}
	// A follower's view of the leader is up to a heartbeat old.
	eventually(t, waitTimeout, "Invalid(4) on a follower", func() error {
		var s statusAnswer
		call(t, http.MethodGet, c.base(all[2])+"/v1/status", "", &s)
		if types := s.conditionTypes(); !slices.Contains(types, "Invalid(4)") || !slices.Contains(types, "Active(2)") {
			return fmt.Errorf("conditions = %v", types)
		}
		return nil
	})
}

func checkBadJoins(t *testing.T, c *testCluster, all []string) {
	before := servers(t, c.nodes[all[0]])
	// A raft address nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	// n3 is a member at another raft address; its HTTP address answers TCP.
	for _, tc := range []struct {
		body, status, reason string
	}{
		{fmt.Sprintf(`{"id":"n3","raftAddr":%q,"httpAddr":"127.0.0.1:1","voter":true}`, c.nodes["n1"].Addr()),
			"ALREADY_EXISTS", "MEMBERSHIP_CONFLICT"},
		{fmt.Sprintf(`{"id":"n9","raftAddr":%q,"httpAddr":"127.0.0.1:1","voter":true}`, dead),
			"FAILED_PRECONDITION", "RAFT_UNREACHABLE"},
		{`{"id":"","raftAddr":"x","httpAddr":"y"}`, "INVALID_ARGUMENT", "BAD_CLUSTER_REQUEST"},
		{`{"id":"n9","bogus":1}`, "INVALID_ARGUMENT", ""},
	} {
		for _, id := range all { // through every node: followers forward
			var e struct {
				Error struct {
					Status  string
					Message string
					Details []struct{ Reason string }
				}
			}
			code := call(t, http.MethodPost, c.base(id)+"/v1/cluster:join", tc.body, &e)
			if code/100 != 4 || e.Error.Status != tc.status ||
				(tc.reason != "" && (len(e.Error.Details) != 1 || e.Error.Details[0].Reason != tc.reason)) {
				t.Errorf("join %s via %s = %d %+v", tc.body, id, code, e)
			}
		}
	}
	if after := servers(t, c.nodes[all[0]]); !slices.Equal(before, after) {
		t.Errorf("raft configuration changed: %v -> %v", before, after)
	}
	// A node started with a duplicate id stops with the refusal.
	dup := nodeConfig(t, "n2", c.repo.url)
	dup.Node.Join = []string{c.nodes["n3"].Addr()}
	m := &Main{Config: dup, Logger: testLogger(t).Named("dup")}
	if err := m.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := m.Wait(); err == nil || !strings.Contains(err.Error(), "join refused") || !strings.Contains(err.Error(), "n2") {
		t.Errorf("duplicate node stopped with %v", err)
	}
	if after := servers(t, c.nodes[all[0]]); !slices.Equal(before, after) {
		t.Errorf("raft configuration changed: %v -> %v", before, after)
	}
}

func checkNonVoter(t *testing.T, c *testCluster, all []string) {
	c.start("n4", func(cfg *config.Config) {
		cfg.Node.Voter = false
		cfg.Node.Join = []string{c.nodes["n2"].Addr()}
	})
	c.allServe(2, "n4")
	eventually(t, waitTimeout, "n4 a registered non-voter", func() error {
		got := servers(t, c.nodes["n1"])
		n, ok := c.nodes["n1"].Store().State().Nodes["n4"]
		if !slices.Contains(got, "n4=Nonvoter") || !ok || n.Voter {
			return fmt.Errorf("servers %v, registry %+v", got, n)
		}
		return nil
	})
	// The non-voter takes part in the next promotion.
	c.write(webPolicy(5))
	c.reconcile("n4")
	withN4 := append(slices.Clone(all), "n4")
	c.allServe(5, withN4...)
	// n4 among the Ready nodes, not all four: the leader does not wait for
	// a node it has not heard from within the reachability window (3
	// heartbeats), which a loaded machine delays now and then (once in 8
	// -race runs, n2's: "generation 5 ready on [n1 n3 n4]").
	if g := generation(t, c.base("n4"), 5, "ACTIVE"); !slices.Contains(g.ReadyNodes, "n4") || len(g.ReadyNodes) < 3 {
		t.Errorf("generation 5 ready on %v", g.ReadyNodes)
	}
	// It leaves through a follower; the leader removes it everywhere.
	if code := call(t, http.MethodPost, c.base("n3")+"/v1/cluster:leave", `{"id":"n4"}`, nil); code != 200 {
		t.Fatalf("leave = %d", code)
	}
	eventually(t, waitTimeout, "n4 gone", func() error {
		st := c.nodes["n2"].Store().State()
		if _, ok := st.Nodes["n4"]; ok || slices.Contains(servers(t, c.nodes["n1"]), "n4=Nonvoter") {
			return fmt.Errorf("still there: %v", slices.Sorted(maps.Keys(st.Nodes)))
		}
		return nil
	})
	c.stop("n4")
	var e map[string]any
	if code := call(t, http.MethodPost, c.base("n1")+"/v1/cluster:leave", `{"id":"n4"}`, &e); code != http.StatusNotFound {
		t.Errorf("second leave = %d %v", code, e)
	}
}

// TestClusterRestart: a stopped node stays a member; a node restarted
// alone serves its last generation at once, with no leader; the whole
// cluster restarted comes back with the same state and promotes again.
func TestClusterRestart(t *testing.T) {
	c := newTestCluster(t)
	all := []string{"n1", "n2", "n3"}
	c.start("n1", nil)
	c.allServe(1, "n1")
	c.start("n2", nil)
	c.start("n3", nil)
	c.allServe(1, all...)
	c.write(webPolicy(2))
	c.reconcile("n2")
	c.allServe(2, all...)
	want := c.nodes["n1"].Store().State()
	for _, id := range all {
		c.stop(id)
	}

	// n2 alone: one voter of three can elect nobody.
	m := c.run("n2")
	if cur := m.Generations().Current(); cur == nil || cur.Generation != 2 || m.Generations().Get(1) == nil {
		t.Fatalf("restarted alone: current %+v, previous kept %v", cur, m.Generations().Get(1) != nil)
	}
	base := c.base("n2")
	if code := call(t, http.MethodGet, base+"/readyz", "", nil); code != 200 {
		t.Errorf("readyz = %d", code)
	}
	if d, code, err := evaluate(base, "/v1", 1); err != nil || code != 200 || d.Rule != "v1" {
		t.Errorf("pinned to the previous generation: %d %+v %v", code, d, err)
	}
	var s statusAnswer
	call(t, http.MethodGet, base+"/v1/status", "", &s)
	if s.Leader != "" || s.RaftState == "Leader" || s.ActiveGeneration != 2 {
		t.Errorf("status alone = %+v", s)
	}

	c.run("n1")
	c.run("n3")
	leader := c.leader(all...)
	c.allServe(2, all...)
	got := c.nodes[leader].Store().State()
	if got.Active != want.Active || got.Previous != want.Previous || got.Highest != want.Highest ||
		!slices.Equal(slices.Sorted(maps.Keys(got.Nodes)), all) {
		t.Errorf("state after restart: active %d previous %d highest %d nodes %v", got.Active, got.Previous,
			got.Highest, slices.Sorted(maps.Keys(got.Nodes)))
	}
	// Every node rejoined at its new HTTP address.
	eventually(t, waitTimeout, "registry updated", func() error {
		nodes := c.nodes[leader].Store().State().Nodes
		for _, id := range all {
			if nodes[id].HTTPAddr != c.nodes[id].Addr() {
				return fmt.Errorf("%s registered at %s, listens on %s", id, nodes[id].HTTPAddr, c.nodes[id].Addr())
			}
		}
		return nil
	})
	c.write(webPolicy(3))
	c.reconcile(followerOf(leader, all))
	c.allServe(3, all...)
	if st := c.nodes["n3"].Store().State(); st.Generations[2].State != raftstore.GenerationRetired {
		t.Errorf("generation 2 is %s", st.Generations[2].State)
	}
}

// checkRollback: generation 5 is active and 2 the previous one (3 and 4
// are invalid). A rollback sent to a follower is forwarded to the leader,
// which pushes "Revert to generation 2 (…)" and waits until the normal
// path made it generation 6, ACTIVE everywhere.
func checkRollback(t *testing.T, c *testCluster, all []string) {
	leader := c.leader(all...)
	f := followerOf(leader, all)
	var res struct {
		TargetGeneration, Generation         uint64
		TargetCommit, Commit, Message, State string
	}
	if code := call(t, http.MethodPost, c.base(f)+"/v1/generations:rollback", `{}`, &res); code != 200 {
		t.Fatalf("rollback = %d %+v", code, res)
	}
	g2 := generation(t, c.base(f), 2, "SUPERSEDED")
	if res.TargetGeneration != 2 || res.TargetCommit != g2.Commit || res.Generation != 6 || res.State != "ACTIVE" ||
		res.Commit != c.repo.head() || res.Message != "Revert to generation 2 ("+g2.Commit+")" {
		t.Errorf("rollback = %+v", res)
	}
	c.allServe(6, all...)
	if d, _, err := evaluate(c.base(f), "/v2", 0); err != nil || d.Rule != "v2" {
		t.Errorf("after rollback: %+v %v", d, err)
	}
	for body, status := range map[string]string{
		`{"generation": 99}`:  "NOT_FOUND",
		`{"generation": 3}`:   "FAILED_PRECONDITION", // INVALID
		`{"generation": 6}`:   "FAILED_PRECONDITION", // what is served
		`{"generation": "x"}`: "INVALID_ARGUMENT",
	} {
		var e struct {
			Error struct{ Status, Message string }
		}
		call(t, http.MethodPost, c.base(f)+"/v1/generations:rollback", body, &e)
		if e.Error.Status != status {
			t.Errorf("rollback %s = %+v, want %s", body, e, status)
		}
	}
	c.repo.work = c.repo.srv.Clone(c.repo.url) // the user's clone is behind the revert now
}

// checkBranchesAndPullErrors: a branch shows as an experiment on every
// node; a repository that cannot be read shows as PullError on every
// node's policies, while decisions go on, and clears when it is back.
func checkBranchesAndPullErrors(t *testing.T, c *testCluster, all []string) {
	f := followerOf(c.leader(all...), all)
	r := c.repo
	r.srv.CreateBranch(r.work, "try-v7")
	r.srv.Commit(r.work, map[string]string{"web/policy.toml": webPolicy(7)}, "try v7")
	r.srv.Push(r.work, "try-v7")
	r.srv.Checkout(r.work, "main")
	c.reconcile(f)
	eventually(t, waitTimeout, "the branch on a follower", func() error {
		var s apiv1.Status
		call(t, http.MethodGet, c.base(f)+"/v1/status", "", &s)
		// The branch's AIP-236 experiment may be listed too, once made.
		for _, row := range s.Experiments {
			if b := row.Branch; b != nil && b.Name == "branches/try-v7" && fmt.Sprint(b.ChangedPolicies) == "[web]" {
				return nil
			}
		}
		return fmt.Errorf("no branch row for try-v7 in %d rows", len(s.Experiments))
	})
	moved := r.url + ".moved"
	if err := os.Rename(r.url, moved); err != nil {
		t.Fatal(err)
	}
	c.reconcile(f)
	eventually(t, waitTimeout, "PullError on a follower", func() error {
		var s statusAnswer
		call(t, http.MethodGet, c.base(f)+"/v1/status", "", &s)
		for _, p := range s.Policies {
			for _, cond := range p.Conditions {
				if cond.Type == "PullError" && cond.Message != "" {
					return nil
				}
			}
		}
		return fmt.Errorf("conditions = %v", s.conditionTypes())
	})
	if err := serves(c.base(f), 6); err != nil {
		t.Error(err)
	}
	if err := os.Rename(moved, r.url); err != nil {
		t.Fatal(err)
	}
	c.reconcile(f)
	eventually(t, waitTimeout, "PullError cleared", func() error {
		var s statusAnswer
		call(t, http.MethodGet, c.base(f)+"/v1/status", "", &s)
		if types := s.conditionTypes(); slices.ContainsFunc(types, func(s string) bool { return strings.HasPrefix(s, "PullError") }) {
			return fmt.Errorf("conditions = %v", types)
		}
		return nil
	})
}
