package engine

import (
	"fmt"
	"maps"
	"runtime"
	"slices"

	"github.com/policyrollout/reconciler/internal/policy"
)

// Validation is the verdict on a policies tree. The leader stages a tree
// only when it is valid, and `reconciler validate` exits 0 only then: both
// get it from ValidateTree, so a tree that passes in a pull request's CI
// is one the cluster accepts.
type Validation struct {
	// Policies are the policies that loaded and compiled, by name. When
	// others did not, they are still here, with their tests run, so that
	// one run shows everything.
	Policies []*CompiledPolicy
	// Tests are the results of the tests of Policies.
	Tests []TestResult
	// Problems are every reason the tree is invalid (budgets, loading,
	// compiling, failed tests), each naming a file relative to the root.
	Problems policy.ErrorList
	// Elsewhere are the policies left to other node groups, by name: their
	// group (policy.LoadOptions.Group).
	Elsewhere map[string]string
	// Lists describe the tree's named lists (ValidateTree only).
	Lists []ListStat
}

// Valid reports whether the tree can become a generation.
func (v *Validation) Valid() bool { return len(v.Problems) == 0 }

// Etags maps each compiled policy's name to its etag.
func (v *Validation) Etags() map[string]string {
	out := make(map[string]string, len(v.Policies))
	for _, cp := range v.Policies {
		out[cp.Name()] = cp.Etag()
	}
	return out
}

// ValidateTree checks a policies tree (files keyed by slash-separated path
// relative to the root, as policy.ReadTree and gitsource read them)
// within every budget: the tree's size (policy.CheckTree), each file's
// size and nesting, each policy's and the tree's rules, each match's cost;
// then every policy is loaded, compiled and tested.
func ValidateTree(files map[string][]byte, lopts policy.LoadOptions, opts Options) Validation {
	v := compileTree(files, lopts, opts, true)
	for _, cp := range v.Policies {
		for _, r := range RunTests(cp) {
			v.Tests = append(v.Tests, r)
			if !r.Passed {
				v.Problems = append(v.Problems, &policy.Error{File: r.Pos.File, Line: r.Pos.Line,
					Msg: fmt.Sprintf("test %q of policy %q: %s", r.Name, r.Policy, r.Message)})
			}
		}
	}
	return v
}

// CompileTree loads and compiles a tree within the same budgets as
// ValidateTree, without running tests: what every node does with a
// generation the leader validated. The bundle is nil unless there are no
// problems.
func CompileTree(files map[string][]byte, lopts policy.LoadOptions, opts Options) (*Bundle, policy.ErrorList) {
	v := compileTree(files, lopts, opts, false)
	if !v.Valid() {
		return nil, v.Problems
	}
	b := bundleOf(v.Policies)
	b.elsewhere = v.Elsewhere
	return b, nil
}

// compileTree loads and compiles a tree within the budgets. With measure
// (ValidateTree), the tree's lists are measured (measureLists) before its
// policies compile, which then share the measured tables; their problems
// follow the others'.
func compileTree(files map[string][]byte, lopts policy.LoadOptions, opts Options, measure bool) (v Validation) {
	if e := policy.CheckTree(files); e != nil {
		v.Problems = policy.ErrorList{e}
		return v
	}
	repo, err := policy.Load(policy.TreeFS(files), lopts)
	if err != nil {
		v.Problems = appendErrors(v.Problems, err)
	}
	if repo == nil {
		return v
	}
	v.Elsewhere = repo.Elsewhere
	if measure {
		stats, errs, keep := measureLists(repo.Lists)
		v.Lists = stats
		defer func() {
			v.Problems = append(v.Problems, errs...)
			runtime.KeepAlive(keep)
		}()
	}
	parsed, over := measureTree(repo.Policies)
	if over != nil {
		v.Problems = append(v.Problems, over)
		return v
	}
	for i, p := range repo.Policies {
		cp, err := compilePolicy(p, opts, nil, parsed[i])
		if err != nil {
			v.Problems = appendErrors(v.Problems, err)
			continue
		}
		v.Policies = append(v.Policies, cp)
	}
	return v
}

// bundleOf makes a bundle of policies compiled already, with distinct names.
func bundleOf(cps []*CompiledPolicy) *Bundle {
	b := &Bundle{byName: make(map[string]*CompiledPolicy, len(cps)), etags: make(map[string]string, len(cps))}
	for _, cp := range cps {
		b.byName[cp.Name()] = cp
		b.etags[cp.Name()] = cp.Etag()
	}
	b.names = slices.Sorted(maps.Keys(b.byName))
	return b
}
