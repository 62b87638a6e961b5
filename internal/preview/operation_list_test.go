package preview_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// operationsState holds n operations, every third one running, on
// experiments e0..e4 of web.
func operationsState(t testing.TB, n int) *raftstore.State {
	st := raftstore.NewState()
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		op := preview.NewOperation(fmt.Sprintf("op%03d", i), preview.MethodCreate,
			fmt.Sprintf("policies/web/experiments/e%d", i%5), at)
		if i%3 != 0 {
			op, _ = op.Succeed(nil, at)
		}
		p, err := op.PutPayload()
		if err != nil {
			t.Fatal(err)
		}
		st.Operations[p.ID] = raftstore.Operation{ID: p.ID, Data: p.Data}
	}
	return st
}

// TestListOperationsPages: pages of a filtered list cover every match
// once, in name order; a token is refused with another filter or forged.
func TestListOperationsPages(t *testing.T) {
	st := operationsState(t, 20)
	filter := `done = false AND metadata.target = "policies/web/experiments/e0"`
	var names []string
	req := preview.OperationListRequest{Filter: filter, PageSize: 1}
	for range 30 {
		res, err := preview.ListOperations(st, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range res.Operations {
			names = append(names, op.Name)
		}
		if req.PageToken = res.NextPageToken; req.PageToken == "" {
			break
		}
	}
	// Running (i%3 == 0) on e0 (i%5 == 0): 0 and 15.
	if strings.Join(names, ",") != "operations/op000,operations/op015" {
		t.Fatalf("pages = %v", names)
	}
	first, _ := preview.ListOperations(st, preview.OperationListRequest{Filter: filter, PageSize: 1})
	for _, bad := range []preview.OperationListRequest{
		{Filter: "done = true", PageToken: first.NextPageToken},
		{PageToken: "not-a-token"},
		{PageSize: -1},
	} {
		_, err := preview.ListOperations(st, bad)
		if code, _ := preview.CodeOf(err); code != preview.InvalidArgument {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

// FuzzParseOperationFilter: any input either fails with INVALID_ARGUMENT
// or gives a filter whose canonical spelling parses back to it, and
// listing with it never fails.
func FuzzParseOperationFilter(f *testing.F) {
	for _, s := range []string{"", "done = true", `metadata.target = "policies/a/experiments/b"`,
		"metadata.verb = commit AND done = false", "done = true AND done = false", "done", "= x", "a AND",
		`metadata.target = "a\"b"`, "done = true AND AND", strings.Repeat("done = true AND ", 10)} {
		f.Add(s)
	}
	st := operationsState(f, 7)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := preview.ParseOperationFilter(s)
		if err != nil {
			if code, _ := preview.CodeOf(err); code != preview.InvalidArgument {
				t.Fatalf("ParseOperationFilter(%q): %v", s, err)
			}
			return
		}
		var terms []string
		if got.Done != "" {
			terms = append(terms, "done = "+got.Done)
		}
		if got.Target != "" {
			terms = append(terms, fmt.Sprintf("metadata.target = %q", got.Target))
		}
		if got.Verb != "" {
			terms = append(terms, "metadata.verb = "+got.Verb)
		}
		again, err := preview.ParseOperationFilter(strings.Join(terms, " AND "))
		if err != nil || again != got {
			t.Fatalf("canonical form of %q (%v) parses to %+v, %v", s, terms, again, err)
		}
		if _, err := preview.ListOperations(st, preview.OperationListRequest{Filter: s}); err != nil {
			t.Fatalf("list with %q: %v", s, err)
		}
	})
}
