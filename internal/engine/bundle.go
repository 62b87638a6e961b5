package engine

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/policy"
)

// ErrUnknownPolicy is returned (wrapped) by Bundle.Evaluate for a policy
// name the bundle does not hold; the API maps it to 404.
var ErrUnknownPolicy = errs.Sentinel(errs.NotFound, "unknown policy")

// Bundle is the compiled form of a set of policies, such as a generation.
// It is immutable once built and safe for concurrent use, so a node can
// swap bundles with an atomic pointer and evaluate without locks.
type Bundle struct {
	byName map[string]*CompiledPolicy
	names  []string
	etags  map[string]string
	// elsewhere: the tree's policies of other node groups, by name: their
	// group (CompileTree with policy.LoadOptions.Group).
	elsewhere map[string]string
}

// NewBundle compiles every policy. Problems of all policies are collected
// into one policy.ErrorList; no bundle is returned unless all compile.
func NewBundle(ps []*policy.Policy, opts Options) (*Bundle, error) {
	cps := make([]*CompiledPolicy, 0, len(ps))
	var errs policy.ErrorList
	seen := make(map[string]bool, len(ps))
	for _, p := range ps {
		if seen[p.Name] {
			errs = append(errs, &policy.Error{File: homeFile(p), Msg: fmt.Sprintf("policy %q appears twice in the bundle", p.Name)})
			continue
		}
		seen[p.Name] = true
		cp, err := Compile(p, opts)
		if err != nil {
			errs = appendErrors(errs, err)
			continue
		}
		cps = append(cps, cp)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return bundleOf(cps), nil
}

// appendErrors flattens a Compile error into the list.
func appendErrors(errs policy.ErrorList, err error) policy.ErrorList {
	var list policy.ErrorList
	if errors.As(err, &list) {
		return append(errs, list...)
	}
	return append(errs, &policy.Error{Msg: err.Error()})
}

// Evaluate decides req with the named policy (its name, not "policies/…").
func (b *Bundle) Evaluate(name string, req *Request) (Decision, error) {
	cp, ok := b.byName[name]
	if !ok {
		return Decision{}, fmt.Errorf("engine: policy %q: %w", name, ErrUnknownPolicy)
	}
	return cp.Evaluate(req), nil
}

// Policy returns the named compiled policy.
func (b *Bundle) Policy(name string) (*CompiledPolicy, bool) {
	cp, ok := b.byName[name]
	return cp, ok
}

// Names returns the policy names, sorted. The slice is the caller's.
func (b *Bundle) Names() []string { return slices.Clone(b.names) }

// Etags returns each policy's etag by name. The map is the caller's.
func (b *Bundle) Etags() map[string]string { return maps.Clone(b.etags) }

// ServedElsewhere returns the node group that serves a policy of the tree
// this bundle left out because it holds only its own group's policies.
func (b *Bundle) ServedElsewhere(name string) (group string, ok bool) {
	group, ok = b.elsewhere[name]
	return group, ok
}

// Elsewhere returns every policy left to other node groups and its group.
// The map is the caller's.
func (b *Bundle) Elsewhere() map[string]string { return maps.Clone(b.elsewhere) }
