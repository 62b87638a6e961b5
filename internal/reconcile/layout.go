package reconcile

import (
	"bytes"
	"fmt"
	"maps"
	"path"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/policy"
)

// An API experiment holds a merged policy, while main may spread that
// policy over policy.toml, includes of shared fragments, fragments of its
// own and test files. Committing writes only what changed where it can:
// a rule or test the experiment changed or dropped is changed or removed
// in the fragment or test file of the directory that defines it
// (patchFragments; that file is re-encoded, keeping its leading
// comments), the other files stay as they are, and policy.toml is
// rewritten with its leading comment block, its include and merge keys
// kept and only the rules and tests no other file gives. When that does
// not load back to the experiment's etag (the experiment changed or
// dropped a rule that a shared include defines, which other policies
// use too), the directory is flattened into one generated policy.toml:
// the only layout that is sure to hold the experiment, which loses the
// includes (docs/git.md says so).

// policyDir is the new content of pol's directory for p, relative to it,
// given the policies root main holds (live; nil or without the policy for
// a new one).
func (l *Loop) policyDir(live map[string][]byte, pol string, p *policy.Policy) (map[string][]byte, error) {
	cur := map[string][]byte{}
	for name, data := range live {
		if rel, ok := strings.CutPrefix(name, pol+"/"); ok {
			cur[rel] = data
		}
	}
	if toml, ok := cur["policy.toml"]; ok {
		if files, ok := l.keepLayout(live, cur, toml, pol, p); ok {
			return files, nil
		}
	}
	data, err := p.MarshalTOML()
	if err != nil {
		return nil, err
	}
	return map[string][]byte{"policy.toml": data}, nil
}

// keepLayout is cur with policy.toml rewritten as described above, and
// false when that tree does not give p.
func (l *Loop) keepLayout(live, cur map[string][]byte, old []byte, pol string, p *policy.Policy) (map[string][]byte, bool) {
	head, ok := layoutHead(old)
	if !ok {
		return nil, false
	}
	// What the other files give: the tree with a policy.toml of settings.
	own := *p
	own.Rules, own.Tests = nil, nil
	others, ok := l.loadWith(live, pol, cur, head, &own)
	if !ok {
		return nil, false
	}
	if patched, changed := patchFragments(pol, cur, others, p); changed {
		cur = patched
		if got, ok := l.loadDir(live, pol, cur); ok && got.Etag() == p.Etag() {
			return cur, true // policy.toml itself needs no change
		}
		if others, ok = l.loadWith(live, pol, cur, head, &own); !ok {
			return nil, false
		}
	}
	for _, r := range p.Rules {
		if !hasRule(others.Rules, r) {
			own.Rules = append(own.Rules, r)
		}
	}
	for _, t := range p.Tests {
		if !hasTest(others.Tests, t) {
			own.Tests = append(own.Tests, t)
		}
	}
	got, ok := l.loadWith(live, pol, cur, head, &own)
	if !ok || got.Etag() != p.Etag() {
		return nil, false
	}
	out := maps.Clone(cur)
	out["policy.toml"], _ = policyTOML(head, &own)
	return out, true
}

// layoutHead is what a rewritten policy.toml keeps of the old one: its
// leading comment block, and its include and merge keys.
func layoutHead(old []byte) ([]byte, bool) {
	var keys struct {
		Include []string `toml:"include"`
		Merge   string   `toml:"merge"`
	}
	if _, err := toml.Decode(string(old), &keys); err != nil {
		return nil, false
	}
	var head bytes.Buffer
	head.Write(leadingComments(old))
	if len(keys.Include) > 0 {
		inc, err := toml.Marshal(map[string]any{"include": keys.Include})
		if err != nil {
			return nil, false
		}
		head.Write(inc)
	}
	if keys.Merge != "" {
		fmt.Fprintf(&head, "merge = %q\n", keys.Merge)
	}
	return head.Bytes(), true
}

// policyTOML is head followed by p in TOML.
func policyTOML(head []byte, p *policy.Policy) ([]byte, error) {
	body, err := p.MarshalTOML()
	if err != nil {
		return nil, err
	}
	return append(append([]byte{}, head...), body...), nil
}

// loadWith loads pol from live with its directory replaced by cur and
// policy.toml by head + p.
func (l *Loop) loadWith(live map[string][]byte, pol string, cur map[string][]byte, head []byte, p *policy.Policy) (*policy.Policy, bool) {
	data, err := policyTOML(head, p)
	if err != nil {
		return nil, false
	}
	dir := maps.Clone(cur)
	dir["policy.toml"] = data
	return l.loadDir(live, pol, dir)
}

// loadDir loads pol from live with its directory replaced by dir.
func (l *Loop) loadDir(live map[string][]byte, pol string, dir map[string][]byte) (*policy.Policy, bool) {
	tree := make(map[string][]byte, len(live))
	for k, v := range live {
		if !strings.HasPrefix(k, pol+"/") {
			tree[k] = v
		}
	}
	for k, v := range dir {
		tree[path.Join(pol, k)] = v
	}
	got, err := policy.LoadPolicy(gitsource.FilesFS(tree), pol, l.cfg.LoadOptions)
	return got, err == nil
}

func hasRule(rules []policy.Rule, r policy.Rule) bool {
	for _, o := range rules {
		if o.Name == r.Name && o.Priority == r.Priority && o.Action == r.Action && o.Match == r.Match &&
			o.Description == r.Description {
			return true
		}
	}
	return false
}

func hasTest(tests []policy.Test, t policy.Test) bool {
	one := func(t policy.Test) []byte { return (&policy.Policy{Tests: []policy.Test{t}}).Canonical() }
	want := one(t)
	for _, o := range tests {
		if o.Name == t.Name && bytes.Equal(one(o), want) {
			return true
		}
	}
	return false
}
