package changepath_test

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestBenchCommitToActive measures an API experiment's :commit until all
// three nodes serve the generation it made, over 20 commits (issue 14's
// measurement; docs/preview.md has the numbers):
//
//	RECONCILER_CHANGEPATH_BENCH=1 go test -count=1 -v -run TestBenchCommitToActive ./test/changepath/
func TestBenchCommitToActive(t *testing.T) {
	if os.Getenv("RECONCILER_CHANGEPATH_BENCH") == "" {
		t.Skip("set RECONCILER_CHANGEPATH_BENCH=1")
	}
	e := start(t, "")
	var took []time.Duration
	for i := range 20 {
		id := "bench-" + strconv.Itoa(i)
		body := fmt.Sprintf(`{"policy":{"default_action":"allow","group":"default","on_error":"deny","rules":[{"name":"deny-blocked",
"priority":100,"action":"deny","match":"request.source_ip == '198.51.100.%d'"}]}}`, i+10)
		if o := e.op(http.MethodPost, "/v1/policies/edge/experiments?experimentId="+id, body); o.Error != nil {
			t.Fatalf("create: %+v", o.Error)
		}
		x, _ := e.experiment("policies/edge/experiments/" + id)
		want := uint64(i + 2)
		begin := time.Now()
		code, data, err := client.Do(http.MethodPost, e.c.Nodes[2].Base()+"/v1/"+x.Name+":commit", fmt.Sprintf(`{"etag":%q}`, x.Etag))
		if err != nil || code != 200 {
			t.Fatalf("commit: %d %s %v", code, data, err)
		}
		for _, n := range e.c.Nodes {
			for {
				s, err := client.Status(n)
				if err == nil && s.ServedGeneration >= want {
					break
				}
				if time.Since(begin) > time.Minute {
					t.Fatalf("%s: generation %d not served after a minute", n.ID, want)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		took = append(took, time.Since(begin))
	}
	slices.Sort(took)
	q := func(f float64) time.Duration { return took[int(f*float64(len(took)-1)+0.5)].Round(time.Millisecond) }
	t.Logf("commit to active on 3 nodes, %d commits: p50 %v p90 %v p99 %v (min %v max %v)", len(took), q(0.5), q(0.9), q(0.99),
		took[0].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
}
