package gateway

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/policyrollout/reconciler/internal/extauthz"
	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/test/harness"
)

// The shape of the bench: an open loop at a fixed rate, bounded in count
// (and so in time), on loopback only.
const (
	benchRate     = 1000 // requests per second
	benchRequests = 5000 // measured per step (5 s at benchRate)
	benchRounds   = 5    // the steps take turns, benchRequests/benchRounds each time
	benchWarm     = 500  // sent once before the rounds, not measured
	benchInFlight = 64   // more in flight than this and the loop falls behind
)

// baselineServer is a second server in the same nginx: the same backend
// without auth_request, "nginx alone".
const baselineServer = `
server {
    listen %s;
    location / {
        proxy_pass http://backend;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
    }
}
`

// TestBenchGateway measures, in one run, what a decision adds: a request
// through nginx with auth_request to a node against nginx alone, and
// Envoy's Check over gRPC against :authorize over HTTP, each at benchRate.
//
//	RECONCILER_GATEWAY_BENCH=1 go test -count=1 -run TestBenchGateway -v ./test/gateway/
func TestBenchGateway(t *testing.T) {
	if os.Getenv("RECONCILER_GATEWAY_BENCH") == "" {
		t.Skip("set RECONCILER_GATEWAY_BENCH=1 (make bench)")
	}
	srv := gittest.NewServer(t, gittest.Options{})
	url := srv.InitRepo("policies", map[string]string{"web/policy.toml": webPolicy, "observed/policy.toml": observedPolicy})
	addrs := harness.FreeAddrs(t, 3)
	c := harness.StartCluster(t, harness.ClusterOptions{Size: 1, Configure: func(cfg *harness.Config) {
		cfg.GitURL, cfg.Poll = url, "@every 1h"
		cfg.APIExtra = proxyCIDRs + fmt.Sprintf("\ngrpc_addr = %q", addrs[2])
	}})
	node := c.Nodes[0]
	be := startBackend(t)
	conf := renderGateway(t, []string{node.HTTPAddr}, be.addr, addrs[0]) + fmt.Sprintf(baselineServer, addrs[1])
	ng := startNginx(t, conf, addrs[0])

	hc := clientFrom(outsideIP)
	httpGet := func(url string, want int) func() error {
		return func() error {
			r, err := tryGet(hc, url, nil)
			if err == nil && r.code != want {
				err = fmt.Errorf("%s: %d", url, r.code)
			}
			return err
		}
	}
	check := grpcCheck(t, addrs[2])
	authz := node.Base() + "/v1/policies/web:authorize/public/a"
	steps := []struct {
		name string
		send func() error
	}{
		{"nginx alone", httpGet("http://"+addrs[1]+"/public/a", 200)},
		{"nginx + auth_request", httpGet(ng.Base()+"/public/a", 200)},
		{":authorize over HTTP", httpGet(authz, 200)},
		{"Check over gRPC", check},
	}
	// The steps take turns in rounds, so that what else the machine does
	// weighs on each alike.
	lat := map[string][]time.Duration{}
	behind := map[string]int{}
	for _, s := range steps {
		openLoop(t, benchWarm, s.send)
	}
	for range benchRounds {
		for _, s := range steps {
			l, b := openLoop(t, benchRequests/benchRounds, s.send)
			lat[s.name], behind[s.name] = append(lat[s.name], l...), behind[s.name]+b
		}
	}
	res := map[string]stepResult{}
	for _, s := range steps {
		res[s.name] = summarize(t, s.name, lat[s.name], behind[s.name])
	}
	added := func(with, without string) {
		a, b := res[with], res[without]
		t.Logf("ADDED %s vs %s: p50 %+v, p99 %+v", with, without, a.p50-b.p50, a.p99-b.p99)
	}
	// The numbers mean little on a busy machine: say how busy it was.
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		t.Logf("LOAD %s (1, 5, 15 min) on %d CPUs", strings.Join(strings.Fields(string(la))[:3], " "), runtime.NumCPU())
	}
	added("nginx + auth_request", "nginx alone")
	added("Check over gRPC", ":authorize over HTTP")
}

// grpcCheck returns a sender of one Check of the public path to addr.
func grpcCheck(t *testing.T, addr string) func() error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := authv3.NewAuthorizationClient(conn)
	req := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source:            &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: outsideIP}}}},
		Request:           &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{Method: "GET", Path: "/public/a", Host: "www.example"}},
		ContextExtensions: map[string]string{extauthz.ExtPolicy: "web"},
	}}
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := client.Check(ctx, req)
		if err == nil && r.GetOkResponse() == nil {
			err = fmt.Errorf("check: %v", r.GetStatus())
		}
		return err
	}
}

type stepResult struct {
	p50, p99, max time.Duration
	behind        int // sends that found benchInFlight requests in flight
}

// summarize reports the latency quantiles of one step.
func summarize(t *testing.T, name string, lat []time.Duration, behind int) stepResult {
	t.Helper()
	slices.Sort(lat)
	r := stepResult{p50: lat[len(lat)/2], p99: lat[len(lat)*99/100], max: lat[len(lat)-1], behind: behind}
	t.Logf("BENCH %-22s %d req at %d/s: p50 %v  p99 %v  max %v  behind %d", name, len(lat), benchRate, r.p50, r.p99, r.max, r.behind)
	return r
}

// openLoop sends n requests, one every 1/benchRate, each in its own
// goroutine (at most benchInFlight at once), and returns their latencies
// and how many sends had to wait for a free slot.
func openLoop(t *testing.T, n int, send func() error) ([]time.Duration, int) {
	t.Helper()
	lat := make([]time.Duration, n)
	slots := make(chan struct{}, benchInFlight)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	behind := 0
	interval := time.Second / benchRate
	start := time.Now()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		select {
		case slots <- struct{}{}:
		default:
			behind++
			slots <- struct{}{}
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			t0 := time.Now()
			err := send()
			lat[i] = time.Since(t0)
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	return lat, behind
}
