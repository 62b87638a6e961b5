package reconcile

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// An API experiment holds a merged policy, while main may spread that
// policy over policy.toml, includes of shared fragments, fragments of its
// own and test files. Committing it edits the text of the files that
// define what changed, and nothing else (issue 24): a changed rule or test
// has the keys that changed rewritten in the file whose definition wins
// the merge; a dropped one is removed from every file of the directory
// that defines it; a new one is appended to policy.toml; a changed
// policy-level key is rewritten in policy.toml. Every other byte stays:
// comments, includes, key order, quoting, the other tables and files. A
// fragment left without rules or tests is deleted.
//
// What cannot be written that way is refused, never flattened: a change
// or drop of a rule or test that a shared include (outside the policy's
// directory) defines, since that file belongs to other policies too, and
// a table written as an inline array. The result must load back to the
// experiment's etag, else the commit is refused too.

// policyDir is the new content of pol's directory for p, relative to it,
// given the policies root main holds (live; nil or without the policy for
// a new one). Refusals are *preview.Error (FAILED_PRECONDITION).
func (cm *Committer) policyDir(live map[string][]byte, pol string, p *policy.Policy) (map[string][]byte, error) {
	cur := map[string][]byte{}
	for name, data := range live {
		if rel, ok := strings.CutPrefix(name, pol+"/"); ok {
			cur[rel] = data
		}
	}
	if _, ok := cur["policy.toml"]; !ok {
		data, err := p.MarshalTOML() // a new policy: nothing to keep
		if err != nil {
			return nil, err
		}
		return map[string][]byte{"policy.toml": data}, nil
	}
	old, err := cm.loadDir(live, pol, cur)
	if err != nil {
		return nil, &preview.Error{Code: preview.FailedPrecondition, Msg: fmt.Sprintf(
			"%s on the live branch does not load, so it cannot be edited: %v", pol, err)}
	}
	ed := &dirEditor{pol: pol, live: live, cur: cur, files: map[string]*policy.FileEditor{}}
	if err := ed.apply(old, p); err != nil {
		return nil, &preview.Error{Code: preview.FailedPrecondition, Msg: err.Error()}
	}
	out, err := ed.result()
	if err != nil {
		return nil, &preview.Error{Code: preview.FailedPrecondition, Msg: err.Error()}
	}
	if got, err := cm.loadDir(live, pol, out); err != nil || got.Etag() != p.Etag() {
		return nil, &preview.Error{Code: preview.FailedPrecondition, Msg: fmt.Sprintf(
			"the files of %s, edited in place, do not give the experiment (%v): change them on a branch instead", pol, err)}
	}
	return out, nil
}

// loadDir loads pol from live with its directory replaced by dir.
func (cm *Committer) loadDir(live map[string][]byte, pol string, dir map[string][]byte) (*policy.Policy, error) {
	tree := make(map[string][]byte, len(live)+len(dir))
	for k, v := range live {
		if !strings.HasPrefix(k, pol+"/") {
			tree[k] = v
		}
	}
	for k, v := range dir {
		tree[path.Join(pol, k)] = v
	}
	return policy.LoadPolicy(gitsource.FilesFS(tree), pol, cm.cfg.LoadOptions)
}

// dirEditor edits the files of one policy directory (cur, by path
// relative to it); live is the whole policies root, for includes.
type dirEditor struct {
	pol   string
	live  map[string][]byte
	cur   map[string][]byte
	files map[string]*policy.FileEditor // by path from the root
}

