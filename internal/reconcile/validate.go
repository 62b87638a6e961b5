package reconcile

import (
	"errors"
	"fmt"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/policy"
)

// Validation is the leader's verdict on a tree.
type Validation struct {
	// Etags maps policy name to the etag of its merged form; set when the
	// tree is valid.
	Etags map[string]string
	// Problems are the reasons the tree is invalid, one per line as
	// `file:line: message` with files relative to the policies root (so
	// the first path element names the policy). Empty when valid.
	Problems []string
}

// Compile loads and compiles every policy of a tree into a bundle, as
// every node does with a staged generation. Problems are listed as in
// Validation; the bundle is nil unless there are none.
func Compile(files map[string][]byte, lopts policy.LoadOptions, eopts engine.Options) (*engine.Bundle, []string) {
	var probs []string
	repo, err := policy.Load(gitsource.FilesFS(files), lopts)
	if err != nil {
		probs = append(probs, problems(err)...)
	}
	if repo == nil {
		return nil, probs
	}
	bundle, err := engine.NewBundle(repo.Policies, eopts)
	if err != nil {
		probs = append(probs, problems(err)...)
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return bundle, nil
}

// Validate loads, compiles and tests every policy of a tree, the same
// checks as `reconciler validate`. A tree is valid only if every policy
// loads, compiles and passes all its tests.
func Validate(files map[string][]byte, lopts policy.LoadOptions, eopts engine.Options) Validation {
	bundle, probs := Compile(files, lopts, eopts)
	if bundle == nil {
		return Validation{Problems: probs}
	}
	var v Validation
	for _, name := range bundle.Names() {
		cp, _ := bundle.Policy(name)
		for _, r := range engine.RunTests(cp) {
			if !r.Passed {
				e := &policy.Error{File: r.Pos.File, Line: r.Pos.Line,
					Msg: fmt.Sprintf("test %q of policy %q: %s", r.Name, r.Policy, r.Message)}
				v.Problems = append(v.Problems, e.Error())
			}
		}
	}
	if len(v.Problems) == 0 {
		v.Etags = bundle.Etags()
	}
	return v
}

// problems lists each problem of err on its own.
func problems(err error) []string {
	var list policy.ErrorList
	if errors.As(err, &list) {
		out := make([]string, len(list))
		for i, e := range list {
			out[i] = e.Error()
		}
		return out
	}
	return []string{err.Error()}
}
