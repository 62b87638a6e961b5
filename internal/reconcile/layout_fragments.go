package reconcile

import (
	"bytes"
	"maps"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/policyrollout/reconciler/internal/policy"
)

// patchFragments rewrites, in cur (pol's directory), the fragments and
// test files of the policy's own directory that define a rule or test the
// experiment p changed or dropped: that entry is replaced by p's version
// or removed, and the rest of the file (its leading comments, other
// entries, merge key) stays; a file left empty is deleted. others is the policy as those files give it
// (Pos names each entry's file). Entries of includes outside the directory
// are never written: a shared fragment belongs to other policies too.
// It reports whether any file changed.
func patchFragments(pol string, cur map[string][]byte, others, p *policy.Policy) (map[string][]byte, bool) {
	out := maps.Clone(cur)
	changed := false
	for _, r := range others.Rules {
		want, keep := findRule(p.Rules, r.Name)
		if keep && hasRule([]policy.Rule{r}, want) {
			continue
		}
		entry := map[string]any(nil)
		if keep {
			entry = ruleEntry(want)
		}
		changed = patchEntry(out, pol, r.Pos.File, "rules", r.Name, entry) || changed
	}
	for _, t := range others.Tests {
		want, keep := findTest(p.Tests, t.Name)
		if keep && hasTest([]policy.Test{t}, want) {
			continue
		}
		entry := map[string]any(nil)
		if keep {
			entry = testEntry(want)
		}
		changed = patchEntry(out, pol, t.Pos.File, "tests", t.Name, entry) || changed
	}
	return out, changed
}

// patchEntry replaces (or, with entry nil, removes) the element named
// name of the array of tables key in the file (a path from the policies
// root) when it is one of pol's own files other than policy.toml.
func patchEntry(files map[string][]byte, pol, file, key, name string, entry map[string]any) bool {
	rel, ok := strings.CutPrefix(file, pol+"/")
	if !ok || rel == "policy.toml" || files[rel] == nil {
		return false
	}
	var doc map[string]any
	if _, err := toml.Decode(string(files[rel]), &doc); err != nil {
		return false
	}
	list, _ := doc[key].([]map[string]any)
	next := make([]map[string]any, 0, len(list))
	found := false
	for _, el := range list {
		if el["name"] != name {
			next = append(next, el)
			continue
		}
		found = true
		if entry != nil {
			next = append(next, entry)
		}
	}
	if !found {
		return false
	}
	doc[key] = next
	if len(next) == 0 {
		delete(doc, key)
	}
	if len(doc) == 0 || len(doc) == 1 && doc["merge"] != nil {
		delete(files, rel) // nothing left in it
		return true
	}
	var buf bytes.Buffer
	buf.Write(leadingComments(files[rel]))
	if err := toml.NewEncoder(&buf).Encode(doc); err != nil {
		return false
	}
	files[rel] = buf.Bytes()
	return true
}

// leadingComments is the comment block (and blank lines) a file starts
// with.
func leadingComments(data []byte) []byte {
	var head bytes.Buffer
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			break
		}
		head.WriteString(line)
	}
	return head.Bytes()
}

func findRule(rules []policy.Rule, name string) (policy.Rule, bool) {
	for _, r := range rules {
		if r.Name == name {
			return r, true
		}
	}
	return policy.Rule{}, false
}

func findTest(tests []policy.Test, name string) (policy.Test, bool) {
	for _, t := range tests {
		if t.Name == name {
			return t, true
		}
	}
	return policy.Test{}, false
}

func ruleEntry(r policy.Rule) map[string]any {
	m := map[string]any{"name": r.Name, "priority": r.Priority, "action": string(r.Action), "match": r.Match}
	if r.Description != "" {
		m["description"] = r.Description
	}
	return m
}

func testEntry(t policy.Test) map[string]any {
	m := map[string]any{"name": t.Name, "request": t.Request, "expect": string(t.Expect)}
	if t.Rule != nil {
		m["rule"] = *t.Rule
	}
	return m
}
