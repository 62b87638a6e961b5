package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// TestNginx runs one cluster of three nodes behind a real nginx configured
// as docs/gateways.md says, and checks what a client of nginx sees.
func TestNginx(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	e := startEnv(t, 3)
	t.Run("allowed requests reach the backend", e.testAllowed)
	t.Run("denied requests get 403 with the policy headers", e.testDenied)
	t.Run("escaped slashes never reach the backend", e.testEscapedSlashes)
	t.Run("client address from the trusted proxy only", e.testClientAddress)
	t.Run("an unknown policy is a 403, not a 500", e.testUnknownPolicy)
	t.Run("mirrored requests counted once each", e.testMirror)
	t.Run("restart and promotion under load give no 5xx", e.testUnderLoad)
}

func (e *env) testAllowed(t *testing.T) {
	r := get(t, clientFrom(outsideIP), e.nginx.Base()+"/public/page?x=1", nil)
	if r.code != 200 || r.body != "backend" || e.backend.count("/public/page") != 1 {
		t.Fatalf("allowed request: %d %q, backend saw it %d times", r.code, r.body, e.backend.count("/public/page"))
	}
	if r.header.Get("X-Policy-Decision") != "ALLOW" || r.header.Get("X-Policy-Rule") != "public" || r.header.Get("X-Policy-Generation") == "" {
		t.Errorf("allow headers: %v", r.header)
	}
}

func (e *env) testDenied(t *testing.T) {
	for _, path := range []string{"/admin/users", "/%61dmin/users", "/elsewhere"} {
		r := get(t, clientFrom(outsideIP), e.nginx.Base()+path, nil)
		if r.code != http.StatusForbidden || r.header.Get("X-Policy-Decision") != "DENY" || r.header.Get("X-Policy-Generation") == "" {
			t.Errorf("%s: %d %v", path, r.code, r.header)
		}
	}
	r := get(t, clientFrom(outsideIP), e.nginx.Base()+"/admin/users", nil)
	if r.header.Get("X-Policy-Rule") != "block-admin" {
		t.Errorf("deny rule header: %v", r.header)
	}
	if n := e.backend.count("/admin/users") + e.backend.count("/elsewhere") + e.backend.count("/%61dmin/users"); n != 0 {
		t.Errorf("denied requests reached the backend %d times", n)
	}
}

// testEscapedSlashes (issue 22, finding 8): nginx passes the raw URI to
// the node and to the backend. "/public%2F..%2Fadmin/users" was read by
// the node as "/public/../admin/users", a public page, and reached a
// backend for which it is /admin/users. By default a path with an escaped
// slash or backslash is denied as malformed.
func (e *env) testEscapedSlashes(t *testing.T) {
	for _, path := range []string{"/public%2F..%2Fadmin/users", "/public%2f..%5cadmin/users", "/public/..%5Cadmin/users"} {
		r := get(t, clientFrom(outsideIP), e.nginx.Base()+path, nil)
		if r.code != http.StatusForbidden || !strings.HasPrefix(r.header.Get("X-Policy-Error"), "INVALID_ARGUMENT: ") {
			t.Errorf("%s: %d %v", path, r.code, r.header)
		}
	}
	if n := e.backend.count("/public/../admin/users") + e.backend.count(`/public/..\admin/users`); n != 0 {
		t.Errorf("paths with escaped slashes reached the backend %d times", n)
	}
}

