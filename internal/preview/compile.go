package preview

import (
	"errors"
	"fmt"
	"sync"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
)

// CompiledExperiment is an experiment with its policy compiled for
// shadow evaluation.
type CompiledExperiment struct {
	Experiment *Experiment
	Program    *engine.CompiledPolicy
}

// Compiler compiles experiments with the preview's own options (its CEL
// cost limit) and keeps one program per version, so an experiment is
// compiled once per version however often the state is re-read. An
// experiment shares the programs of the rules it did not change with the
// live policy it is compiled beside (engine.CompileBeside): one that edits
// a rule of a 100-rule policy costs a rule's memory, not a policy's.
type Compiler struct {
	opts  engine.Options
	mu    sync.Mutex
	cache map[compileKey]*engine.CompiledPolicy
}

// compileKey is an experiment version and the live version whose
// programs it shares: after a new generation, an experiment is compiled
// again beside the new live policy, so that it never holds the old one's
// programs alive.
type compileKey struct{ etag, liveEtag string }

// NewCompiler returns a compiler using opts (zero budgets mean the
// engine's defaults).
func NewCompiler(opts engine.Options) *Compiler {
	return &Compiler{opts: opts, cache: map[compileKey]*engine.CompiledPolicy{}}
}

// CompileAll compiles every previewed experiment of exps beside its live
// policy in live (by policy name; absent for a new policy), reusing cached
// programs, and forgets programs no longer used. Experiments that do not
// compile are left out and reported by name; the rest still preview.
func (c *Compiler) CompileAll(exps []*Experiment, live map[string]*engine.CompiledPolicy) ([]CompiledExperiment, map[string]error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := map[compileKey]*engine.CompiledPolicy{}
	var out []CompiledExperiment
	errs := map[string]error{}
	for _, e := range exps {
		if e == nil || !e.Previewed || e.Policy == nil {
			continue
		}
		base := live[e.PolicyName()]
		prog, key, err := c.compile(e, base)
		if err != nil {
			errs[e.Name] = err
			continue
		}
		next[key] = prog
		out = append(out, CompiledExperiment{Experiment: e, Program: prog})
	}
	c.cache = next
	return out, errs
}

// Compile compiles one experiment beside base (nil: none), through the
// cache.
func (c *Compiler) Compile(e *Experiment, base *engine.CompiledPolicy) (CompiledExperiment, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	prog, key, err := c.compile(e, base)
	if err != nil {
		return CompiledExperiment{}, err
	}
	c.cache[key] = prog
	return CompiledExperiment{Experiment: e, Program: prog}, nil
}

func (c *Compiler) compile(e *Experiment, base *engine.CompiledPolicy) (*engine.CompiledPolicy, compileKey, error) {
	key := compileKey{etag: e.Etag}
	if base != nil {
		key.liveEtag = base.Etag()
	}
	if prog := c.cache[key]; prog != nil {
		return prog, key, nil
	}
	prog, err := engine.CompileBeside(e.Policy, c.opts, base)
	return prog, key, err
}

// CheckPolicySize holds p to the budgets of a policy in a tree (rules,
// tests, size) before anything compiles it: INVALID_ARGUMENT over one.
func CheckPolicySize(p *policy.Policy) error {
	if p == nil {
		return errorf(InvalidArgument, "policy is required")
	}
	if err := policy.CheckSize(p); err != nil {
		return errorf(InvalidArgument, "%v", err)
	}
	return nil
}

// CheckPolicy compiles p as the leader must before accepting an
// experiment from the API: a policy that does not compile is
// INVALID_ARGUMENT, with every problem in the message.
func CheckPolicy(p *policy.Policy, opts engine.Options) error {
	if err := CheckPolicySize(p); err != nil {
		return err
	}
	if _, err := engine.Compile(p, opts); err != nil {
		var list policy.ErrorList
		if errors.As(err, &list) {
			return errorf(InvalidArgument, "policy does not compile: %v", list)
		}
		return fmt.Errorf("preview: compiling %s: %w", p.Name, err)
	}
	return nil
}
