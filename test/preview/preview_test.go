// Package preview_test runs the AIP-236 preview end to end with real
// processes: a 3-node cluster of `reconciler serve` following a git
// repository seeded from policies.example, a branch that tightens
// edge-firewall, the sample traffic sent to every node, and the branch's
// experiment checked against `reconciler replay` on the same files; then
// commit with a stale and with the right etag.
//
//	go test -count=1 ./test/preview/
//	RECONCILER_PREVIEW_BENCH=1 go test -count=1 -run TestPreviewOverhead -v ./test/preview/
package preview_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// startCluster starts n nodes following repo with auto-started previews;
// extra is more of the [preview] section.
func startCluster(t testing.TB, repo *harness.Repo, extra string, n int) *harness.Cluster {
	t.Helper()
	return harness.StartCluster(t, harness.ClusterOptions{
		Size:      n,
		Repo:      repo,
		Extra:     "[preview]\nauto_start = true\n" + extra,
		Configure: func(cfg *harness.Config) { cfg.Poll = "@every 1h" },
	})
}

// client is shared by the concurrent senders.
var client = harness.NewClient(30*time.Second, 64)

func do(method, url, body string) (int, []byte, error) { return client.Do(method, url, body) }

// exampleFiles reads policies.example (without the traffic) as repository
// files.
func exampleFiles(t testing.TB) map[string]string { return harness.ExampleFiles(t) }

// tighten adds BR and IN to the embargoed countries of edge-firewall.
func tighten(t testing.TB, policyTOML string) string {
	old := "['CU', 'IR', 'KP', 'SY']"
	if !strings.Contains(policyTOML, old) {
		t.Fatalf("edge-firewall no longer has %s", old)
	}
	return strings.Replace(policyTOML, old, "['CU', 'IR', 'KP', 'SY', 'BR', 'IN']", 1)
}

func trafficLines(t testing.TB) []string { return harness.ExampleTraffic(t) }

