package sandbox

import (
	"errors"
	"fmt"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// policyVerdict is the child's answer to a policy check: the code and
// message of preview.CheckPolicy's error, Code 0 when the policy compiles.
type policyVerdict struct {
	Code    errs.Code `json:",omitempty"`
	Message string    `json:",omitempty"`
}

// verdictOf is the verdict of CheckPolicy's err: its code when it has
// one, INTERNAL for an error of the engine itself.
func verdictOf(err error) policyVerdict {
	if err == nil {
		return policyVerdict{}
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return policyVerdict{Code: e.Code, Message: e.Msg}
	}
	return policyVerdict{Code: errs.Internal, Message: err.Error()}
}

// CheckPolicy is preview.CheckPolicy run in a child: the policy of an
// experiment submitted through the API is compiled there, so that one
// within every budget of the request but costly to compile kills the
// child, not the leader. It answers what preview.CheckPolicy answers
// (INVALID_ARGUMENT for a policy that does not compile); a child killed
// by its memory limit or deadline is RESOURCE_EXHAUSTED naming the
// budget; a child that cannot run is an internal error.
func (r Runner) CheckPolicy(p *policy.Policy, opts engine.Options) error {
	if p == nil {
		return preview.CheckPolicy(p, opts) // "policy is required": nothing to compile
	}
	var v policyVerdict
	err := r.call(request{Policy: p, ListData: listData(p), Engine: opts}, &v)
	var killed *killedError
	switch {
	case errors.As(err, &killed):
		return &errs.Error{Code: errs.ResourceExhausted, Err: err,
			Msg: fmt.Sprintf("policy %q: %s (%v); make it smaller or simpler", p.Name, BudgetMessage, killed)}
	case err != nil:
		return fmt.Errorf("checking policy %q in a child process: %w", p.Name, err)
	case v.Code == 0:
		return nil
	case v.Code == errs.Internal:
		return fmt.Errorf("preview: compiling %s (in a child process): %s", p.Name, v.Message)
	}
	return &errs.Error{Code: v.Code, Msg: v.Message}
}

// listData is the data of p's lists by hash, for the child.
func listData(p *policy.Policy) map[string][]byte {
	if len(p.Lists) == 0 {
		return nil
	}
	out := make(map[string][]byte, len(p.Lists))
	for _, l := range p.Lists {
		if l.Data != nil {
			out[l.Hash] = l.Data
		}
	}
	return out
}