// testClientAddress: nginx appends the peer it saw to X-Forwarded-For, and
// the node, trusting nginx only, reads that hop, not what a client wrote.
func (e *env) testClientAddress(t *testing.T) {
	url := e.nginx.Base() + "/office/report"
	if r := get(t, clientFrom(officeIP), url, nil); r.code != 200 || r.header.Get("X-Policy-Rule") != "office" {
		t.Errorf("from the office through nginx: %d %v", r.code, r.header)
	}
	spoof := map[string]string{"X-Forwarded-For": officeIP, "X-Real-IP": officeIP}
	if r := get(t, clientFrom(outsideIP), url, spoof); r.code != http.StatusForbidden {
		t.Errorf("a forged X-Forwarded-For through nginx was believed: %d %v", r.code, r.header)
	}
	// Straight to a node, the client is not a trusted proxy: its
	// forwarding headers are ignored.
	direct := e.cluster.Nodes[0].Base() + "/v1/policies/web:authorize"
	hdr := map[string]string{"X-Original-URI": "/office/report", "X-Forwarded-For": officeIP}
	if r := get(t, clientFrom(outsideIP), direct, hdr); r.code != http.StatusForbidden {
		t.Errorf("a forged X-Forwarded-For straight to a node was believed: %d %v", r.code, r.header)
	}
	if e.backend.count("/office/report") != 1 {
		t.Errorf("backend saw /office/report %d times, want 1", e.backend.count("/office/report"))
	}
}

// testUnknownPolicy: nginx turns an auth status other than 2xx, 401 and
// 403 into a 500; a node that cannot decide answers its failure mode
// (deny) with the reason, which reaches the client.
func (e *env) testUnknownPolicy(t *testing.T) {
	var nodes []string
	for _, n := range e.cluster.Nodes {
		nodes = append(nodes, n.HTTPAddr)
	}
	listen := harness.FreeAddrs(t, 1)[0]
	conf := renderGateway(t, nodes, e.backend.addr, listen)
	conf = strings.Replace(conf, "/v1/policies/web:authorize", "/v1/policies/ghost:authorize", 1)
	ng := startNginx(t, conf, listen)
	r := get(t, clientFrom(outsideIP), ng.Base()+"/public/ghost", nil)
	if r.code != http.StatusForbidden || r.header.Get("X-Policy-Decision") != "DENY" ||
		!strings.HasPrefix(r.header.Get("X-Policy-Error"), "NOT_FOUND: ") || e.backend.count("/public/ghost") != 0 {
		t.Errorf("unknown policy through nginx: %d %v", r.code, r.header)
	}
}

// experimentStats is the part of an experiment the mirror test reads.
type experimentStats struct {
	PreviewMetadata *struct {
		State string `json:"state"`
	} `json:"previewMetadata"`
	Stats *struct {
		Evaluated   uint64 `json:"evaluated"`
		Unchanged   uint64 `json:"unchanged"`
		AllowToDeny uint64 `json:"allowToDeny"`
		Errors      uint64 `json:"errors"`
		Dropped     uint64 `json:"dropped"`
		Nodes       []struct {
			Node string `json:"node"`
		} `json:"nodes"`
	} `json:"stats"`
}

