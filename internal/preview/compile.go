package preview

import (
	"errors"
	"fmt"
	"sync"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
)

// CompiledExperiment is an experiment with its policy compiled for
// shadow evaluation. Program is nil for an experiment the node does not
// evaluate: one not ACTIVE (nothing to evaluate; its stats are kept), or
// one Refused, whose reason says why (over the node's budget, or not
// compiling), shown in its stats.
type CompiledExperiment struct {
	Experiment *Experiment
	Program    *engine.CompiledPolicy
	Refused    string
}

// Compiler compiles experiments with the preview's own options (its CEL
// cost limit) and keeps one program per version, so an experiment is
// compiled once per version however often the state is re-read. An
// experiment shares the programs of the rules it did not change with the
// live policy it is compiled beside (engine.CompileBeside): one that edits
// a rule of a 100-rule policy costs a rule's memory, not a policy's.
//
// Only ACTIVE experiments are compiled: a suspended one, such as a fork's
// pull request held until a writer approves its head, costs the node
// nothing. And all the programs it holds stay within one budget (budget.go).
type Compiler struct {
	opts   engine.Options
	budget int64 // bytes, engine.Size.Bytes

	mu       sync.Mutex
	cache    map[compileKey]compiled
	used     engine.Size
	compiles uint64
	measured uint64
}

// compiled is a program and what it adds to the node beside its live
// policy; prog is nil for an experiment measured and refused.
type compiled struct {
	prog *engine.CompiledPolicy
	size engine.Size
}

// compileKey is an experiment version and the live version whose
// programs it shares: after a new generation, an experiment is compiled
// again beside the new live policy, so that it never holds the old one's
// programs alive.
type compileKey struct{ etag, liveEtag string }

// NewCompiler returns a compiler using opts (zero budgets mean the
// engine's defaults) whose programs stay within DefaultMaxCompiledBytes.
func NewCompiler(opts engine.Options) *Compiler {
	return &Compiler{opts: opts, budget: DefaultMaxCompiledBytes, cache: map[compileKey]compiled{}}
}

// WithBudget sets the bytes all the programs of the compiler may hold
// (config preview.max_compiled_bytes); at most 0 keeps the default.
func (c *Compiler) WithBudget(bytes int64) *Compiler {
	if bytes > 0 {
		c.budget = bytes
	}
	return c
}

// CompileAll compiles every ACTIVE previewed experiment of exps beside its
// live policy in live (by policy name; absent for a new policy), reusing
// cached programs, and forgets programs no longer used. Experiments are
// admitted in the order their previews started, while the sum of their
// programs stays within the budget: an earlier experiment keeps its place
// and the one that would cross the budget is refused, with the budget
// named. Previewed experiments that are not ACTIVE come back without a
// program. Experiments refused or not compiling are also reported by
// name; the rest still preview.
func (c *Compiler) CompileAll(exps []*Experiment, live map[string]*engine.CompiledPolicy) ([]CompiledExperiment, map[string]error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := map[compileKey]compiled{}
	acct := budgetAccount{limit: c.budget}
	var out []CompiledExperiment
	errs := map[string]error{}
	for _, e := range inStartOrder(exps) {
		if !e.IsActive() {
			out = append(out, CompiledExperiment{Experiment: e}) // its stats are kept
			continue
		}
		got, key, err := c.compile(e, live[e.PolicyName()], &acct)
		if errors.Is(err, engine.ErrAborted) {
			// The node is stopping (engine.Options.Abort): what was
			// compiled before stays cached, nothing is installed.
			return out, map[string]error{e.Name: err}
		}
		if err != nil {
			if errors.Is(err, ErrResourceExhausted) {
				next[key] = compiled{size: got.size} // measured: not parsed again while refused
			}
			errs[e.Name] = err
			out = append(out, CompiledExperiment{Experiment: e, Refused: refusal(err)})
			continue
		}
		next[key] = got
		out = append(out, CompiledExperiment{Experiment: e, Program: got.prog})
	}
	c.cache, c.used = next, acct.used
	return out, errs
}

// Compile compiles one experiment beside base (nil: none), through the
// cache, outside the budget: for tests and benchmarks.
func (c *Compiler) Compile(e *Experiment, base *engine.CompiledPolicy) (CompiledExperiment, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	acct := budgetAccount{}
	got, key, err := c.compile(e, base, &acct)
	if err != nil {
		return CompiledExperiment{}, err
	}
	c.cache[key] = got
	return CompiledExperiment{Experiment: e, Program: got.prog}, nil
}

// compile returns e's program beside base from the cache or, when acct
// admits what it adds, compiled now.
func (c *Compiler) compile(e *Experiment, base *engine.CompiledPolicy, acct *budgetAccount) (compiled, compileKey, error) {
	key := compileKey{etag: e.Etag}
	if base != nil {
		key.liveEtag = base.Etag()
	}
	// A program is charged from the cache; an experiment refused before is
	// refused again without a parse while it still does not fit.
	if got, ok := c.cache[key]; ok && (got.prog != nil || !acct.fits(got.size)) {
		return got, key, acct.admit(e, got.size)
	}
	admit := func(s engine.Size) error { return acct.admit(e, s) }
	c.measured++
	prog, size, err := engine.CompileWithin(e.Policy, c.opts, base, admit)
	if err != nil {
		return compiled{size: size}, key, err
	}
	c.compiles++
	return compiled{prog: prog, size: size}, key, nil
}

// Usage is what the compiler holds now: the experiments it compiled, the
// size of their programs and its budget, for metrics and tests.
type Usage struct {
	Programs int
	Size     engine.Size
	Bytes    int64 // Size.Bytes
	Budget   int64
	// Compiles counts programs compiled since the compiler was made
	// (cache misses): a program taken from the cache is not counted.
	Compiles uint64
	// Measured counts experiments parsed and measured, compiled or
	// refused: what allocates.
	Measured uint64
}

// Usage reports what the compiler holds.
func (c *Compiler) Usage() Usage {
	c.mu.Lock()
	defer c.mu.Unlock()
	programs := 0
	for _, got := range c.cache {
		if got.prog != nil {
			programs++
		}
	}
	return Usage{Programs: programs, Size: c.used, Bytes: c.used.Bytes(), Budget: c.budget,
		Compiles: c.compiles, Measured: c.measured}
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
