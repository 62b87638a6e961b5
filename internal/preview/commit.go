package preview

import (
	"cmp"
	"slices"

	"github.com/policyrollout/reconciler/internal/policy"
)

// CommitRequest is the body of :commit.
type CommitRequest struct {
	// Etag is required and must be the experiment's current etag, so that
	// nobody commits a version they did not look at.
	Etag string `json:"etag"`
	// ParentEtag, when set, must be the live policy's current etag.
	ParentEtag string `json:"parentEtag,omitempty"`
}

// CommitPlan is what a successful commit does, in one step: Live becomes
// the live policy and the experiment called Delete is deleted. The caller
// must apply both or neither (a git merge of HeadCommit, then the delete).
type CommitPlan struct {
	Live       *policy.Policy
	HeadCommit string
	Delete     string
}

// Commit checks a commit of e over the live policy whose etag is liveEtag
// ("" when there is none) and plans it. It never changes e, so a failed
// commit leaves preview running and the live policy as it was. It can be
// called in any state. Errors, per AIP-236 and AIP-154:
//   - no experiment (a second commit deleted it): NOT_FOUND;
//   - no etag: INVALID_ARGUMENT;
//   - etag not the experiment's: ABORTED;
//   - parentEtag not the live policy's (or no live policy): ABORTED, not
//     FAILED_PRECONDITION: current AIP-154 answers any stale etag with
//     ABORTED, and a retry after reading the live policy again can succeed.
func Commit(e *Experiment, liveEtag string, req CommitRequest) (CommitPlan, error) {
	if e == nil {
		return CommitPlan{}, errorf(NotFound, "experiment not found: it may have been committed or deleted already")
	}
	if err := checkEtag(e, req.Etag, true); err != nil {
		return CommitPlan{}, err
	}
	if req.ParentEtag != "" && normEtag(req.ParentEtag) != liveEtag {
		if liveEtag == "" {
			return CommitPlan{}, errorf(Aborted, "parentEtag %q given but %q has no live version",
				req.ParentEtag, "policies/"+e.PolicyName())
		}
		return CommitPlan{}, errorf(Aborted, "parentEtag %q is not the live etag of %q: the live policy changed",
			req.ParentEtag, "policies/"+e.PolicyName())
	}
	return CommitPlan{Live: e.Policy, HeadCommit: e.Source.HeadCommit, Delete: e.Name}, nil
}

// Rebalance returns, updated, the experiments of polName that were over
// the cap and now fit under it (after a delete or commit), oldest first.
// Previewed experiments are never demoted, even when the cap was lowered.
func Rebalance(exps []*Experiment, polName string, s Settings) []*Experiment {
	room := s.maxPerPolicy() - countPreviewed(exps, polName)
	var waiting []*Experiment
	for _, e := range exps {
		if e != nil && !e.Previewed && e.Conflict == "" && e.PolicyName() == polName {
			waiting = append(waiting, e)
		}
	}
	slices.SortFunc(waiting, func(a, b *Experiment) int {
		return cmp.Or(a.CreateTime.Compare(b.CreateTime), cmp.Compare(a.Name, b.Name))
	})
	var out []*Experiment
	for _, e := range waiting[:max(0, min(room, len(waiting)))] {
		c := e.clone()
		c.Previewed, c.Reason = true, ""
		out = append(out, c)
	}
	return out
}
