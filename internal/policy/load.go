package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
)

// policyFile is the file that makes a directory a policy.
const policyFile = "policy.toml"

// nameRE is the policy name syntax of CONTRACT.md §1; a name becomes part
// of the resource name policies/{name} and of URLs.
var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

func validName(name string) bool { return nameRE.MatchString(name) }

// LoadOptions are the settings that come from outside the policy files.
type LoadOptions struct {
	// MergeDefault is the conflict strategy when neither a file nor its
	// policy sets merge (config `[policy] merge_default`); "" means fail.
	MergeDefault Strategy
	// Group, when set, loads only the policies of that node group (a
	// node holds only what it serves): Load reads every policy.toml to
	// learn its group, and lists each policy of another group in
	// Repository.Elsewhere without merging its files. "" loads every
	// policy (the leader's validation, `reconciler validate`).
	Group string
}

func (o LoadOptions) validate() error {
	switch o.MergeDefault {
	case "", StrategyFail, StrategyOverride, StrategyMaintain:
		return nil
	}
	return fmt.Errorf("policy: unknown merge strategy %q (want fail, override or maintain)", o.MergeDefault)
}

// Repository is every policy under a policies root.
type Repository struct {
	// Policies are the policies that loaded without problems, by name.
	Policies []*Policy
	// Invalid holds, by policy name, the problems of each policy that
	// failed, so that status can mark it Invalid with its own errors
	// while the others stay usable.
	Invalid map[string]ErrorList
	// Elsewhere holds, by policy name, the group of each policy left out
	// because LoadOptions.Group names another one.
	Elsewhere map[string]string
	// Lists are the tree's named lists (_lists/), by name; nil for a
	// list with problems.
	Lists Lists
}

// Get returns the policy with the given name, or nil.
func (r *Repository) Get(name string) *Policy {
	if r == nil {
		return nil
	}
	i := sort.Search(len(r.Policies), func(i int) bool { return r.Policies[i].Name >= name })
	if i < len(r.Policies) && r.Policies[i].Name == name {
		return r.Policies[i]
	}
	return nil
}

// Load reads every policy under the root of fsys (os.DirFS of a directory,
// or a git tree). A policy is a directory directly under the root holding
// policy.toml; directories whose names start with "_" or "." never are.
//
// Problems in policy files are collected across all policies and returned
// as an ErrorList; the Repository is returned with them, holding the valid
// policies and, in Invalid, each failed policy's problems. Any other error
// (bad options, an unreadable root) comes with a nil Repository.
func Load(fsys fs.FS, opts LoadOptions) (*Repository, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("policy: reading the policies root: %w", err)
	}
	repo := &Repository{Invalid: map[string]ErrorList{}, Elsewhere: map[string]string{}}
	lists, all := LoadLists(fsys)
	repo.Lists = lists
	budget := &loadBudget{}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".") {
			continue
		}
		if _, err := fs.Stat(fsys, path.Join(name, policyFile)); err != nil {
			continue // a directory without policy.toml is not a policy
		}
		if over := budget.exhausted(name); over != nil {
			// the rest is not read: once is enough to say why
			repo.Invalid[name] = ErrorList{over}
			all = append(all, over)
			continue
		}
		p, other, errs := loadPolicy(fsys, name, opts, budget)
		if other != "" {
			repo.Elsewhere[name] = other
			continue
		}
		if len(errs) == 0 && budget.rules > MaxTreeRules {
			errs = ErrorList{{File: path.Join(name, policyFile),
				Msg: fmt.Sprintf("with this policy the tree has %d rules, over the limit of %d for a tree", budget.rules, MaxTreeRules)}}
		}
		if len(errs) > 0 {
			repo.Invalid[name] = errs
			all = append(all, errs...)
			continue
		}
		if errs := p.attachLists(lists); len(errs) > 0 {
			repo.Invalid[name] = errs
			all = append(all, errs...)
			continue
		}
		repo.Policies = append(repo.Policies, p)
	}
	sort.Slice(repo.Policies, func(i, j int) bool { return repo.Policies[i].Name < repo.Policies[j].Name })
	return repo, dedupe(all).Err()
}

// LoadPolicy reads the single policy in directory dir of fsys (a
// slash-separated path; the policy is named after its last element). It is
// how an experiment's version of one policy is read. Problems come back as
// an ErrorList, with a nil policy.
func LoadPolicy(fsys fs.FS, dir string, opts LoadOptions) (*Policy, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts.Group = "" // one policy is read whatever its group
	p, _, errs := loadPolicy(fsys, path.Clean(dir), opts, &loadBudget{})
	if len(errs) > 0 {
		return nil, errs
	}
	if p.usesLists() {
		// The lists are read only for a policy that names one.
		lists, errs := LoadLists(fsys)
		if len(errs) > 0 {
			return nil, errs
		}
		if errs := p.attachLists(lists); len(errs) > 0 {
			return nil, errs
		}
	}
	return p, nil
}

