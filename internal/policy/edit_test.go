package policy

import (
	"errors"
	"strings"
	"testing"
)

const editSrc = `# a policy people wrote
description = "old words"
default_action = "deny"
include = ["../_shared/office.toml"]

# health first
[[rules]]
name = "health"
priority = 100   # keep it first
action = "allow"
# the probe paths
match = '''
request.path == '/healthz'
'''

# admin: never
[[rules]]
name = "admin"
priority = 50
action = "deny"
match = "request.path.startsWith('/admin')"

[[tests]]
name = "probe"
expect = "allow"
[tests.request]
path = "/healthz"
`

// edited applies fn to an editor of src and returns the text, which must
// still parse.
func edited(t *testing.T, src string, fn func(f *FileEditor) error) string {
	t.Helper()
	f, err := NewFileEditor([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if err := fn(f); err != nil {
		t.Fatal(err)
	}
	out, err := f.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if _, errs := decodeFile("x/policy.toml", out, kindPolicy); len(errs) > 0 {
		t.Fatalf("edited text does not decode: %v\n%s", errs, out)
	}
	return string(out)
}

func rule(name string, prio int64, action Action, match string) Rule {
	return Rule{Name: name, Priority: prio, Action: action, Match: match}
}

// Only the lines of the keys that changed are written; comments, spacing
// and the other tables stay byte for byte.
func TestFileEditorChangesOnlyTheKeysThatChanged(t *testing.T) {
	old := rule("health", 100, ActionAllow, "request.path == '/healthz'")
	next := old
	next.Match, next.Description = "request.path in ['/healthz', '/livez']", "probes"
	got := edited(t, editSrc, func(f *FileEditor) error { return f.SetRule(old, next) })
	want := strings.Replace(editSrc, "request.path == '/healthz'\n'''\n",
		"request.path in ['/healthz', '/livez']\n'''\ndescription = \"probes\"\n", 1)
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}

	// A priority change keeps the comment of its line only when the line
	// is kept: the line is the key's, so it is rewritten whole.
	next = old
	next.Priority = 10
	got = edited(t, editSrc, func(f *FileEditor) error { return f.SetRule(old, next) })
	if want := strings.Replace(editSrc, "priority = 100   # keep it first\n", "priority = 10\n", 1); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestFileEditorRemovesATableWithItsComment(t *testing.T) {
	got := edited(t, editSrc, func(f *FileEditor) error { return f.Remove("rules", "admin") })
	want := strings.Replace(editSrc, "\n# admin: never\n[[rules]]\nname = \"admin\"\npriority = 50\naction = \"deny\"\n"+
		"match = \"request.path.startsWith('/admin')\"\n", "", 1)
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	f, _ := NewFileEditor([]byte(editSrc))
	for _, name := range []string{"health", "admin"} {
		if err := f.Remove("rules", name); err != nil {
			t.Fatal(err)
		}
	}
	if f.Empty() {
		t.Fatal("a file with a test left is not empty")
	}
	if err := f.Remove("tests", "probe"); err != nil || !f.Empty() {
		t.Fatalf("empty after removing everything: %v %v", f.Empty(), err)
	}
}

// A test whose request is a sub-table is written again whole when its
// request changes; its other keys change in place.
func TestFileEditorRewritesATableWrittenInParts(t *testing.T) {
	allow := "allow"
	old := Test{Name: "probe", Expect: ActionAllow, Request: map[string]any{"path": "/healthz"}}
	next := old
	next.Rule = &allow
	got := edited(t, editSrc, func(f *FileEditor) error { return f.SetTest(old, next) })
	if want := strings.Replace(editSrc, "expect = \"allow\"\n[tests.request]\n",
		"expect = \"allow\"\nrule = \"allow\"\n[tests.request]\n", 1); got != want {
		t.Fatalf("a new key goes before the sub-table; got\n%s", got)
	}
	next = old
	next.Request = map[string]any{"path": "/livez"}
	got = edited(t, editSrc, func(f *FileEditor) error { return f.SetTest(old, next) })
	want := strings.Replace(editSrc, "[[tests]]\nname = \"probe\"\nexpect = \"allow\"\n[tests.request]\npath = \"/healthz\"\n",
		"[[tests]]\nname = \"probe\"\nrequest = { path = \"/livez\" }\nexpect = \"allow\"\n", 1)
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestFileEditorSettingsAndAppends(t *testing.T) {
	got := edited(t, editSrc, func(f *FileEditor) error {
		f.SetSetting("description", "")
		f.SetSetting("on_error", "allow")
		f.AppendRule(rule("new", 300, ActionDeny, "request.path == '/new'"))
		return f.AppendTest(Test{Name: "new", Expect: ActionDeny, Request: map[string]any{"path": "/new", "port": float64(443)}})
	})
	want := strings.Replace(editSrc, "description = \"old words\"\n", "", 1)
	want = strings.Replace(want, "include = [\"../_shared/office.toml\"]\n", "include = [\"../_shared/office.toml\"]\non_error = \"allow\"\n", 1)
	want = strings.Replace(want, "match = \"request.path.startsWith('/admin')\"\n",
		"match = \"request.path.startsWith('/admin')\"\n\n[[rules]]\nname = \"new\"\npriority = 300\naction = \"deny\"\nmatch = \"request.path == '/new'\"\n", 1)
	want += "\n[[tests]]\nname = \"new\"\nrequest = { path = \"/new\", port = 443.0 }\nexpect = \"deny\"\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestFileEditorRefusesInlineArrays(t *testing.T) {
	src := "default_action = \"deny\"\nrules = [{ name = \"a\", priority = 1, action = \"deny\", match = \"true\" }]\n"
	f, err := NewFileEditor([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Remove("rules", "a"); !errors.Is(err, ErrNotEditable) {
		t.Fatalf("removing from an inline array: %v", err)
	}
	if !f.Has("rules", "a") || f.Has("rules", "b") {
		t.Fatal("Has")
	}
}

// FuzzFileEditor holds the editor to its promise on any file that
// decodes: changing or removing the first rule gives a file that still
// decodes, with that rule changed or gone and every other rule and test
// as it was.
func FuzzFileEditor(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s[0])
		f.Add(s[1])
	}
	f.Add(editSrc)
	f.Fuzz(func(t *testing.T, src string) {
		pf, errs := decodeFile("p/policy.toml", []byte(src), kindPolicy)
		if len(errs) > 0 || len(pf.rules) == 0 {
			return
		}
		old := pf.rules[0]
		next := old
		next.Match, next.Priority, next.Description = old.Match+" || false", old.Priority+1, "edited"
		for _, remove := range []bool{false, true} {
			ed, err := NewFileEditor([]byte(src))
			if err != nil {
				t.Fatalf("a file that decodes is refused: %v", err)
			}
			want := append([]Rule{}, pf.rules[1:]...)
			if remove {
				err = ed.Remove("rules", old.Name)
			} else {
				err, want = ed.SetRule(old, next), append(want, next)
			}
			if errors.Is(err, ErrNotEditable) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			out, err := ed.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			back, errs := decodeFile("p/policy.toml", out, kindPolicy)
			if len(errs) > 0 {
				t.Fatalf("the edited file does not decode: %v\n%s", errs, out)
			}
			if got, w := ruleSet(back.rules), ruleSet(want); got != w || len(back.tests) != len(pf.tests) {
				t.Fatalf("rules after the edit (remove %v):\n%s\nwant\n%s\nfile:\n%s", remove, got, w, out)
			}
		}
	})
}

// ruleSet renders rules without positions, sorted.
func ruleSet(rules []Rule) string {
	c := (&Policy{Rules: rules}).canonicalCopy()
	for i := range c.Rules {
		c.Rules[i].Pos = Pos{}
	}
	return string((&Policy{Rules: c.Rules}).Canonical())
}

// A key added at the end of one table and the removal of the next one
// start at the same place; both apply, whatever their order.
func TestFileEditorAddsToATableAndRemovesTheNext(t *testing.T) {
	src := "[[rules]]\nname = \"a\"\npriority = 1\naction = \"deny\"\nmatch = \"true\"\n\n" +
		"[[rules]]\nname = \"b\"\npriority = 2\naction = \"deny\"\nmatch = \"false\"\n"
	a := rule("a", 1, ActionDeny, "true")
	next := a
	next.Description = "first"
	got := edited(t, src, func(f *FileEditor) error {
		if err := f.Remove("rules", "b"); err != nil {
			return err
		}
		return f.SetRule(a, next)
	})
	if want := "[[rules]]\nname = \"a\"\npriority = 1\naction = \"deny\"\nmatch = \"true\"\ndescription = \"first\"\n"; got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
