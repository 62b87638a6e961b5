package engine

import (
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/listgen"
	"github.com/policyrollout/reconciler/internal/policy"
)

// TestValidateTreeCompilesAListOnce: validation measured a list by
// compiling it afresh after the tree had compiled it through the cache,
// so the leader's child and `reconciler validate` built every table twice
// and held two at once (a 1,000,000-entry list: twice 54 MB and about a
// second of CPU each). The measured compile is now the one the tree's
// policies share. Not parallel: it counts the package's list compiles.
func TestValidateTreeCompilesAListOnce(t *testing.T) {
	big := listgen.Mixed{Seed: 7}.Text(minMeasuredEntries)
	tree := listTree(denyRule("abuse", "inIpList(request.source_ip, 'abuse')"), map[string]string{"_lists/abuse.netset": big})
	before := listCompiles.Load()
	v := ValidateTree(tree, policy.LoadOptions{}, DefaultOptions())
	if !v.Valid() {
		t.Fatal(v.Problems)
	}
	if n := listCompiles.Load() - before; n != 1 {
		t.Errorf("validating a tree with one list compiled it %d times, want 1", n)
	}
	if len(v.Lists) != 1 || v.Lists[0].CompiledBytes == 0 {
		t.Errorf("lists = %+v, want the list measured", v.Lists)
	}
	first, _ := policy.ParseIPEntry(strings.SplitN(big, "\n", 2)[0])
	b := bundleOf(v.Policies)
	if d, _ := b.Evaluate("edge", &Request{SourceIP: first.Addr().String()}); d.Verdict != Deny {
		t.Errorf("the list's first entry %s is not denied: %+v", first, d)
	}
}
