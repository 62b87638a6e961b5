package sandbox_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/reconcile"
	"github.com/policyrollout/reconciler/internal/sandbox"
	"github.com/policyrollout/reconciler/test/harness"
)

// listTree is the example tree with a list of n entries used by a policy.
func listTree(t testing.TB, list []byte) map[string][]byte {
	files := exampleTree(t)
	files["blocked/policy.toml"] = []byte("default_action = \"allow\"\n[[rules]]\nname = \"block\"\npriority = 1\naction = \"deny\"\nmatch = \"inIpList(request.source_ip, 'blocklist')\"\n")
	files["_lists/blocklist.netset"] = list
	return files
}

func mixedCIDRs(n int) []byte {
	var b strings.Builder
	for i := range n {
		if i%2 == 0 {
			fmt.Fprintf(&b, "%d.%d.%d.0/24\n", 1+i>>16&127, i>>8&255, i&255)
		} else {
			fmt.Fprintf(&b, "2001:db8:%x:%x::/64\n", i>>16, i&0xffff)
		}
	}
	return []byte(b.String())
}

// The leader's child validates a tree whose list is over the 8 MiB tree
// budget (lists have their own), and refuses hostile lists naming the
// budget or the line, as `reconciler validate` does.
func TestChildValidatesLists(t *testing.T) {
	r := sandbox.Runner{Path: harness.Binary(t)}
	big := mixedCIDRs(500_000)
	if len(big) <= policy.MaxTreeBytes {
		t.Fatalf("list of %d bytes is within MaxTreeBytes", len(big))
	}
	if v := r.Validate(listTree(t, big), policy.LoadOptions{}, engine.DefaultOptions()); len(v.Problems) > 0 || v.Etags["blocked"] == "" {
		t.Fatalf("a 500,000-entry list: %v", v.Problems)
	}
	for name, c := range map[string]struct {
		list []byte
		want string
	}{
		"entries":   {[]byte(strings.Repeat("10.0.0.1\n", policy.MaxListEntries+1)), "(MaxListEntries)"},
		"malformed": {append(mixedCIDRs(1023), "10.0.0.0/99\n"...), `_lists/blocklist.netset:1024: "10.0.0.0/99"`},
		"binary":    {[]byte("\x00\x01\x02\xff"), "_lists/blocklist.netset:1: "},
	} {
		v := r.Validate(listTree(t, c.list), policy.LoadOptions{}, engine.DefaultOptions())
		if len(v.Problems) == 0 || !strings.Contains(strings.Join(v.Problems, "\n"), c.want) {
			t.Errorf("%s: problems %.400q, want %q", name, v.Problems, c.want)
		}
	}
}

// BenchmarkValidateOneLineListChange is the leader's validation of a
// commit adding one line to a 1,000,000-entry list: in a fresh child
// (Runner, as every validation was) and in a worker's child, which
// derives the list from the content it validated before.
func BenchmarkValidateOneLineListChange(b *testing.B) {
	bin := harness.Binary(b)
	big := mixedCIDRs(1_000_000)
	// Each tree appends one more line to the one before, as commits do.
	list := append([]byte{}, big...)
	files := func(i int) map[string][]byte {
		list = append(list, fmt.Sprintf("192.0.2.%d/32\n", i%250)...)
		return listTree(b, append([]byte{}, list...))
	}
	w := &sandbox.Worker{Runner: sandbox.Runner{Path: bin}}
	defer w.Close()
	for _, bc := range []struct {
		name     string
		validate func(map[string][]byte, policy.LoadOptions, engine.Options) reconcile.Validation
	}{{"fresh-child", sandbox.Runner{Path: bin}.Validate}, {"worker", w.Validate}} {
		b.Run(bc.name, func(b *testing.B) {
			bc.validate(files(0), policy.LoadOptions{}, engine.DefaultOptions()) // the worker's first tree
			i := 0
			for b.Loop() {
				i++
				if v := bc.validate(files(i), policy.LoadOptions{}, engine.DefaultOptions()); len(v.Problems) > 0 {
					b.Fatal(v.Problems)
				}
			}
		})
	}
}
