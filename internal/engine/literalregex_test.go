package engine

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"

	"cel.dev/cel-go/cel"

	"github.com/policyrollout/reconciler/internal/policy"
)

// The patterns of the example policies that the word search must take.
const (
	scannerPattern   = `(?i)(sqlmap|nikto|nmap|masscan|zgrab|nuclei|dirbuster|gobuster|wpscan)`
	traversalPattern = `(?i)([.][.]|%2e%2e|%2e[.]|[.]%2e|%00)`
)

func TestWordMatcherShapes(t *testing.T) {
	product := strings.Repeat("(ab|cd)", 8) // 256 words
	for pattern, want := range map[string]bool{
		scannerPattern:             true,
		traversalPattern:           true,
		`(?i)(bot|crawler|spider)`: true,
		`abc`:                      true,
		`(?i)k`:                    true,
		`(?i)\x{212A}`:             true, // the parser makes it a folded 'K'
		`(?i)(a|b|k)`:              true, // a character class
		`(?:ab|cd)(?i:ef)`:         true,
		`a\.b`:                     true,
		`^abc`:                     false,
		`abc$`:                     false,
		`\babc`:                    false,
		`(?i)(bot|bots)`:           true, // factored into bot(?:(?:)|s)
		`a|`:                       true, // matches every string
		`a+`:                       false,
		`ab?`:                      false,
		`a.b`:                      false,
		`[a-z]+`:                   false,
		`café`:                     false,
		`(?i)é`:                    false,
		product:                    false,
	} {
		if _, got := newWordMatcher(pattern); got != want {
			t.Errorf("%q: taken %v, want %v", pattern, got, want)
		}
	}
}

// TestWordMatcherEquivalence compares the word search with RE2 over random
// patterns of the accepted shape (folded or not, grouped, with classes and
// escaped punctuation, overlapping words) and random inputs (mixed case,
// the non-ASCII folds of k and s, other non-ASCII, empty).
func TestWordMatcherEquivalence(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	taken := 0
	for range 2000 {
		pattern, words := genWordPattern(r)
		m, ok := newWordMatcher(pattern)
		if !ok {
			continue
		}
		taken++
		re := regexp.MustCompile(pattern)
		for range 50 {
			in := genWordInput(r, words)
			if got, want := m.match(in), re.MatchString(in); got != want {
				t.Fatalf("%q on %q: word search %v, regexp %v", pattern, in, got, want)
			}
		}
	}
	if taken < 1500 {
		t.Errorf("only %d of 2000 generated patterns took the word search", taken)
	}
}

// genWordPattern returns a pattern that is a list of words, and the words.
func genWordPattern(r *rand.Rand) (string, []string) {
	words := make([]string, 1+r.IntN(8))
	for i := range words {
		words[i] = genWord(r, "abkKsSe.%2-", 1+r.IntN(5))
		if i > 0 && r.IntN(4) == 0 { // overlapping words
			words[i] = words[i-1][:1+r.IntN(len(words[i-1]))] + words[i]
		}
	}
	parts := make([]string, len(words))
	for i, w := range words {
		parts[i] = regexp.QuoteMeta(w)
		switch r.IntN(6) {
		case 0:
			parts[i] = "[" + regexp.QuoteMeta(w[:1]) + "]" + regexp.QuoteMeta(w[1:])
		case 1:
			parts[i] = "(?i:" + parts[i] + ")"
		case 2:
			parts[i] = "(?-i:" + parts[i] + ")"
		}
	}
	pattern := strings.Join(parts, "|")
	switch r.IntN(3) {
	case 0:
		pattern = "(" + pattern + ")"
	case 1:
		pattern = "(?:" + pattern + ")"
	}
	if r.IntN(2) == 0 {
		pattern = "(?i)" + pattern
	}
	return pattern, words
}

