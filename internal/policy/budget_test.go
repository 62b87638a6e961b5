package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
)

// TestHostileFixtures loads each attack of testdata/hostile (issue 16,
// attack 1, at a size worth keeping in git) as a policy.toml: each is a
// problem of that file, at the line where the nesting goes too deep.
func TestHostileFixtures(t *testing.T) {
	paths, err := filepath.Glob("testdata/hostile/*.toml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			_, err = LoadPolicy(fstest.MapFS{"p/policy.toml": {Data: data}}, "p", LoadOptions{})
			checkErrs(t, err, []wantErr{{File: "p/policy.toml", Line: -1, Sub: fmt.Sprintf("nested more than %d levels deep", MaxNesting)}})
			if l := errList(t, err); l[0].Line < 2 {
				t.Errorf("problem at line %d, want the line of the nesting: %v", l[0].Line, l)
			}
		})
	}
}

// maxDecodeAlloc is what decoding one file within the budgets may
// allocate: the worst case (at-the-limits) measured 14 MiB.
const maxDecodeAlloc = 64 << 20

// bomb is a generated attack too big to keep in git.
type bomb struct {
	name string
	data string
	want string
}

func bombs() []bomb {
	deep := func(open, close string, n int) string {
		return strings.Repeat(open, n) + "1" + strings.Repeat(close, n)
	}
	// Chains at the depth limit: each costs about sum(d*d) for d up to it.
	chain := deep("{a=", "}", MaxNesting-1)
	perChain := 0
	for d := 1; d <= MaxNesting; d++ {
		perChain += 2 * d * d
	}
	var many, tooMany strings.Builder
	for i := 0; tooMany.Len() < MaxFileBytes-200; i++ {
		fmt.Fprintf(&tooMany, "x%d = %s\n", i, chain)
		if (i+1)*perChain < MaxParseWork {
			fmt.Fprintf(&many, "x%d = %s\n", i, chain)
		}
	}
	return []bomb{
		// 5 MB of '[' overflowed the parser's stack: fatal, not a panic.
		{"arrays-5MB", "description = " + strings.Repeat("[", 2_500_000) + strings.Repeat("]", 2_500_000), "over the 1048576 byte limit"},
		{"arrays-under-size", "description = " + deep("[", "]", 400_000), "nested more than"},
		// 80 KB of nested inline tables passed 15 GB.
		{"inline-tables-80KB", "x = " + deep("{a=", "}", 20_000), "nested more than"},
		{"dotted-key-20KB", "x." + strings.Repeat("a.", 10_000) + "b = 1", "nested more than"},
		{"table-header-20KB", "[" + strings.Repeat("a.", 10_000) + "b]", "nested more than"},
		// A file at the size limit full of chains at the depth limit
		// allocated 700 MiB.
		{"deep-chains-1MB", tooMany.String(), "too many deeply nested keys"},
		// The most the budgets let through: as many chains as the parse
		// work allows. It parses (and fails as a policy).
		{"at-the-limits", many.String(), `unknown key "x0"`},
	}
}

// TestTOMLBombs decodes generated attacks (issue 16, attack 1): each is a
// problem of its file, and the allocation stays bounded. The bound is on
// bytes allocated, which does not depend on the machine's speed.
func TestTOMLBombs(t *testing.T) {
	for _, b := range bombs() {
		t.Run(b.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, errs := decodeFile("p/policy.toml", []byte(b.data), kindPolicy)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes in, %d MiB allocated", len(b.data), alloc>>20)
			if !hasErr(errs, wantErr{File: "p/policy.toml", Line: -1, Sub: b.want}) {
				t.Fatalf("want a problem with %q, got %v", b.want, errs)
			}
			if limit := uint64(maxDecodeAlloc); alloc > limit {
				t.Errorf("decoding allocated %d MiB, over the %d MiB this test allows", alloc>>20, limit>>20)
			}
		})
	}
}

// TestBudgetKeepsRealFiles: what looks like nesting inside strings and
// comments does not count, and a large ordinary policy is within budget.
func TestBudgetKeepsRealFiles(t *testing.T) {
	brackets := strings.Repeat("[{", 100)
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\ndefault_action = \"deny\"\ndescription = '''\n%s\n'''\n", brackets, brackets)
	fmt.Fprintf(&b, "[[tests]]\nname = \"t\"\nexpect = \"deny\"\nrequest = { headers = { \"a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q\" = \"%s\" }, attributes = {\n  a = { b = { c = [1, { d = 2 }] } } } }\n", brackets)
	for i := 0; b.Len() < MaxFileBytes-300; i++ {
		fmt.Fprintf(&b, "[[rules]]\nname = \"r%d\" # %s\npriority = %d\naction = \"deny\"\nmatch = \"request.path == '/%s' && request.method == \\\"GET\\\"\"\n", i, brackets[:8], i, brackets[:20])
	}
	pf, errs := decodeFile("p/policy.toml", []byte(b.String()), kindPolicy)
	if len(errs) > 0 {
		t.Fatalf("a %d byte policy: %v", b.Len(), errs)
	}
	t.Logf("%d rules in %d bytes", len(pf.rules), b.Len())
}

// FuzzNestingScanner holds the scan to its promise: a file it lets through
// never decodes to values nested deeper than the budget allows (a table
// header's parts and arrays of tables each add a level to the decoded
// value, hence the factor two).
func FuzzNestingScanner(f *testing.F) {
	f.Add([]byte("a = [[1], {b = {c.d = [2]}}]\n[x.y]\nz = '''[['''\n"))
	f.Add([]byte("[[a.b]]\nc = { d = [ { e = 1 } ] }\n"))
	for _, b := range bombs()[2:5] {
		f.Add([]byte(b.data[:200]))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, msg := checkBudget(data); msg != "" {
			return
		}
		doc, err := parseTOML(data)
		if err != nil {
			return
		}
		if d := valueDepth(doc); d > 2*MaxNesting+1 {
			t.Fatalf("the scan let through a document %d levels deep", d)
		}
	})
}

func valueDepth(v any) int {
	deepest := 0
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			deepest = max(deepest, valueDepth(e))
		}
	case []map[string]any:
		for _, e := range v {
			deepest = max(deepest, valueDepth(e))
		}
	case []any:
		for _, e := range v {
			deepest = max(deepest, valueDepth(e))
		}
	default:
		return 0
	}
	return deepest + 1
}
