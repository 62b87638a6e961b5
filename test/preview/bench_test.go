package preview_test

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/gittest"
)

// EnvBench enables TestPreviewOverhead, which prints (never asserts) live
// decision latency and throughput with 0, 1, 5 and 10 ACTIVE experiments:
//
//	RECONCILER_PREVIEW_BENCH=1 go test -count=1 -run TestPreviewOverhead -v ./test/preview/
const EnvBench = "RECONCILER_PREVIEW_BENCH"

// benchPolicy has 100 rules; variant v changes the action of rule v so
// each experiment differs from live.
func benchPolicy(variant int) string {
	var b strings.Builder
	b.WriteString("default_action = \"allow\"\n")
	for i := range 100 {
		action := "deny"
		if i%2 == 0 {
			action = "allow"
		}
		if i == variant {
			if action == "deny" {
				action = "allow"
			} else {
				action = "deny"
			}
		}
		fmt.Fprintf(&b, "\n[[rules]]\nname = \"r%03d\"\npriority = %d\naction = %q\nmatch = 'request.path.startsWith(\"/svc%03d/\") && request.method == \"GET\"'\n",
			i, i+1, action, i)
	}
	return b.String()
}

func jsonString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

func TestPreviewOverhead(t *testing.T) {
	if os.Getenv(EnvBench) == "" {
		t.Skip("set " + EnvBench + "=1 to measure")
	}
	srv := gittest.NewServer(t, gittest.Options{})
	srv.InitRepo("policies", map[string]string{"bench/policy.toml": benchPolicy(-1)})
	queue := os.Getenv("RECONCILER_PREVIEW_BENCH_QUEUE")
	if queue == "" {
		queue = "4096"
	}
	c := startCluster(t, srv.RepoPath("policies"), "queue_size = "+queue, 1)
	n := c.Nodes[0]
	eventually(t, 30*time.Second, "bench live", func() error {
		code, body, err := do(http.MethodPost, n.Base()+"/v1/policies/bench:evaluate", `{"path":"/svc001/x","method":"GET"}`)
		if err == nil && code != 200 {
			err = fmt.Errorf("%d %s", code, body)
		}
		return err
	})
	active := 0
	for _, want := range []int{0, 1, 5, 10} {
		for ; active < want; active++ {
			body := `{"policy":{"name":"bench","default_action":"allow","rules":` + rulesJSON(active) + `}}`
			if code := call(t, http.MethodPost, n.Base()+fmt.Sprintf("/v1/policies/bench/experiments?experimentId=e%d", active), body, nil); code != 200 {
				t.Fatalf("create experiment: %d", code)
			}
		}
		time.Sleep(500 * time.Millisecond) // installed within the runtime's 200ms poll
		p50, p99, rps, total := load(t, n.Base(), 32, 3*time.Second)
		dropped := droppedTotal(t, n.Base())
		fmt.Printf("ACTIVE experiments=%2d  requests=%7d  throughput=%8.0f req/s  p50=%7s  p99=%7s  dropped(sum over experiments)=%d\n",
			want, total, rps, p50, p99, dropped)
	}
}

// rulesJSON is benchPolicy(variant)'s rules as JSON.
func rulesJSON(variant int) string {
	var parts []string
	for i := range 100 {
		action := "deny"
		if i%2 == 0 {
			action = "allow"
		}
		if i == variant {
			if action == "deny" {
				action = "allow"
			} else {
				action = "deny"
			}
		}
		parts = append(parts, fmt.Sprintf(`{"name":"r%03d","priority":%d,"action":%q,"match":%s}`, i, i+1, action,
			jsonString(fmt.Sprintf(`request.path.startsWith("/svc%03d/") && request.method == "GET"`, i))))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func droppedTotal(t *testing.T, base string) uint64 {
	var list struct {
		Experiments []struct {
			Stats *struct {
				Dropped uint64 `json:"dropped"`
			} `json:"stats"`
		} `json:"experiments"`
	}
	time.Sleep(1200 * time.Millisecond) // the stats heartbeat
	call(t, http.MethodGet, base+"/v1/policies/bench/experiments?pageSize=100", "", &list)
	var sum uint64
	for _, e := range list.Experiments {
		if e.Stats != nil {
			sum += e.Stats.Dropped
		}
	}
	return sum
}

// load sends :evaluate requests from workers for d and returns latency
// percentiles and throughput.
func load(t *testing.T, base string, workers int, d time.Duration) (p50, p99 time.Duration, rps float64, total int) {
	var mu sync.Mutex
	var lat []time.Duration
	var errs atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for i := 0; time.Now().Before(stop); i++ {
				body := fmt.Sprintf(`{"path":"/svc%03d/item","method":"GET"}`, (i*7+w)%120)
				start := time.Now()
				code, _, err := do(http.MethodPost, base+"/v1/policies/bench:evaluate", body)
				if err != nil || code != 200 {
					errs.Add(1)
					continue
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if errs.Load() > 0 {
		t.Errorf("%d requests failed", errs.Load())
	}
	slices.Sort(lat)
	if len(lat) == 0 {
		return 0, 0, 0, 0
	}
	q := func(f float64) time.Duration {
		return lat[min(len(lat)-1, int(f*float64(len(lat))))].Round(time.Microsecond)
	}
	return q(0.50), q(0.99), float64(len(lat)) / d.Seconds(), len(lat)
}
