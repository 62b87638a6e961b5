package gitsource

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/internal/policy"
)

func TestChangedPolicies(t *testing.T) {
	srv, url := newRepo(t, gittest.Options{})
	work := srv.Clone(url)
	base := srv.Head("policies", "main")
	commits := map[string]string{}
	step := func(name string, files map[string]string) {
		commits[name] = srv.Commit(work, files, name)
	}
	step("edit-alpha", map[string]string{"policies/alpha/policy.toml": policyFile("deny", "../_shared/office.toml", "request.method == 'PUT'")})
	step("edit-shared", map[string]string{"policies/_shared/office.toml": strings.Replace(officeFragment, "192.0.2.1", "192.0.2.2", 1)})
	step("add-delta", map[string]string{"policies/delta/policy.toml": policyFile("allow", "", "true")})
	step("delete-beta", map[string]string{"policies/beta/policy.toml": gittest.Deleted})
	step("comment-only", map[string]string{"policies/gamma/policy.toml": "# a comment\n" + policyFile("deny", "../_shared/office.toml", "request.host == 'x'")})
	step("outside-root", map[string]string{"README.md": "changed\n", "policies/notapolicy/readme.txt": "changed\n"})
	step("break-delta", map[string]string{"policies/delta/policy.toml": "default_action = \"maybe\"\n"})
	step("break-delta-more", map[string]string{"policies/delta/policy.toml": "default_action = \"perhaps\"\n"})
	step("edit-alpha-again", map[string]string{"policies/alpha/extra.toml": "[[rules]]\nname = \"r9\"\npriority = 900\naction = \"allow\"\nmatch = \"true\"\n"})
	step("fix-delta", map[string]string{"policies/delta/policy.toml": policyFile("allow", "", "true")})
	srv.Push(work, "main")
	s := newSource(t, Config{URL: url})
	mustFetch(t, s)

	prev := base
	for _, tc := range []struct{ step, want string }{
		{"edit-alpha", "alpha"},
		{"edit-shared", "alpha,gamma"}, // the two policies that include it
		{"add-delta", "delta"},
		{"delete-beta", "beta"},
		{"comment-only", ""}, // no decision can see it: same etag
		{"outside-root", ""},
		{"break-delta", "delta"},
		{"break-delta-more", "delta"}, // invalid both times, but its files changed
		{"edit-alpha-again", "alpha"}, // delta stays invalid and unchanged
		{"fix-delta", "delta"},
	} {
		got, err := s.ChangedPolicies(prev, commits[tc.step])
		if err != nil {
			t.Fatalf("%s: %v", tc.step, err)
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("%s: changed = %v, want %s", tc.step, got, tc.want)
		}
		prev = commits[tc.step]
	}
	all, err := s.ChangedPolicies("", base)
	if err != nil || strings.Join(all, ",") != "alpha,beta,gamma" {
		t.Errorf("from nothing: %v, %v", all, err)
	}
}

func TestChangedPoliciesFSInvalidShared(t *testing.T) {
	broken := policyFile("deny", "../_shared/office.toml", "true") + "bogus = 1\n"
	from := fstest.MapFS{
		"p/policy.toml":         {Data: []byte(broken)},
		"q/policy.toml":         {Data: []byte(policyFile("allow", "", "true"))},
		"_shared/office.toml":   {Data: []byte(officeFragment)},
		".github/workflows/x.y": {Data: []byte("a")},
	}
	to := fstest.MapFS{}
	for k, v := range from {
		to[k] = v
	}
	to["_shared/office.toml"] = &fstest.MapFile{Data: []byte(officeFragment + "\n# edited\n")}
	got, err := ChangedPoliciesFS(from, to, policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// p is invalid, so it cannot be compared by etag: a change to a shared
	// directory counts for it. q does not include the fragment.
	if strings.Join(got, ",") != "p" {
		t.Errorf("changed = %v, want p", got)
	}
}
