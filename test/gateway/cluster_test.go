package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/test/harness"
)

func TestMain(m *testing.M) {
	code := m.Run()
	harness.RemoveBinary()
	os.Exit(code)
}

// The policies the gateway tests serve: "web" is enforced through
// auth_request, "observed" only sees mirrored copies.
const (
	webPolicy = `default_action = "deny"
on_error = "deny"

[[rules]]
name = "block-admin"
priority = 5
action = "deny"
match = 'request.path.startsWith("/admin")'

[[rules]]
name = "public"
priority = 10
action = "allow"
match = 'request.path.startsWith("/public/")'

[[rules]]
name = "office"
priority = 20
action = "allow"
match = 'request.source_ip == "127.0.0.5"'
`
	observedPolicy = `default_action = "allow"
on_error = "deny"
`
	// observedStricter is the experiment's version of "observed".
	observedStricter = observedPolicy + `
[[rules]]
name = "no-secrets"
priority = 1
action = "deny"
match = 'request.path.startsWith("/observe/secret")'
`
	// webPromoted is the next main of "web": one more allowed prefix.
	webPromoted = webPolicy + `
[[rules]]
name = "new"
priority = 30
action = "allow"
match = 'request.path.startsWith("/new/")'
`
)

// The client addresses: nginx (the trusted proxy) connects from
// 127.0.0.1, the clients from these.
const (
	officeIP   = "127.0.0.5"
	outsideIP  = "127.0.0.6"
	proxyCIDRs = `trusted_proxies = ["127.0.0.1/32"]`
)

// env is a cluster behind nginx, in front of a backend.
type env struct {
	git     *gittest.Server
	work    string // a clone of the policy repository
	cluster *harness.Cluster
	backend *backend
	nginx   *nginx
}

// startEnv starts a git server with the policies, n nodes following it
// (previews started automatically), a backend and nginx in front of them.
func startEnv(t *testing.T, n int) *env {
	t.Helper()
	srv := gittest.NewServer(t, gittest.Options{})
	url := srv.InitRepo("policies", map[string]string{
		"web/policy.toml":      webPolicy,
		"observed/policy.toml": observedPolicy,
	})
	c := harness.StartCluster(t, harness.ClusterOptions{
		Size: n,
		Configure: func(cfg *harness.Config) {
			cfg.GitURL, cfg.Poll = url, "@every 1h"
			cfg.APIExtra = proxyCIDRs
			cfg.Extra = "[preview]\nauto_start = true\nrecord_requests = 0\nqueue_size = 100000"
		},
	})
	c.WaitLeader(30 * time.Second)
	be := startBackend(t)
	addrs := harness.FreeAddrs(t, 1)
	var nodes []string
	for _, nd := range c.Nodes {
		nodes = append(nodes, nd.HTTPAddr)
	}
	ng := startNginx(t, renderGateway(t, nodes, be.addr, addrs[0]), addrs[0])
	return &env{git: srv, work: srv.Clone(url), cluster: c, backend: be, nginx: ng}
}

// backend is the protected application: it answers 200 "backend" and
// counts what reached it by path.
type backend struct {
	addr string
	mu   sync.Mutex
	hits map[string]int
}

func startBackend(t *testing.T) *backend {
	b := &backend{hits: map[string]int{}}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.hits[r.URL.Path]++
		b.mu.Unlock()
		io.WriteString(w, "backend")
	}))
	t.Cleanup(hs.Close)
	b.addr = strings.TrimPrefix(hs.URL, "http://")
	return b
}

func (b *backend) count(path string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hits[path]
}

// clientFrom returns an HTTP client whose connections come from ip (any
// 127/8 address is local on Linux).
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext:         func(ctx context.Context, nw, addr string) (net.Conn, error) { return d.DialContext(ctx, nw, addr) },
			MaxIdleConnsPerHost: 64,
		},
	}
}

// reply is what a client got.
type reply struct {
	code   int
	header http.Header
	body   string
}

func get(t testing.TB, c *http.Client, url string, header map[string]string) reply {
	t.Helper()
	r, err := tryGet(c, url, header)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func tryGet(c *http.Client, url string, header map[string]string) (reply, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return reply{}, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return reply{code: resp.StatusCode, header: resp.Header, body: string(body)}, err
}

// reconcile asks a node to read the repository now.
func (e *env) reconcile(t testing.TB) {
	t.Helper()
	cl := harness.NewClient(30*time.Second, 0)
	if code, body, err := cl.Do(http.MethodPost, e.cluster.Nodes[0].Base()+"/v1/cluster:reconcile", "{}"); err != nil || code >= 300 {
		t.Fatalf("reconcile: %d %s %v", code, body, err)
	}
}

// servedEverywhere waits until every node serves a generation above gen
// and returns the lowest one served.
func (e *env) servedEverywhere(t testing.TB, gen uint64) uint64 {
	t.Helper()
	cl := harness.NewClient(10*time.Second, 0)
	var low uint64
	err := harness.Eventually(60*time.Second, func() error {
		low = 0
		for _, n := range e.cluster.Nodes {
			s, err := cl.Status(n)
			if err != nil {
				return err
			}
			if s.ServedGeneration <= gen {
				return fmt.Errorf("%s serves generation %d", n.ID, s.ServedGeneration)
			}
			if low == 0 || s.ServedGeneration < low {
				low = s.ServedGeneration
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for a generation above %d: %v", gen, err)
	}
	return low
}
