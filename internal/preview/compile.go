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
// cost limit) and keeps one program per etag, so an experiment is
// compiled once per version however often the state is re-read.
type Compiler struct {
	opts  engine.Options
	mu    sync.Mutex
	cache map[string]*engine.CompiledPolicy
}

// NewCompiler returns a compiler using opts (zero budgets mean the
// engine's defaults).
func NewCompiler(opts engine.Options) *Compiler {
	return &Compiler{opts: opts, cache: map[string]*engine.CompiledPolicy{}}
}

// CompileAll compiles every previewed experiment of exps, reusing cached
// programs, and forgets programs no longer used. Experiments that do not
// compile are left out and reported by name; the rest still preview.
func (c *Compiler) CompileAll(exps []*Experiment) ([]CompiledExperiment, map[string]error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := map[string]*engine.CompiledPolicy{}
	var out []CompiledExperiment
	errs := map[string]error{}
	for _, e := range exps {
		if e == nil || !e.Previewed || e.Policy == nil {
			continue
		}
		prog := c.cache[e.Etag]
		if prog == nil {
			var err error
			if prog, err = engine.Compile(e.Policy, c.opts); err != nil {
				errs[e.Name] = err
				continue
			}
		}
		next[e.Etag] = prog
		out = append(out, CompiledExperiment{Experiment: e, Program: prog})
	}
	c.cache = next
	return out, errs
}

// Compile compiles one experiment, through the cache.
func (c *Compiler) Compile(e *Experiment) (CompiledExperiment, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if prog := c.cache[e.Etag]; prog != nil {
		return CompiledExperiment{Experiment: e, Program: prog}, nil
	}
	prog, err := engine.Compile(e.Policy, c.opts)
	if err != nil {
		return CompiledExperiment{}, err
	}
	c.cache[e.Etag] = prog
	return CompiledExperiment{Experiment: e, Program: prog}, nil
}

// CheckPolicy compiles p as the leader must before accepting an
// experiment from the API: a policy that does not compile is
// INVALID_ARGUMENT, with every problem in the message.
func CheckPolicy(p *policy.Policy, opts engine.Options) error {
	if p == nil {
		return errorf(InvalidArgument, "policy is required")
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
