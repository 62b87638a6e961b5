package engine

import (
	"slices"
	"strings"
	"testing"
)

// ValueReads names the hidden request values a match reads, for the
// writer approving a fork's preview (issue 16: counts are an oracle).
func TestValueReads(t *testing.T) {
	cases := []struct {
		match string
		want  []string
	}{
		{`request.path == '/admin'`, []string{}},
		{`request.headers['X-Api-Key'].startsWith('LIVE-A')`, []string{"headers.x-api-key"}},
		{`request.query.access_token == 'x' && request.attributes.session.owner == 'y'`, []string{"attributes.session", "query.access_token"}},
		{`'x-api-key' in request.headers && has(request.query.page) && size(request.attributes) > 2`, []string{}},
		{`request.headers.exists(k, k.startsWith('x-'))`, []string{}},
		{`request.headers.exists(k, request.headers[k] == 'secret')`, []string{"headers"}},
		{`request.headers.exists(k, v, v == 'secret')`, []string{"headers"}},
		{`request.headers[request.path] == 'x'`, []string{"headers"}},
		{`request.query == {'token': 'x'}`, []string{"query"}},
		{`[1].exists(request, request == 1) || request.path == '/'`, []string{"attributes", "headers", "query"}},
		{`has(request.headers) && request.method == 'GET'`, []string{}},
	}
	for _, c := range cases {
		got, err := ValueReads(c.match)
		if err != nil {
			t.Fatalf("%s: %v", c.match, err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: reads %q, want %q", c.match, got, c.want)
		}
	}
	if _, err := ValueReads(`request.headers[`); err == nil {
		t.Error("a match that does not parse has no error")
	}
}

// ValueReads takes a pull request's text: it never panics, and what it
// returns is sorted, unique, and under one of the named fields.
func FuzzValueReads(f *testing.F) {
	f.Add(`request.headers['x-api-key'] == 'k'`)
	f.Add(`request.attributes.a.b.exists(x, x == request.query['q'])`)
	f.Add(`[request].exists(request, request.headers.h == '1')`)
	f.Fuzz(func(t *testing.T, match string) {
		got, err := ValueReads(match)
		if err != nil {
			return
		}
		if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Fatalf("%q: reads %q not sorted and unique", match, got)
		}
		for _, r := range got {
			field, _, _ := strings.Cut(r, ".")
			if !slices.Contains(namedFields, field) {
				t.Fatalf("%q: read %q", match, r)
			}
		}
	})
}