func genWord(r *rand.Rand, alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

// genWordInput mixes the words, in random case, with other text.
func genWordInput(r *rand.Rand, words []string) string {
	pieces := []string{"", "x", "K", "k", "S", "ſ", "é", "é", "..", "%2E", "Mozilla/5.0 ", "\x00", "\xff"}
	var b strings.Builder
	for range r.IntN(6) {
		if r.IntN(2) == 0 {
			w := words[r.IntN(len(words))]
			if r.IntN(3) == 0 {
				w = w[:r.IntN(len(w)+1)]
			}
			b.WriteString(randomCase(r, w))
		} else {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
	}
	return b.String()
}

func randomCase(r *rand.Rand, s string) string {
	b := []byte(s)
	for i := range b {
		if r.IntN(2) == 0 {
			b[i] = byte(strings.ToUpper(string(b[i]))[0])
		}
	}
	return string(b)
}

// FuzzWordMatcher: for any pattern the word search accepts, it answers as
// RE2 does on any input. Seeds: testdata/fuzz/FuzzWordMatcher.
func FuzzWordMatcher(f *testing.F) {
	f.Add(scannerPattern, "Mozilla/5.0 (compatible; Nmap Scripting Engine)")
	f.Add(traversalPattern, "/a/%2E%2e/b")
	f.Add(`(?i)(kit|sk)`, "\u212Ait ſK")
	f.Add(`(?i)(a|b|k)`, "")
	f.Fuzz(func(t *testing.T, pattern, in string) {
		m, ok := newWordMatcher(pattern)
		if !ok {
			return
		}
		if got, want := m.match(in), regexp.MustCompile(pattern).MatchString(in); got != want {
			t.Fatalf("%q on %q: word search %v, regexp %v", pattern, in, got, want)
		}
	})
}

// TestLiteralRegexTaken: compiling the example policies plans their
// block-list patterns with the word search, and other patterns without.
func TestLiteralRegexTaken(t *testing.T) {
	repo, err := policy.Load(os.DirFS("../../policies.example"), policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range repo.Policies {
		if p.Name != "edge-firewall" {
			continue
		}
		before := literalRegexPlans.Load()
		mustCompile(t, p, DefaultOptions())
		if literalRegexPlans.Load() == before {
			t.Errorf("%s: no matches() call planned with the word search", p.Name)
		}
	}
	before := literalRegexPlans.Load()
	mustCompile(t, testPolicy("allow", "deny", rule("r", 1, "deny", `request.path.matches('^/a/[0-9]+$')`)), DefaultOptions())
	if n := literalRegexPlans.Load() - before; n != 0 {
		t.Errorf("an anchored pattern was planned with the word search %d times", n)
	}
}

// TestLiteralRegexCostUnchanged: with and without the word search, a
// matches() call gives the same value and the same actual cost, so that
// decisions under the run-time cost limit do not change; both overloads.
func TestLiteralRegexCostUnchanged(t *testing.T) {
	env, err := celEnv()
	if err != nil {
		t.Fatal(err)
	}
	inputs := []string{"", "sqlmap/1.7", "Mozilla/5.0 (X11; Linux x86_64)", "NMAP \u212A", "/a/..%2f", strings.Repeat("a", 10_000)}
	for _, src := range []string{
		`request.headers['user-agent'].matches('` + scannerPattern + `')`,
		`matches(request.path, '` + traversalPattern + `')`,
		`request.path.matches('^/a/[0-9]+$')`,
	} {
		a, iss := env.Compile(src)
		if iss.Err() != nil {
			t.Fatal(iss.Err())
		}
		opts := cel.EvalOptions(cel.OptOptimize, cel.OptTrackCost)
		plain, err := env.Program(a, opts)
		if err != nil {
			t.Fatal(err)
		}
		words, err := env.Program(a, opts, literalRegexes)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range inputs {
			req := &Request{Path: in, Headers: PairsOf(map[string]string{"user-agent": in})}
			o1, d1, e1 := plain.Eval((*activation)(req))
			o2, d2, e2 := words.Eval((*activation)(req))
			if o1 != o2 || fmt.Sprint(e1) != fmt.Sprint(e2) || *d1.ActualCost() != *d2.ActualCost() {
				t.Errorf("%s on %.20q: regexp %v, %v, cost %d; word search %v, %v, cost %d",
					src, in, o1, e1, *d1.ActualCost(), o2, e2, *d2.ActualCost())
			}
		}
	}
}

// BenchmarkLiteralRegex is the scanner rule of the edge-firewall example
// on the user agents of its sample traffic, planned with cel-go's regexp
// and with the word search.
func BenchmarkLiteralRegex(b *testing.B) {
	env, err := celEnv()
	if err != nil {
		b.Fatal(err)
	}
	a, iss := env.Compile(`request.headers['user-agent'].matches('` + scannerPattern + `')`)
	if iss.Err() != nil {
		b.Fatal(iss.Err())
	}
	var reqs []*Request
	for _, r := range sampleTraffic(b) {
		if _, ok := r.Headers.Get("user-agent"); ok {
			reqs = append(reqs, r)
		}
	}
	for _, v := range []struct {
		name string
		opts []cel.ProgramOption
	}{
		{"regexp", []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}},
		{"words", []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize), literalRegexes}},
	} {
		prg, err := env.Program(a, v.opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(v.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				_, _, _ = prg.Eval((*activation)(reqs[i%len(reqs)]))
			}
		})
	}
}
