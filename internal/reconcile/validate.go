package reconcile

import (
	"errors"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
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
	// Tests counts, by policy, the tests that ran and passed (policies
	// that compiled), valid or not.
	Tests map[string]preview.TestCounts `json:",omitempty"`
}

// Compile loads and compiles every policy of a tree into a bundle, as
// every node does with a staged generation, within the budgets of
// engine.ValidateTree. Problems are listed as in Validation; the bundle is
// nil unless there are none.
func Compile(files map[string][]byte, lopts policy.LoadOptions, eopts engine.Options) (*engine.Bundle, []string) {
	bundle, probs := engine.CompileTree(files, lopts, eopts)
	if len(probs) > 0 {
		return nil, problems(probs)
	}
	return bundle, nil
}

// Validator validates a tree as Validate does, perhaps elsewhere (in a
// child process with limits: package sandbox).
type Validator func(files map[string][]byte, lopts policy.LoadOptions, eopts engine.Options) Validation

// Validate is engine.ValidateTree, the same function `reconciler validate`
// calls: a tree is valid only if it is within every budget and every
// policy loads, compiles and passes all its tests.
func Validate(files map[string][]byte, lopts policy.LoadOptions, eopts engine.Options) Validation {
	return ValidationOf(engine.ValidateTree(files, lopts, eopts))
}

// ValidationOf is the verdict of an engine validation (Validate), for a
// caller that keeps the compiled tree (the sandbox's worker).
func ValidationOf(v engine.Validation) Validation {
	var tests map[string]preview.TestCounts // nil when empty, as JSON from a sandbox child gives it
	if len(v.Policies) > 0 {
		tests = make(map[string]preview.TestCounts, len(v.Policies))
	}
	for _, cp := range v.Policies {
		tests[cp.Name()] = preview.TestCounts{}
	}
	for _, r := range v.Tests {
		c := tests[r.Policy]
		c.Total++
		if r.Passed {
			c.Passed++
		}
		tests[r.Policy] = c
	}
	if !v.Valid() {
		return Validation{Problems: problems(v.Problems), Tests: tests}
	}
	return Validation{Etags: v.Etags(), Tests: tests}
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
