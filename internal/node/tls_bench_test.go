package node

import (
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/certtest"
)

// TestBenchAPITLS measures :evaluate over keep-alive connections against
// one node, in plain HTTP and over TLS: decisions per second and the
// 99th percentile latency. Set RECONCILER_TLS_BENCH=1 to run it.
func TestBenchAPITLS(t *testing.T) {
	if os.Getenv("RECONCILER_TLS_BENCH") == "" {
		t.Skip("set RECONCILER_TLS_BENCH=1 to measure")
	}
	ca := certtest.NewCA(t, "bench-ca")
	for _, withTLS := range []bool{false, true} {
		cfg := singleNode(t, webPolicy(1))
		scheme, tr := "http", &http.Transport{MaxIdleConnsPerHost: 64}
		if withTLS {
			cfg.API.TLSCertFile, cfg.API.TLSKeyFile = ca.WriteServer(t, t.TempDir(), "api", 2)
			scheme, tr.TLSClientConfig = "https", &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
		}
		m := startNode(t, cfg)
		url := scheme + "://" + m.Addr() + "/v1/policies/web:evaluate"
		client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		eventually(t, waitTimeout, "generation 1", func() error {
			resp, err := client.Post(url, "application/json", strings.NewReader(`{"path":"/v1"}`))
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return errStatus(resp.StatusCode)
			}
			return nil
		})
		n, p99 := evaluateLoad(t, client, url, 8, 5*time.Second)
		t.Logf("tls=%v: %.0f decisions/s, p99 %v (8 keep-alive clients, 5 s)", withTLS, n, p99)
	}
}

// evaluateLoad runs workers clients for d and returns decisions per
// second and the p99 latency.
func evaluateLoad(t *testing.T, c *http.Client, url string, workers int, d time.Duration) (float64, time.Duration) {
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Since(start) < d {
				t0 := time.Now()
				resp, err := c.Post(url, "application/json", strings.NewReader(`{"path":"/v1"}`))
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(lat)
	if len(lat) == 0 {
		t.Fatal("no decision answered")
	}
	return float64(len(lat)) / time.Since(start).Seconds(), lat[len(lat)*99/100]
}
