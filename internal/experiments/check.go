package experiments

import (
	"context"
	"fmt"
	"sync"

	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// maxAPIChecks bounds the API policy checks that run at once: each may be
// a child using up to [validation] memory_limit_bytes, and requests come
// in parallel, so without a bound a burst of heavy policies would add
// their limits up. A check waits for a slot as long as its request lasts.
const maxAPIChecks = 2

// checkInput compiles the policy of a create or update body for pol, off
// expMu (compiling takes milliseconds, in a child process tens of them),
// with Config.CheckPolicy, at most maxAPIChecks at once, so that a
// policy that does not compile is INVALID_ARGUMENT and one too costly to
// compile RESOURCE_EXHAUSTED. A body naming another policy is left to
// preview.Create/Update, which refuse it.
func (s *Service) checkInput(ctx context.Context, pol string, in preview.Input) error {
	if in.Policy == nil {
		return nil
	}
	c := *in.Policy
	if c.Name == "" {
		c.Name = pol
	}
	if c.Name != pol {
		return nil
	}
	// The size budgets first: they need no compiler, and a child started
	// for a policy they refuse is wasted.
	if err := preview.CheckPolicySize(&c); err != nil {
		return err
	}
	if err := s.apiCheckSlot(ctx); err != nil {
		return err
	}
	defer func() { <-s.apiChecks }()
	return s.cfg.CheckPolicy(&c, s.cfg.EngineOptions)
}

// apiCheckSlot takes a slot of apiChecks, a free one even when ctx is
// done, else waiting until ctx is: then the check is UNAVAILABLE.
func (s *Service) apiCheckSlot(ctx context.Context) error {
	select {
	case s.apiChecks <- struct{}{}:
		return nil
	default:
	}
	select {
	case s.apiChecks <- struct{}{}:
		return nil
	case <-ctx.Done():
		return errs.Coded(errs.Unavailable, fmt.Errorf("the leader is checking %d other policies; retry: %w",
			maxAPIChecks, ctx.Err()))
	}
}

// maxCheckedPolicies bounds the verdicts checkedPolicies keeps: a few per
// tracked branch or pull request.
const maxCheckedPolicies = 1024

// checkedPolicies keeps Config.CheckPolicy's verdicts on the policies of
// branches and pull requests by etag (which covers the name and the
// whole content). Every reconcile pass in which a ref moved asks again
// for every source's changed policies, and a check in the sandbox costs
// a process start, or, for a policy that exceeds the budget, a child
// that runs up to its memory limit or deadline: each version is checked
// once. An error without a code (a child that could not run) is not
// kept, so the next pass tries again.
type checkedPolicies struct {
	mu       sync.Mutex
	verdicts map[string]error
}

// check answers check(p) for p's version, from the verdicts when known.
func (c *checkedPolicies) check(p *policy.Policy, check func(*policy.Policy) error) error {
	etag := p.Etag()
	c.mu.Lock()
	err, ok := c.verdicts[etag]
	c.mu.Unlock()
	if ok {
		return err
	}
	err = check(p)
	if _, coded := errs.CodeOf(err); err != nil && !coded {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.verdicts == nil || len(c.verdicts) >= maxCheckedPolicies {
		c.verdicts = map[string]error{}
	}
	c.verdicts[etag] = err
	return err
}

// checkSourcePolicy checks the policy of a branch or pull request with
// Config.CheckPolicy (the sandbox child under `reconciler serve`), each
// version once.
func (ss *sourceSync) checkSourcePolicy(p *policy.Policy) error {
	return ss.checked.check(p, func(p *policy.Policy) error { return ss.cfg.CheckPolicy(p, ss.cfg.EngineOptions) })
}