// send posts every line to p's :evaluate with some concurrency.
func send(t testing.TB, p *harness.Node, policy string, lines []string, workers int) {
	t.Helper()
	ch := make(chan string)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l := range ch {
				code, body, err := do(http.MethodPost, p.Base()+"/v1/policies/"+policy+":evaluate", l)
				if err == nil && code != 200 {
					err = fmt.Errorf("HTTP %d: %s", code, body)
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for _, l := range lines {
		ch <- l
	}
	close(ch)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// replayExpected runs `reconciler replay --format json` on the same files.
func replayExpected(t testing.TB, files map[string]string, tightened string) harness.Counts {
	t.Helper()
	root := t.TempDir()
	live, exp := filepath.Join(root, "live"), filepath.Join(root, "exp")
	for _, dir := range []string{live, exp} {
		for p, content := range files {
			if p == "edge-firewall/policy.toml" && dir == exp {
				content = tightened
			}
			full := filepath.Join(dir, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd := exec.Command(harness.Binary(t), "replay", "--live", filepath.Join(live, "edge-firewall"),
		"--experiment", filepath.Join(exp, "edge-firewall"),
		"--traffic", filepath.Join(harness.ModuleRoot(), "policies.example", "_traffic", "sample.jsonl"), "--format", "json")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	var res []struct {
		Stats harness.Counts `json:"stats"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res) != 1 {
		t.Fatalf("replay output: %v %s", err, out)
	}
	return res[0].Stats
}

func TestMain(m *testing.M) { harness.Main(m) }

func TestPreviewEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	files := exampleFiles(t)
	tightened := tighten(t, files["edge-firewall/policy.toml"])
	want := replayExpected(t, files, tightened)
	if want.AllowToDeny == 0 {
		t.Fatalf("the tightened rule changes nothing in the sample traffic: %+v", want)
	}

	repo := harness.NewRepo(t, harness.RepoOptions{Files: files})
	srv, work := repo.Git, repo.Work
	c := startCluster(t, repo, "queue_size = 100000\nrecord_requests = 0", 3)
	n1 := c.Nodes[0]

	srv.CreateBranch(work, "tighten-geo")
	head := srv.Commit(work, map[string]string{"edge-firewall/policy.toml": tightened}, "block BR and IN")
	srv.Push(work, "tighten-geo")
	srv.Checkout(work, "main")
	client.Fetch(t, http.MethodPost, c.Nodes[1].Base()+"/v1/cluster:reconcile", "{}", nil)

	expURL := "/v1/policies/edge-firewall/experiments/branch-tighten-geo"
	var exp harness.Experiment
	harness.WaitFor(t, 30*time.Second, "the branch experiment ACTIVE", func() error {
		code := client.Fetch(t, http.MethodGet, n1.Base()+expURL, "", &exp)
		if code != 200 || exp.PreviewMetadata.State != "ACTIVE" {
			return fmt.Errorf("HTTP %d %+v", code, exp)
		}
		return nil
	})
	// Every node installs experiments within its poll interval (200ms)
	// after applying; the stats heartbeat shows a node's cell once it has
	// one. Wait for all three to report the version with zero counts.
	harness.WaitFor(t, 30*time.Second, "every node previewing", func() error {
		client.Fetch(t, http.MethodGet, n1.Base()+expURL, "", &exp)
		if exp.Stats == nil || len(exp.Stats.Nodes) != 3 {
			return fmt.Errorf("stats = %+v", exp.Stats)
		}
		return nil
	})

	lines := trafficLines(t)
	start := time.Now()
	var wg sync.WaitGroup
	for _, p := range c.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); send(t, p, "edge-firewall", lines, 8) }()
	}
	wg.Wait()
	t.Logf("sent %d requests to each of 3 nodes in %v", len(lines), time.Since(start).Round(time.Millisecond))

	for _, p := range c.Nodes { // stats read on every node agree
		harness.WaitFor(t, 30*time.Second, "merged stats on "+p.ID, func() error {
			client.Fetch(t, http.MethodGet, p.Base()+expURL, "", &exp)
			s := exp.Stats
			if s == nil || s.Evaluated != 3*uint64(len(lines)) || s.AllowToDeny != 3*want.AllowToDeny ||
				s.DenyToAllow != 3*want.DenyToAllow || s.RuleChanged != 3*want.RuleChanged || s.Dropped != 0 {
				return fmt.Errorf("stats = %+v, want 3 x %+v", s, want)
			}
			return nil
		})
	}
	t.Logf("experiment stats (3 nodes): allowToDeny=%d denyToAllow=%d ruleChanged=%d (replay: %d/%d/%d per node)",
		exp.Stats.AllowToDeny, exp.Stats.DenyToAllow, exp.Stats.RuleChanged, want.AllowToDeny, want.DenyToAllow, want.RuleChanged)

	// The preview log of every node: prefix, both etags, the redacted request.
	for _, p := range c.Nodes {
		data, err := os.ReadFile(filepath.Join(p.Dir, "data", "preview.log"))
		if err != nil {
			t.Fatal(err)
		}
		changed := 0
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var line map[string]any
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatalf("%s: bad log line %q", p.ID, l)
			}
			if !strings.HasPrefix(fmt.Sprint(line["msg"]), "PolicyPreviewLog") || line["experiment_etag"] != exp.Etag ||
				line["live_etag"] == "" || line["live_etag"] == nil {
				t.Fatalf("%s: log line %v", p.ID, line)
			}
			if line["changed"] == true {
				changed++
			}
		}
		if wantChanged := int(want.AllowToDeny + want.DenyToAllow + want.RuleChanged); changed != wantChanged {
			t.Errorf("%s logged %d changed decisions, want %d", p.ID, changed, wantChanged)
		}
	}

	// Commit with a stale etag: ABORTED, nothing changes.
	var probe harness.Decision
	client.Fetch(t, http.MethodPost, n1.Base()+"/v1/policies/edge-firewall:evaluate", lines[0], &probe)
	liveEtag, gen := probe.Etag, probe.Generation
	var e harness.ErrorBody
	if code := client.Fetch(t, http.MethodPost, c.Nodes[2].Base()+expURL+":commit", `{"etag":"0000"}`, &e); code != 409 || e.Error.Status != "ABORTED" {
		t.Fatalf("stale commit: %d %+v", code, e)
	}
	if code := client.Fetch(t, http.MethodPost, c.Nodes[2].Base()+expURL+":commit",
		fmt.Sprintf(`{"etag":%q,"parentEtag":"0000"}`, exp.Etag), &e); code != 409 || e.Error.Status != "ABORTED" {
		t.Fatalf("stale parentEtag: %d %+v", code, e)
	}
	if h := repo.Head(); h == head {
		t.Fatal("main moved to the branch")
	}
	if code := client.Fetch(t, http.MethodGet, n1.Base()+expURL, "", &exp); code != 200 || exp.PreviewMetadata.State != "ACTIVE" {
		t.Fatalf("after failed commits: %d %+v", code, exp)
	}

	// Commit with the right etags, from a follower.
	var op harness.Operation
	if code := client.Fetch(t, http.MethodPost, c.Nodes[2].Base()+expURL+":commit",
		fmt.Sprintf(`{"etag":%q,"parentEtag":%q}`, exp.Etag, liveEtag), &op); code != 200 {
		t.Fatalf("commit: %d %+v", code, op)
	}
	harness.WaitFor(t, 60*time.Second, "the commit operation", func() error {
		client.Fetch(t, http.MethodGet, c.Nodes[1].Base()+"/v1/"+op.Name, "", &op)
		if !op.Done {
			return fmt.Errorf("%+v", op)
		}
		return nil
	})
	if op.Error != nil {
		t.Fatalf("commit failed: %+v", op.Error)
	}
	for _, p := range c.Nodes {
		client.Fetch(t, http.MethodPost, p.Base()+"/v1/policies/edge-firewall:evaluate", lines[0], &probe)
		if probe.Etag != exp.Etag || probe.Generation <= gen {
			t.Errorf("%s serves %+v after the commit, want etag %s", p.ID, probe, exp.Etag)
		}
		if code := client.Fetch(t, http.MethodGet, p.Base()+expURL, "", &e); code != 404 {
			t.Errorf("%s: experiment still there: %d", p.ID, code)
		}
	}
	if code := client.Fetch(t, http.MethodPost, n1.Base()+expURL+":commit", fmt.Sprintf(`{"etag":%q}`, exp.Etag), &e); code != 404 {
		t.Errorf("second commit: %d %+v", code, e)
	}
}