// loadPolicy reads and merges one policy: included files in the order
// listed, then policy.toml, then the other fragments in lexical path order.
// A policy of another group than opts.Group is not merged: its group comes
// back in other instead, so that its problems (a merge conflict under this
// node's merge_default) are not this node's.
func loadPolicy(fsys fs.FS, dir string, opts LoadOptions, budget *loadBudget) (p *Policy, other string, _ ErrorList) {
	var sink errorSink
	name, main := path.Base(dir), path.Join(dir, policyFile)
	if !validName(name) {
		sink.add(main, 0, "", "invalid policy name %q: must match [a-z][a-z0-9-]{0,62}", name)
	}
	data, err := fs.ReadFile(fsys, main)
	if err != nil {
		sink.add(main, 0, "", "%s", readError(err))
		return nil, "", sink.errs
	}
	pf, errs := budget.decode(main, data, kindPolicy)
	if g, ok := groupOf(pf); ok && opts.Group != "" && g != opts.Group {
		return nil, g, nil
	}
	sink.addAll(errs)
	included, errs := readIncludes(fsys, dir, pf, budget)
	sink.addAll(errs)
	fragments, errs := readFragments(fsys, dir, included, budget)
	sink.addAll(errs)

	c := newComposer(opts.MergeDefault, pf.merge)
	for _, f := range included {
		c.merge(f)
	}
	c.merge(pf)
	for _, f := range fragments {
		c.merge(f)
	}
	p = c.finish(name, main)
	sink.addAll(c.errs)
	if len(sink.errs) == 0 {
		if e := checkPolicySize(p, main); e != nil {
			sink.errs = append(sink.errs, e)
		}
		budget.rules += len(p.Rules)
	}
	if len(sink.errs) > 0 {
		return nil, "", sink.errs
	}
	return p, "", nil
}

// groupOf is the group a decoded policy.toml names, false when it cannot
// be told (the file does not parse, or its group is not a string): such a
// policy is loaded, and its problems reported, whatever the node's group.
func groupOf(pf *parsedFile) (string, bool) {
	if s, ok := pf.settings["group"]; ok {
		return s.value, true
	}
	if pf.broken || pf.present["group"] {
		return "", false
	}
	return DefaultGroup, true
}

// readIncludes reads policy.toml's includes, in the order listed. Paths
// are relative to policy.toml and must stay inside the policies root, since
// a git tree has nothing outside it and a directory must not leak.
func readIncludes(fsys fs.FS, dir string, pf *parsedFile, budget *loadBudget) ([]*parsedFile, ErrorList) {
	var sink errorSink
	var out []*parsedFile
	seen := map[string]bool{}
	for _, inc := range pf.includes {
		target, problem := resolveInclude(dir, inc.path)
		if problem == "" && seen[target] {
			problem = "is listed twice"
		}
		if problem != "" {
			sink.add(pf.name, inc.line, "", "include %q %s", inc.path, problem)
			continue
		}
		seen[target] = true
		data, err := fs.ReadFile(fsys, target)
		if err != nil {
			sink.add(pf.name, inc.line, "", "include %q (%s): %s", inc.path, target, readError(err))
			continue
		}
		f, errs := budget.decode(target, data, kindFragment)
		sink.addAll(errs)
		out = append(out, f)
	}
	return out, sink.errs
}

// resolveInclude turns an include entry into a path in the fs, or says
// what is wrong with it.
func resolveInclude(dir, inc string) (target, problem string) {
	if path.IsAbs(inc) || strings.Contains(inc, `\`) {
		return "", "must be a relative, slash-separated path"
	}
	target = path.Join(dir, inc)
	switch {
	case target == ".." || strings.HasPrefix(target, "../"):
		return "", "escapes the policies root"
	case target == path.Join(dir, policyFile):
		return "", "names policy.toml itself"
	case !fs.ValidPath(target):
		return "", "is not a valid path"
	}
	return target, ""
}

// readFragments reads the other *.toml files of the policy directory and
// of its tests/ subdirectory, in lexical path order. A file that is also
// included is merged once, where it is included. Dot files (editor backups,
// lock files) are skipped.
func readFragments(fsys fs.FS, dir string, included []*parsedFile, budget *loadBudget) ([]*parsedFile, ErrorList) {
	var sink errorSink
	skip := map[string]bool{path.Join(dir, policyFile): true}
	for _, f := range included {
		skip[f.name] = true
	}
	paths, err := tomlFiles(fsys, dir, true)
	if err != nil {
		sink.add(dir, 0, "", "%s", readError(err))
	}
	sort.Strings(paths)
	var out []*parsedFile
	for _, p := range paths {
		if skip[p] {
			continue
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			sink.add(p, 0, "", "%s", readError(err))
			continue
		}
		f, errs := budget.decode(p, data, kindFragment)
		sink.addAll(errs)
		out = append(out, f)
	}
	return out, sink.errs
}

// tomlFiles lists the *.toml files in dir and, when withTests is set, in
// dir/tests.
func tomlFiles(fsys fs.FS, dir string, withTests bool) ([]string, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		switch {
		case e.IsDir() && name == "tests" && withTests:
			sub, err := tomlFiles(fsys, path.Join(dir, name), false)
			if err != nil {
				return out, err
			}
			out = append(out, sub...)
		case !e.IsDir() && strings.HasSuffix(name, ".toml") && !strings.HasPrefix(name, "."):
			out = append(out, path.Join(dir, name))
		}
	}
	return out, nil
}

// readError words a read failure for a policy author.
// The path is left out: the Error already names the file.
func readError(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "file does not exist"
	case errors.Is(err, fs.ErrInvalid):
		return "not a valid path"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Sprintf("cannot read file: %v", err)
}
