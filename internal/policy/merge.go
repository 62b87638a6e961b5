package policy

import (
	"fmt"
	"path"
	"path/filepath"
	"strconv"
)

// SourceFile is one policy file handed to MergeFiles: its name (used in
// errors and Sources, as given) and its TOML text.
type SourceFile struct {
	Name string
	Data []byte
}

// MergeFiles merges policy files in the order given into one policy; it is
// Keystone's merge CLI (`reconciler merge`). Every file may hold policy-level
// keys (description, default_action, group, on_error), [[rules]], [[tests]]
// and merge; include is refused because there is no file system to follow.
//
// The first file plays the part policy.toml plays in Load: its merge is the
// policy's strategy, so merging a policy's files in Load's order gives Load's
// result. A conflict in a later file is resolved by that file's merge, else
// the first file's, else opts.MergeDefault, else fail. Policy-level keys are
// merged like rules: a later file setting a key to a different value is a
// conflict under that strategy (fail: error; override: later wins;
// maintain: first wins); the same value is never a conflict.
//
// The policy is named after the first file's directory when that is a valid
// policy name (office/policy.toml gives "office"), otherwise "merged".
// Problems come back as an ErrorList, with a nil policy.
func MergeFiles(files []SourceFile, opts LoadOptions) (*Policy, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("policy: no files to merge")
	}
	var sink errorSink
	parsed := make([]*parsedFile, len(files))
	for i, f := range files {
		pf, errs := decodeFile(f.Name, f.Data, kindMerge)
		sink.addAll(errs)
		parsed[i] = pf
	}
	c := newComposer(opts.MergeDefault, parsed[0].merge)
	for _, pf := range parsed {
		c.merge(pf)
	}
	p := c.finish(mergedName(files[0].Name), files[0].Name)
	sink.addAll(c.errs)
	if len(sink.errs) > 0 {
		return nil, sink.errs
	}
	return p, nil
}

// mergedName names a merged policy after the first file's directory.
func mergedName(file string) string {
	dir := path.Base(path.Dir(filepath.ToSlash(file)))
	if validName(dir) {
		return dir
	}
	return "merged"
}

// composer merges parsed files into one policy, in the order they are added.
type composer struct {
	errorSink
	global      Strategy // LoadOptions.MergeDefault
	policyMerge Strategy // the merge of policy.toml (or the first file)
	settings    map[string]setting
	present     map[string]bool // policy keys written at all, valid or not
	rules       map[string]Rule
	tests       map[string]Test
	sources     []string
	broken      bool // a file did not parse: absences prove nothing
}

func newComposer(global, policyMerge Strategy) *composer {
	return &composer{
		global:      global,
		policyMerge: policyMerge,
		settings:    map[string]setting{},
		present:     map[string]bool{},
		rules:       map[string]Rule{},
		tests:       map[string]Test{},
	}
}

// strategy is the one that applies to conflicts introduced by f, in the
// order CONTRACT.md §1 gives: the file's, the policy's, the global default.
func (c *composer) strategy(f *parsedFile) Strategy {
	for _, s := range []Strategy{f.merge, c.policyMerge, c.global} {
		if s != "" {
			return s
		}
	}
	return StrategyFail
}

// merge merges one file into what came before it.
func (c *composer) merge(f *parsedFile) {
	c.sources = append(c.sources, f.name)
	c.broken = c.broken || f.broken
	s := c.strategy(f)
	c.mergeSettings(f, s)
	mergeNamed(c, "rule", c.rules, f.rules, func(r *Rule) (string, Pos) { return r.Name, r.Pos }, s)
	mergeNamed(c, "test", c.tests, f.tests, func(t *Test) (string, Pos) { return t.Name, t.Pos }, s)
}

// mergeSettings merges policy-level keys; only MergeFiles can see two files
// set the same one, since Load allows them in policy.toml alone.
func (c *composer) mergeSettings(f *parsedFile, s Strategy) {
	for key := range f.present {
		c.present[key] = true
	}
	for _, key := range settingKeys {
		v, ok := f.settings[key]
		if !ok {
			continue
		}
		prev, exists := c.settings[key]
		switch {
		case !exists || s == StrategyOverride:
			c.settings[key] = v
		case prev.value == v.value || s == StrategyMaintain:
		default:
			c.add(v.file, v.line, "", "%s %q conflicts with %q set at %s (merge strategy %q)",
				key, v.value, prev.value, at(prev.file, prev.line), StrategyFail)
		}
	}
}

// mergeNamed merges one file's rules (or tests) into the map by name.
// A name defined twice in one file is always an error: strategies are
// about composing files, and a repeat inside one file is a slip.
func mergeNamed[T any](c *composer, kind string, into map[string]T, items []T, key func(*T) (string, Pos), s Strategy) {
	inFile := map[string]Pos{}
	for i := range items {
		name, pos := key(&items[i])
		rule := ""
		if kind == "rule" {
			rule = name
		}
		if first, dup := inFile[name]; dup {
			c.add(pos.File, pos.Line, rule, "%s %q is defined twice in this file (first at %s)", kind, name, at(first.File, first.Line))
			continue
		}
		inFile[name] = pos
		prev, exists := into[name]
		if !exists || s == StrategyOverride {
			into[name] = items[i]
			continue
		}
		if s == StrategyMaintain {
			continue
		}
		_, prevPos := key(&prev)
		c.add(pos.File, pos.Line, rule, "%s %q is already defined at %s (merge strategy %q; set merge = \"override\" or \"maintain\" to resolve)",
			kind, name, at(prevPos.File, prevPos.Line), StrategyFail)
	}
}

// at renders file:line for messages that name a second place.
func at(file string, line int) string {
	if line <= 0 {
		return file
	}
	return file + ":" + strconv.Itoa(line)
}

// finish builds the merged policy; home is the file policy-level problems
// are reported against (policy.toml, or the first MergeFiles input).
func (c *composer) finish(name, home string) *Policy {
	p := &Policy{
		Name:          name,
		Description:   c.settings["description"].value,
		DefaultAction: Action(c.settings["default_action"].value),
		Group:         DefaultGroup,
		OnError:       OnErrorDeny,
		Rules:         make([]Rule, 0, len(c.rules)),
		Sources:       c.sources,
	}
	if g, ok := c.settings["group"]; ok {
		p.Group = g.value
	}
	if o, ok := c.settings["on_error"]; ok {
		p.OnError = OnError(o.value)
	}
	if !c.present["default_action"] && !c.broken {
		c.add(home, 0, "", `default_action is required ("allow" or "deny")`)
	}
	for _, r := range c.rules {
		p.Rules = append(p.Rules, r)
	}
	sortRules(p.Rules)
	for _, t := range c.tests {
		p.Tests = append(p.Tests, t)
	}
	sortTests(p.Tests)
	c.checkTestRules(p)
	return p
}

// checkTestRules reports tests that expect a rule the policy does not have;
// the test could never pass, and the typo is easiest to see here.
func (c *composer) checkTestRules(p *Policy) {
	for _, t := range p.Tests {
		if t.Rule == nil || *t.Rule == "" || c.broken {
			continue
		}
		if _, ok := c.rules[*t.Rule]; !ok {
			c.add(t.Pos.File, t.Pos.Line, "", "test %q: rule %q is not defined in this policy", t.Name, *t.Rule)
		}
	}
}