// editor is the editor of file (a path from the root).
func (d *dirEditor) editor(file string) (*policy.FileEditor, error) {
	if f, ok := d.files[file]; ok {
		return f, nil
	}
	data := d.live[file]
	if rel, ok := d.own(file); ok {
		data = d.cur[rel]
	}
	f, err := policy.NewFileEditor(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	d.files[file] = f
	return f, nil
}

// own is file relative to the policy's directory, false when it is not
// in it (a shared include).
func (d *dirEditor) own(file string) (string, bool) {
	return strings.CutPrefix(file, d.pol+"/")
}

func (d *dirEditor) main() string { return d.pol + "/policy.toml" }

// apply edits the files so that they give p instead of old.
func (d *dirEditor) apply(old, p *policy.Policy) error {
	f, err := d.editor(d.main())
	if err != nil {
		return err
	}
	for _, s := range [][3]string{
		{"description", old.Description, p.Description},
		{"default_action", string(old.DefaultAction), string(p.DefaultAction)},
		{"group", old.Group, p.Group},
		{"on_error", string(old.OnError), string(p.OnError)},
	} {
		if s[1] != s[2] {
			f.SetSetting(s[0], s[2])
		}
	}
	if err := d.rules(old, p); err != nil {
		return err
	}
	return d.tests(old, p)
}

// rules edits the rules that differ between old and p.
func (d *dirEditor) rules(old, p *policy.Policy) error {
	next := map[string]policy.Rule{}
	for _, r := range p.Rules {
		next[r.Name] = r
	}
	for _, r := range old.Rules {
		n, kept := next[r.Name]
		delete(next, r.Name)
		switch {
		case !kept:
			if err := d.remove(old.Sources, "rules", "rule", r.Name); err != nil {
				return err
			}
		case !sameRule(r, n):
			f, err := d.definedIn(r.Pos.File, "rule", r.Name)
			if err != nil {
				return err
			}
			if err := f.SetRule(r, n); err != nil {
				return fmt.Errorf("%s: %w", r.Pos.File, err)
			}
		}
	}
	main, err := d.editor(d.main())
	if err != nil {
		return err
	}
	for _, r := range p.Rules { // in the experiment's order
		if _, added := next[r.Name]; added {
			main.AppendRule(r)
		}
	}
	return nil
}

// tests edits the tests that differ between old and p.
func (d *dirEditor) tests(old, p *policy.Policy) error {
	next := map[string]policy.Test{}
	for _, t := range p.Tests {
		next[t.Name] = t
	}
	for _, t := range old.Tests {
		n, kept := next[t.Name]
		delete(next, t.Name)
		switch {
		case !kept:
			if err := d.remove(old.Sources, "tests", "test", t.Name); err != nil {
				return err
			}
		case !sameTest(t, n):
			f, err := d.definedIn(t.Pos.File, "test", t.Name)
			if err != nil {
				return err
			}
			if err := f.SetTest(t, n); err != nil {
				return fmt.Errorf("%s: %w", t.Pos.File, err)
			}
		}
	}
	main, err := d.editor(d.main())
	if err != nil {
		return err
	}
	for _, t := range p.Tests {
		if _, added := next[t.Name]; added {
			if err := main.AppendTest(t); err != nil {
				return err
			}
		}
	}
	return nil
}

// definedIn is the editor of file, where what (rule or test) name is
// defined, unless file is a shared include.
func (d *dirEditor) definedIn(file, what, name string) (*policy.FileEditor, error) {
	if _, ok := d.own(file); !ok {
		return nil, errShared(d.pol, file, what, name)
	}
	return d.editor(file)
}

// remove deletes every definition of name from the files of the policy,
// since a definition left in any of them would come back in the merge.
func (d *dirEditor) remove(sources []string, array, what, name string) error {
	for _, file := range sources {
		f, err := d.editor(file)
		if err != nil {
			return err
		}
		if !f.Has(array, name) {
			continue
		}
		if _, ok := d.own(file); !ok {
			return errShared(d.pol, file, what, name)
		}
		if err := f.Remove(array, name); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
	}
	return nil
}

func errShared(pol, file, what, name string) error {
	return fmt.Errorf("%s %q is defined in %s, which other policies may include: committing %s through the API "+
		"cannot change it there; change that file on a branch, or redefine the %s in a file of %s/ with merge = \"override\"",
		what, name, file, pol, what, pol)
}

// result is the directory with the edits applied; a fragment left with
// no rule or test is deleted.
func (d *dirEditor) result() (map[string][]byte, error) {
	out := make(map[string][]byte, len(d.cur))
	for rel, data := range d.cur {
		out[rel] = data
	}
	var errs []error
	for file, f := range d.files {
		rel, ok := d.own(file)
		if !ok {
			continue
		}
		data, err := f.Bytes()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", file, err))
			continue
		}
		if f.Empty() && rel != "policy.toml" {
			delete(out, rel)
			continue
		}
		out[rel] = data
	}
	return out, errors.Join(errs...)
}

func sameRule(a, b policy.Rule) bool {
	return a.Name == b.Name && a.Priority == b.Priority && a.Action == b.Action && a.Preview == b.Preview &&
		strings.TrimSpace(a.Match) == strings.TrimSpace(b.Match) &&
		strings.TrimSpace(a.Description) == strings.TrimSpace(b.Description)
}

func sameTest(a, b policy.Test) bool {
	one := func(t policy.Test) string { return string((&policy.Policy{Tests: []policy.Test{t}}).Canonical()) }
	return one(a) == one(b)
}