// testMirror: a branch previews a stricter "observed"; nginx mirrors every
// /observe/ request to :mirror; the experiment counts each exactly once.
func (e *env) testMirror(t *testing.T) {
	e.git.CreateBranch(e.work, "stricter")
	e.git.Commit(e.work, map[string]string{"observed/policy.toml": observedStricter}, "deny secrets")
	e.git.Push(e.work, "stricter")
	e.git.Checkout(e.work, "main")
	e.reconcile(t)
	cl := harness.NewClient(10*time.Second, 0)
	url := e.cluster.Nodes[0].Base() + "/v1/policies/observed/experiments/branch-stricter"
	var exp experimentStats
	err := harness.Eventually(60*time.Second, func() error {
		exp = experimentStats{}
		if err := cl.GetJSON(url, &exp); err != nil {
			return err
		}
		if exp.PreviewMetadata == nil || exp.PreviewMetadata.State != "ACTIVE" || exp.Stats == nil || len(exp.Stats.Nodes) != len(e.cluster.Nodes) {
			return fmt.Errorf("experiment not previewed on every node yet: %+v", exp)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	const plain, secret = 40, 10
	c := clientFrom(outsideIP)
	for i := range plain + secret {
		path := fmt.Sprintf("/observe/page-%d", i)
		if i < secret {
			path = fmt.Sprintf("/observe/secret-%d", i)
		}
		if r := get(t, c, e.nginx.Base()+path, nil); r.code != 200 || r.body != "backend" {
			t.Fatalf("observed request %s: %d %q", path, r.code, r.body)
		}
	}
	err = harness.Eventually(60*time.Second, func() error {
		exp = experimentStats{}
		if err := cl.GetJSON(url, &exp); err != nil {
			return err
		}
		if s := exp.Stats; s == nil || s.Evaluated < plain+secret {
			return fmt.Errorf("stats %+v", s)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s := exp.Stats
	if s.Evaluated != plain+secret || s.AllowToDeny != secret || s.Unchanged != plain || s.Errors != 0 || s.Dropped != 0 {
		t.Errorf("stats = %+v, want %d evaluated, %d allowToDeny", *s, plain+secret, secret)
	}
}

// load sends GETs through nginx from workers until stop is closed:
// /public/ ones must be allowed and /admin ones denied, whatever happens
// to the nodes behind nginx.
type load struct {
	sent   atomic.Int64
	mu     sync.Mutex
	failed []string
}

func (l *load) run(base string, workers int, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clientFrom(outsideIP)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				path, want := fmt.Sprintf("/public/w%d-%d", w, i), http.StatusOK
				if i%2 == 1 {
					path, want = "/admin/x", http.StatusForbidden
				}
				r, err := tryGet(c, base+path, nil)
				l.sent.Add(1)
				if err != nil || r.code != want {
					l.fail(fmt.Sprintf("%s: %d %v %v", path, r.code, err, r.header))
				}
				time.Sleep(2 * time.Millisecond) // a steady rate, not a flood
			}
		}()
	}
	return &wg
}

func (l *load) fail(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.failed) < 20 {
		l.failed = append(l.failed, msg)
	}
}

// waitSent waits until n more requests were sent.
func (l *load) waitSent(t *testing.T, n int64) {
	t.Helper()
	target := l.sent.Load() + n
	if err := harness.Eventually(60*time.Second, func() error {
		if s := l.sent.Load(); s < target {
			return fmt.Errorf("%d of %d requests sent", s, target)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// testUnderLoad kills a node and starts it again, then promotes a new
// generation, while clients go through nginx: none sees a 5xx or a wrong
// decision.
func (e *env) testUnderLoad(t *testing.T) {
	var l load
	stop := make(chan struct{})
	wg := l.run(e.nginx.Base(), 4, stop)
	defer func() { close(stop); wg.Wait() }()
	l.waitSent(t, 200)

	n := e.cluster.Nodes[len(e.cluster.Nodes)-1]
	n.Kill()
	l.waitSent(t, 500)
	if err := n.Start(e.cluster.Bin); err != nil {
		t.Fatal(err)
	}
	e.cluster.WaitReady(n)
	l.waitSent(t, 200)

	cl := harness.NewClient(10*time.Second, 0)
	st, err := cl.Status(e.cluster.Nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	e.git.Commit(e.work, map[string]string{"web/policy.toml": webPromoted}, "allow /new/")
	e.git.Push(e.work, "main")
	e.reconcile(t)
	gen := e.servedEverywhere(t, st.ServedGeneration)
	l.waitSent(t, 200)
	close(stop)
	wg.Wait()
	stop = make(chan struct{}) // for the deferred close
	t.Logf("%d requests through nginx during a restart and the promotion to generation %d", l.sent.Load(), gen)
	if len(l.failed) > 0 {
		t.Errorf("wrong answers under load:\n%s", l.failed)
	}
	if r := get(t, clientFrom(outsideIP), e.nginx.Base()+"/new/x", nil); r.code != 200 {
		t.Errorf("after the promotion /new/x: %d %v", r.code, r.header)
	}
}
