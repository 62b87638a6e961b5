package experiments

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Deleted stays deleted: a branch or pull request experiment that a
// client deletes through the API is recorded as dismissed, with its
// etag, in the same log entry as the delete. The sync then does not
// recreate it while its source proposes that same policy; when the
// source proposes another one (a push that changes the policy, or a main
// that merges into it differently) it is a new experiment, created as
// usual, and the dismissal goes; so does the dismissal of a source that
// no longer changes the policy.

// dismissalPut is the payload that records the delete of e, nil for an
// API experiment (nothing recreates it) or when the table is full (the
// experiment may then come back: logged).
func (s *Service) dismissalPut(st *raftstore.State, e *preview.Experiment) raftstore.Payload {
	if e.Source.Kind != preview.SourceBranch && e.Source.Kind != preview.SourcePullRequest {
		return nil
	}
	if _, ok := st.Dismissed[e.Name]; !ok && len(st.Dismissed) >= raftstore.MaxDismissals {
		s.log.Warn("too many dismissed experiments to record another; it comes back on the next pass",
			"experiment", e.Name, "limit", raftstore.MaxDismissals)
		return nil
	}
	return &raftstore.PutDismissal{Dismissal: raftstore.Dismissal{Name: e.Name, Etag: e.Etag}}
}

// isDismissed reports whether the experiment name was deleted by a
// client while its source proposed etag.
func isDismissed(st *raftstore.State, name, etag string) bool {
	d, ok := st.Dismissed[name]
	return ok && d.Etag == etag
}

// undismiss is the payload that forgets the dismissal of name, if any:
// proposed with the experiment that replaces it.
func undismiss(st *raftstore.State, name string) []raftstore.Payload {
	if _, ok := st.Dismissed[name]; !ok {
		return nil
	}
	return []raftstore.Payload{&raftstore.DeleteDismissal{Name: name}}
}

// forgetDismissals deletes, in one log entry, the dismissals of source
// kind whose source no longer proposes a policy (not in want).
func (ss *sourceSync) forgetDismissals(ctx context.Context, kind preview.SourceKind, want map[string]wantedExperiment) error {
	prefix := "pr-"
	if kind == preview.SourceBranch {
		prefix = "branch-"
	}
	var ps []raftstore.Payload
	for _, name := range slices.Sorted(maps.Keys(ss.cfg.Store.State().Dismissed)) {
		_, id, err := preview.ParseName(name)
		if _, wanted := want[name]; wanted || (err == nil && !strings.HasPrefix(id, prefix)) {
			continue
		}
		ps = append(ps, &raftstore.DeleteDismissal{Name: name})
	}
	if len(ps) == 0 {
		return nil
	}
	return ss.records.propose(ctx, "forgetting dismissed experiments", ps...)
}
