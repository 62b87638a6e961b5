package archtest

import (
	"testing"
)

// maxMethods is the most methods a type of internal/ may declare.
const maxMethods = 40

// stillOver are the types not yet split, with the count they may not
// exceed: a split deletes its entry, and none is ever added.
var stillOver = map[string]int{
	"api.Server": 121,
}

// TestTypesStayUnderFortyMethods: no type of internal/ declares more than
// maxMethods methods, and the ones not yet split do not grow.
func TestTypesStayUnderFortyMethods(t *testing.T) {
	counts, err := MethodCounts("..")
	if err != nil {
		t.Fatal(err)
	}
	// The walk found the split types, so their counts below mean something.
	for _, name := range []string{"reconcile.Loop", "experiments.Service", "gitsource.Source"} {
		if counts[name] == 0 {
			t.Fatalf("no methods counted for %s among %d types", name, len(counts))
		}
	}
	for name, n := range counts {
		limit, over := stillOver[name]
		if !over {
			limit = maxMethods
		}
		if n > limit {
			t.Errorf("%s declares %d methods, more than %d: move what is not its job to the part that owns it", name, n, limit)
		}
	}
	for name, limit := range stillOver {
		if counts[name] <= maxMethods {
			t.Errorf("%s has %d methods now (was up to %d): delete its entry from stillOver", name, counts[name], limit)
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
