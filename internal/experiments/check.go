package experiments

import (
	"sync"

	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/policy"
)

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
func (s *Service) checkSourcePolicy(p *policy.Policy) error {
	return s.checked.check(p, func(p *policy.Policy) error { return s.cfg.CheckPolicy(p, s.cfg.EngineOptions) })
}
