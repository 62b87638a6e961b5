package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/config"
)

// experimentAnswer is the part of a PolicyExperiment the tests read.
type experimentAnswer struct {
	Name            string `json:"name"`
	Etag            string `json:"etag"`
	Previewed       bool   `json:"previewed"`
	PreviewMetadata *struct {
		State     string `json:"state"`
		LogPrefix string `json:"logPrefix"`
	} `json:"previewMetadata"`
	Source struct {
		Kind       string `json:"kind"`
		Branch     string `json:"branch"`
		HeadCommit string `json:"headCommit"`
	} `json:"source"`
	Stats *statsAnswer `json:"stats"`
}

// statsAnswer is the part of an experiment's stats the tests read.
type statsAnswer struct {
	Evaluated   uint64 `json:"evaluated"`
	AllowToDeny uint64 `json:"allowToDeny"`
	DenyToAllow uint64 `json:"denyToAllow"`
	Nodes       []struct {
		Node        string `json:"node"`
		Evaluated   uint64 `json:"evaluated"`
		AllowToDeny uint64 `json:"allowToDeny"`
	} `json:"nodes"`
}

type operationAnswer struct {
	Name  string `json:"name"`
	Done  bool   `json:"done"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Response json.RawMessage `json:"response"`
}

// TestPreviewBranchExperiment: a branch becomes an ACTIVE experiment on
// every node, live decisions on both nodes are counted in the leader's
// merged stats (read on a follower), the preview log has the prefix and
// both etags, a stale commit is ABORTED and changes nothing, a good one
// makes the branch's policy live everywhere and a second one is 404.
func TestPreviewBranchExperiment(t *testing.T) {
	c := newTestCluster(t)
	c.start("n1", nil)
	c.start("n2", nil)
	all := []string{"n1", "n2"}
	c.allServe(1, all...)
	leader := c.leader(all...)
	f := followerOf(leader, all)

	r := c.repo
	r.srv.CreateBranch(r.work, "tighten")
	head := r.srv.Commit(r.work, map[string]string{"web/policy.toml": webPolicy(2)}, "v1 no longer allowed")
	r.srv.Push(r.work, "tighten")
	r.srv.Checkout(r.work, "main")
	c.reconcile(f)

	url := c.base(f) + "/v1/policies/web/experiments/branch-tighten"
	var exp experimentAnswer
	eventually(t, waitTimeout, "the branch experiment, ACTIVE, on every node", func() error {
		if code := call(t, http.MethodGet, url, "", &exp); code != 200 {
			return fmt.Errorf("HTTP %d", code)
		}
		if exp.PreviewMetadata == nil || exp.PreviewMetadata.State != "ACTIVE" || exp.Source.HeadCommit != head {
			return fmt.Errorf("experiment = %+v", exp)
		}
		for _, id := range all {
			if !c.nodes[id].preview.Previewing("web") {
				return fmt.Errorf("%s does not preview web yet", id)
			}
		}
		return nil
	})

	const perNode = 7
	for _, id := range all {
		for range perNode {
			if d, code, err := evaluate(c.base(id), "/v1", 0); err != nil || code != 200 || d.Decision != "ALLOW" {
				t.Fatalf("live /v1 on %s: %v %d %v", id, d, code, err)
			}
			if d, _, _ := evaluate(c.base(id), "/healthz", 0); d.Decision != "ALLOW" {
				t.Fatalf("live /healthz: %v", d)
			}
		}
	}
	eventually(t, waitTimeout, "merged stats on a follower", func() error {
		call(t, http.MethodGet, url, "", &exp)
		if exp.Stats == nil || exp.Stats.AllowToDeny != 2*perNode || exp.Stats.Evaluated != 4*perNode ||
			len(exp.Stats.Nodes) != 2 {
			return fmt.Errorf("stats = %+v", exp.Stats)
		}
		return nil
	})

	// Samples (copies of users' requests) only when asked for: the
	// authorization layer can then require a role for ?view=FULL.
	var basic, full struct{ Stats map[string]any }
	call(t, http.MethodGet, url, "", &basic)
	call(t, http.MethodGet, url+"?view=FULL", "", &full)
	if _, ok := basic.Stats["samples"]; ok {
		t.Errorf("a BASIC read holds samples: %v", basic.Stats)
	}
	if _, ok := full.Stats["samples"]; !ok {
		t.Errorf("a FULL read holds no samples: %v", full.Stats)
	}
	if code := call(t, http.MethodGet, url+"?view=EVERYTHING", "", nil); code != 400 {
		t.Errorf("?view=EVERYTHING: HTTP %d", code)
	}

	logData, err := os.ReadFile(filepath.Join(c.configs[f].Node.DataDir, "preview.log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(logData)), "\n")
	if len(lines) < perNode {
		t.Fatalf("preview.log has %d lines", len(lines))
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(fmt.Sprint(line["msg"]), "PolicyPreviewLog") || line["experiment_etag"] != exp.Etag ||
		line["live_etag"] == "" || line["experiment"] != "policies/web/experiments/branch-tighten" {
		t.Errorf("log line = %v", line)
	}

	// List with the filter.
	var list struct{ Experiments []experimentAnswer }
	call(t, http.MethodGet, c.base(f)+"/v1/policies/web/experiments?filter=preview_metadata.state%20%3D%20ACTIVE", "", &list)
	if len(list.Experiments) != 1 {
		t.Errorf("list = %+v", list)
	}

	// A stale etag is ABORTED and changes nothing; no etag is INVALID_ARGUMENT.
	var e struct{ Error struct{ Status string } }
	if code := call(t, http.MethodPost, url+":commit", `{"etag":"stale"}`, &e); code != 409 || e.Error.Status != "ABORTED" {
		t.Fatalf("stale commit: %d %+v", code, e)
	}
	if code := call(t, http.MethodPost, url+":commit", `{}`, &e); code != 400 || e.Error.Status != "INVALID_ARGUMENT" {
		t.Fatalf("commit without etag: %d %+v", code, e)
	}
	if err := serves(c.base(f), 1); err != nil {
		t.Fatal(err)
	}

	var op operationAnswer
	if code := call(t, http.MethodPost, url+":commit", fmt.Sprintf(`{"etag":%q}`, exp.Etag), &op); code != 200 {
		t.Fatalf("commit: %d %+v", code, op)
	}
	eventually(t, waitTimeout, "the commit operation done", func() error {
		call(t, http.MethodGet, c.base(f)+"/v1/"+op.Name, "", &op)
		if !op.Done {
			return fmt.Errorf("operation = %+v", op)
		}
		return nil
	})
	if op.Error != nil {
		t.Fatalf("commit failed: %+v", op.Error)
	}
	c.allServe(2, all...)
	for _, id := range all {
		if d, _, _ := evaluate(c.base(id), "/v1", 0); d.Decision != "DENY" {
			t.Errorf("%s: /v1 = %+v after the commit", id, d)
		}
	}
	if code := call(t, http.MethodPost, url+":commit", fmt.Sprintf(`{"etag":%q}`, exp.Etag), &e); code != 404 {
		t.Errorf("second commit: %d %+v", code, e)
	}
}

// TestPreviewAPIExperiment: create (forwarded from a follower), stop,
// start, update suspends and auto-starts, delete; operations are readable
// on every node.
func TestPreviewAPIExperiment(t *testing.T) {
	c := newTestCluster(t)
	c.start("n1", nil)
	c.start("n2", nil)
	all := []string{"n1", "n2"}
	c.allServe(1, all...)
	f := followerOf(c.leader(all...), all)
	base := c.base(f) + "/v1/policies/web/experiments"
	body := `{"policy":{"default_action":"deny","rules":[{"name":"h","priority":1,"action":"allow","match":"request.path == \"/healthz\""}]},"annotations":{"owner":"me"}}`
	var op operationAnswer
	if code := call(t, http.MethodPost, base+"?experimentId=mine", body, &op); code != 200 || !op.Done || op.Error != nil {
		t.Fatalf("create: %d %+v", code, op)
	}
	var got operationAnswer
	if code := call(t, http.MethodGet, c.base("n1")+"/v1/"+op.Name, "", &got); code != 200 || got.Name != op.Name {
		t.Fatalf("get operation: %d %+v", code, got)
	}
	var e struct{ Error struct{ Status string } }
	if code := call(t, http.MethodPost, base+"?experimentId=mine", body, &e); code != 409 || e.Error.Status != "ALREADY_EXISTS" {
		t.Errorf("create again: %d %+v", code, e)
	}
	bad := `{"policy":{"default_action":"deny","rules":[{"name":"x","priority":1,"action":"allow","match":"request.pth == \"/\""}]}}`
	if code := call(t, http.MethodPost, base+"?experimentId=bad", bad, &e); code != 400 {
		t.Errorf("create with a broken policy: %d %+v", code, e)
	}
	var exp experimentAnswer
	call(t, http.MethodGet, base+"/mine", "", &exp)
	if exp.PreviewMetadata == nil || exp.PreviewMetadata.State != "ACTIVE" || exp.Source.Kind != "api" {
		t.Fatalf("created = %+v", exp)
	}
	if code := call(t, http.MethodPost, base+"/mine:stopPreview", "{}", &op); code != 200 {
		t.Fatalf("stop: %d", code)
	}
	call(t, http.MethodGet, base+"/mine", "", &exp)
	if exp.PreviewMetadata.State != "SUSPENDED" {
		t.Errorf("after stop: %+v", exp.PreviewMetadata)
	}
	if code := call(t, http.MethodPost, base+"/mine:startPreview", "", &op); code != 200 {
		t.Fatalf("start: %d", code)
	}
	patch := `{"etag":"` + exp.Etag + `","policy":{"default_action":"allow"}}`
	if code := call(t, http.MethodPatch, base+"/mine", patch, &op); code != 200 || op.Error != nil {
		t.Fatalf("update: %d %+v", code, op)
	}
	if code := call(t, http.MethodPatch, base+"/mine", patch, &e); code != 409 {
		t.Errorf("update with a stale etag: %d %+v", code, e)
	}
	if code := call(t, http.MethodDelete, base+"/mine", "", &op); code != 200 {
		t.Fatalf("delete: %d", code)
	}
	if code := call(t, http.MethodGet, base+"/mine", "", &e); code != 404 {
		t.Errorf("get after delete: %d", code)
	}
}

// TestExperimentWritesAreOneLogEntry: an experiment and its operation are
// one raft entry, and so are a delete, the experiment it lets into preview
// under the cap and the delete's operation: a leader that stops between
// two entries can no longer leave an experiment without its operation, or
// a waiting experiment never previewed.
func TestExperimentWritesAreOneLogEntry(t *testing.T) {
	c := newTestCluster(t)
	m := c.start("n1", func(cfg *config.Config) { cfg.Preview.MaxExperimentsPerPolicy = 1 })
	c.allServe(1, "n1")
	base := c.base("n1") + "/v1/policies/web/experiments"
	entries := func(what string, do func()) {
		t.Helper()
		before := m.Store().State().LastIndex
		do()
		if n := m.Store().State().LastIndex - before; n != 1 {
			t.Errorf("%s took %d log entries, want 1", what, n)
		}
	}
	var op operationAnswer
	entries("create", func() {
		code := call(t, http.MethodPost, base+"?experimentId=first", `{"policy":{"default_action":"deny"}}`, &op)
		if code != 200 || op.Error != nil {
			t.Fatalf("create: %d %+v", code, op)
		}
	})
	r := c.repo
	r.srv.CreateBranch(r.work, "tighten")
	r.srv.Commit(r.work, map[string]string{"web/policy.toml": webPolicy(2)}, "tighten")
	r.srv.Push(r.work, "tighten")
	r.srv.Checkout(r.work, "main")
	c.reconcile("n1")
	var exp experimentAnswer
	eventually(t, waitTimeout, "the branch experiment, waiting under the cap", func() error {
		if code := call(t, http.MethodGet, base+"/branch-tighten", "", &exp); code != 200 || exp.Previewed {
			return fmt.Errorf("HTTP %d, %+v", code, exp)
		}
		return nil
	})
	entries("delete with rebalance", func() {
		if code := call(t, http.MethodDelete, base+"/first", "", &op); code != 200 || op.Error != nil {
			t.Fatalf("delete: %d %+v", code, op)
		}
	})
	if call(t, http.MethodGet, base+"/branch-tighten", "", &exp); !exp.Previewed {
		t.Error("the branch experiment not previewed once first was deleted")
	}
	if _, ok := m.Store().State().Operations[strings.TrimPrefix(op.Name, "operations/")]; !ok {
		t.Errorf("operation %s of the delete not stored", op.Name)
	}
}
