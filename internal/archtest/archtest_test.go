package archtest

import (
	"testing"
)

// maxMethods is the most methods a type of internal/ may declare.
const maxMethods = 40

// TestTypesStayUnderFortyMethods: no type of internal/ declares more than
// maxMethods methods: a big type is a facade over small parts, each
// with one job (docs/architecture.md).
func TestTypesStayUnderFortyMethods(t *testing.T) {
	counts, err := MethodCounts("..")
	if err != nil {
		t.Fatal(err)
	}
	// The walk found the split types, so their counts below mean something.
	for _, name := range []string{"api.Server", "cluster.Cluster", "reconcile.Loop", "experiments.Service", "gitsource.Source"} {
		if counts[name] == 0 {
			t.Fatalf("no methods counted for %s among %d types", name, len(counts))
		}
	}
	for name, n := range counts {
		if n > maxMethods {
			t.Errorf("%s declares %d methods, more than %d: move what is not its job to the part that owns it", name, n, maxMethods)
		}
	}
}

// TestReceiverType: pointer, value and generic receivers name their type;
// functions name none.
func TestReceiverType(t *testing.T) {
	counts, err := MethodCounts("testdata")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"shapes.T": 2, "shapes.G": 1, "shapes.P": 1}
	if len(counts) != len(want) {
		t.Fatalf("counts %v, want %v", counts, want)
	}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("%s: %d methods, want %d (all: %v)", k, counts[k], n, counts)
		}
	}
}
