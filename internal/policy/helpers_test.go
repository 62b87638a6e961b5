package policy

import (
	"errors"
	"strings"
	"testing"
)

// errList extracts the ErrorList from err, failing the test when err is
// something else.
func errList(t *testing.T, err error) ErrorList {
	t.Helper()
	var l ErrorList
	if !errors.As(err, &l) {
		t.Fatalf("error %v (%T) is not an ErrorList", err, err)
	}
	return l
}

// wantErr describes one expected problem; Line -1 means any line.
type wantErr struct {
	File string
	Line int
	Sub  string
}

// hasErr reports whether l holds a problem matching w.
func hasErr(l ErrorList, w wantErr) bool {
	for _, e := range l {
		if e.File == w.File && (w.Line < 0 || e.Line == w.Line) && strings.Contains(e.Msg, w.Sub) {
			return true
		}
	}
	return false
}

func checkErrs(t *testing.T, err error, want []wantErr) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("unexpected error:\n%v", err)
		}
		return
	}
	l := errList(t, err)
	for _, w := range want {
		if !hasErr(l, w) {
			t.Errorf("missing error %s:%d: …%s…; got:\n%v", w.File, w.Line, w.Sub, l)
		}
	}
}

// descriptions maps rule name → description, which the merge testdata use
// to say which file a rule came from.
func descriptions(p *Policy) map[string]string {
	out := map[string]string{}
	for _, r := range p.Rules {
		out[r.Name] = r.Description
	}
	return out
}

func ruleNames(p *Policy) []string {
	var out []string
	for _, r := range p.Rules {
		out = append(out, r.Name)
	}
	return out
}
