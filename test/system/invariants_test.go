package system

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// recorder is a testing.TB that keeps errors instead of failing, so the
// checker's own tests can see what it reports.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Error(args ...any)         { r.errs = append(r.errs, fmt.Sprint(args...)) }
func (r *recorder) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }
func (r *recorder) Logf(string, ...any)       {}

// answer is a Result from tree k at generation gen for request req.
func answer(node string, gen uint64, k, req int, at time.Time) Result {
	d, rule := harness.Expect(k, harness.RequestPaths[req])
	return Result{Node: node, Req: req, Start: at, End: at.Add(time.Millisecond),
		Decision: &harness.Decision{Decision: d, Rule: rule, Generation: gen}}
}

func TestCheckerFindsBrokenInvariants(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	gens := map[uint64]*harness.Generation{
		1: {Generation: 1, State: "RETIRED", ActivateTime: t0.Format(time.RFC3339Nano)},
		2: {Generation: 2, State: "ACTIVE", ActivateTime: t0.Add(time.Second).Format(time.RFC3339Nano)},
		3: {Generation: 3, State: "STAGED"},
	}
	lookup := func(n uint64) (*harness.Generation, error) {
		if g, ok := gens[n]; ok {
			return g, nil
		}
		return nil, errors.New("404")
	}
	tests := []struct {
		name    string
		results []Result
		want    []string // substrings of the errors, in any order; none means clean
	}{
		{"clean", []Result{answer("n1", 1, 0, 0, t0), answer("n2", 1, 0, 0, t0), answer("n1", 2, 1, 0, t0.Add(2*time.Second))}, nil},
		{"regression", []Result{answer("n1", 2, 1, 0, t0.Add(2*time.Second)), withFloor(answer("n1", 1, 0, 0, t0.Add(3*time.Second)), 2)}, []string{"went back"}},
		{"never activated", []Result{answer("n1", 3, 1, 0, t0.Add(5*time.Second))}, []string{"never activated"}},
		{"before activation", []Result{answer("n1", 2, 1, 0, t0.Add(time.Second/2))}, []string{"before its activateTime"}},
		{"disagreement", []Result{answer("n1", 1, 0, 3, t0), answer("n2", 1, 3, 3, t0)}, []string{"n1 answered"}},
		{"wrong tree", []Result{answer("n1", 1, 0, 0, t0), answer("n1", 1, 2, 5, t0)}, []string{"the tree says"}},
		{"failure", []Result{{Node: "n3", Req: 1, Start: t0, End: t0, Err: errors.New("EOF")}}, []string{"n3 failed a decision"}},
		{"tolerated", []Result{{Node: "n3", Req: 1, Start: t0, End: t0, Err: errors.New("EOF"), Tolerated: true}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chk := NewChecker()
			for _, r := range tc.results {
				chk.Record(r)
			}
			rec := &recorder{TB: t}
			chk.verify(rec, map[int]bool{0: true, 1: true, 2: true}, lookup)
			if len(tc.want) == 0 && len(rec.errs) > 0 {
				t.Errorf("unexpected errors: %q", rec.errs)
			}
			for _, w := range tc.want {
				if !strings.Contains(strings.Join(rec.errs, "\n"), w) {
					t.Errorf("no error containing %q in %q", w, rec.errs)
				}
			}
		})
	}
}

func withFloor(r Result, floor uint64) Result { r.Floor = floor; return r }
