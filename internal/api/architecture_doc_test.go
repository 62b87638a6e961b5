package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// archRoutesHeading is the section of docs/architecture.md whose table
// lists every route with its role and the handler that serves it.
const archRoutesHeading = "## The HTTP API: every route, its role and its handler"

// archRow is one row of that table.
type archRow struct {
	method, pattern, role, handler, file string
}

// TestArchitectureDocListsEveryRoute: the routes table of
// docs/architecture.md and the route table (roles.go) are the same list,
// with the same roles, and each row names a type that has methods in the
// file it names, so that a newcomer who looks up an endpoint there finds
// the code that serves it.
func TestArchitectureDocListsEveryRoute(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := archRoutes(t, string(b))
	if len(rows) < 20 {
		t.Fatalf("read %d rows under %q; the parser below lost its way", len(rows), archRoutesHeading)
	}
	byKey := map[string]archRow{}
	for _, row := range rows {
		k := row.method + " " + row.pattern
		if _, dup := byKey[k]; dup {
			t.Errorf("docs/architecture.md lists %s twice", k)
		}
		byKey[k] = row
	}
	listed := map[string]bool{}
	for _, rule := range routeTable {
		k := docMethod(rule.Method) + " " + rule.Pattern
		listed[k] = true
		row, ok := byKey[k]
		if !ok {
			t.Errorf("the route table has %s (%s), which docs/architecture.md does not list", k, rule.Example)
			continue
		}
		if want := docRole(rule); row.role != want {
			t.Errorf("docs/architecture.md gives %s the role %q; the route table gives %q", k, row.role, want)
		}
	}
	for k := range byKey {
		if !listed[k] {
			t.Errorf("docs/architecture.md lists %s, which the route table has not", k)
		}
	}
	types := receiversByFile(t)
	for _, row := range rows {
		if types[row.file][row.handler] == 0 {
			t.Errorf("docs/architecture.md says %s %s is served by %s in %s, which has no method of that type",
				row.method, row.pattern, row.handler, row.file)
		}
	}
}

// TestRoutePatternsMatchTheirExamples: each line of the route table shows
// the pattern its example is a case of, so the pattern the docs show is
// the path the rule covers.
func TestRoutePatternsMatchTheirExamples(t *testing.T) {
	t.Parallel()
	for _, rule := range routeTable {
		if rule.Pattern == anyOtherPath {
			continue
		}
		re := regexp.MustCompile("^" + patternRegexp(rule.Pattern) + "$")
		if !re.MatchString(rule.Example) {
			t.Errorf("example %s is not a case of pattern %s", rule.Example, rule.Pattern)
		}
	}
}

var wildcard = regexp.MustCompile(`\\\{[a-z]+\\\}`)

// patternRegexp turns "/v1/policies/{policy}:authorize/{path}" into a
// regexp: {path} and {asset} may hold slashes, other names one segment.
func patternRegexp(p string) string {
	return wildcard.ReplaceAllStringFunc(regexp.QuoteMeta(p), func(w string) string {
		if w == `\{path\}` || w == `\{asset\}` {
			return `.*`
		}
		return `[^/:]+`
	})
}

func docMethod(m string) string {
	if m == "" {
		return "any"
	}
	return m
}

func docRole(rule routeRule) string {
	if rule.class == classDecision {
		return "decision_role"
	}
	return rule.role.String()
}

// archRoutes reads the table under archRoutesHeading. A cell's first
// word is what is compared ("any (POST)" is "any", "none (HMAC)" is
// "none"); backticks are dropped.
func archRoutes(t *testing.T, doc string) []archRow {
	t.Helper()
	_, section, ok := strings.Cut(doc, "\n"+archRoutesHeading+"\n")
	if !ok {
		t.Fatalf("docs/architecture.md has no section %q", archRoutesHeading)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	var rows []archRow
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| Method ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 5 {
			t.Fatalf("row %q has %d cells, want 5", line, len(cells))
		}
		for i, c := range cells {
			cells[i] = strings.Trim(c, "`")
		}
		first := func(s string) string { f, _, _ := strings.Cut(s, " "); return f }
		rows = append(rows, archRow{method: first(cells[0]), pattern: cells[1], role: first(cells[2]),
			handler: cells[3], file: cells[4]})
	}
	return rows
}

// maxMethods is the most methods one type of this package may have: the
// API is a core and one handler per resource family, none of them a god
// type again.
const maxMethods = 40

// TestNoTypeOverMaxMethods: no type of the package has more than
// maxMethods methods (each family's handler stays small; a new family
// gets a handler of its own).
func TestNoTypeOverMaxMethods(t *testing.T) {
	t.Parallel()
	count := map[string]int{}
	for _, types := range receiversByFile(t) {
		for typ, n := range types {
			count[typ] += n
		}
	}
	for typ, n := range count {
		if n > maxMethods {
			t.Errorf("type %s has %d methods, more than %d: give the family it serves a handler of its own", typ, n, maxMethods)
		}
	}
	if count["Server"] == 0 || count["decisions"] == 0 {
		t.Fatalf("counted %v; the parser below lost its way", count)
	}
}

// receiversByFile maps each non-test file of this package to the types
// its methods are declared on, with how many each.
func receiversByFile(t *testing.T) map[string]map[string]int {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]int{}
	fs := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fs, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = map[string]int{}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil {
				continue
			}
			typ := fd.Recv.List[0].Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				out[name][id.Name]++
			}
		}
	}
	return out
}
