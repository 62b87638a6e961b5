package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/preview"
)

// The commit path of branch and API experiments. A commit is atomic, as
// AIP-236 asks: the leader builds the commit main would get, runs on its
// tree exactly the checks of a main commit (validate: size, load, merge,
// compile, every policy test), and pushes only when they pass. Any
// failure ends the operation with the reason and leaves the experiment,
// main and the live generation as they were.
//
//   - A branch experiment is merged: a merge commit of the branch's head
//     into main's head (gitsource.CommitMerge), keeping the branch's files,
//     layout and history and main's newer changes.
//   - An API experiment writes only what changed in its policy's
//     directory (policyDir, layout.go).

// ErrNoCommitter means the policy source cannot write commits.
var ErrNoCommitter = errs.Sentinel(errs.FailedPrecondition, "the policy source cannot write commits")

// PolicyCommitter is a Source that can replace a policy directory on the
// live branch in one commit (gitsource.Source.CommitPolicy).
type PolicyCommitter interface {
	CommitPolicy(ctx context.Context, req gitsource.CommitPolicyRequest) (string, error)
}

// MergeCommitter is a Source that can merge a commit into the live branch
// (gitsource.Source.CommitMerge).
type MergeCommitter interface {
	CommitMerge(ctx context.Context, req gitsource.MergeRequest) (string, error)
}

// Committer is the commit path of branch and API experiments: it writes
// an experiment to the live branch once the tree main would hold passes
// the checks of a main commit.
type Committer struct {
	cfg   *Config // the loop's
	trees *Trees
}

// CommitMerge implements MergeCommitter, apart from history walks as
// Revert is.
func (g *GitSource) CommitMerge(ctx context.Context, req gitsource.MergeRequest) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.Source.CommitMerge(ctx, req)
}

// CommitToMain writes e to the live branch, checked, and returns the new
// commit of main. Refusals are *preview.Error.
func (cm *Committer) CommitToMain(ctx context.Context, e *preview.Experiment, msg string) (string, error) {
	pol := e.PolicyName()
	check := cm.commitCheck(e)
	var commit string
	var err error
	switch {
	case e.Source.Kind == preview.SourceBranch:
		mc, ok := cm.cfg.Source.(MergeCommitter)
		if !ok {
			return "", ErrNoCommitter
		}
		commit, err = mc.CommitMerge(ctx, gitsource.MergeRequest{Source: e.Source.HeadCommit, Message: msg,
			Now: cm.cfg.Now(), Check: check})
	default:
		committer, ok := cm.cfg.Source.(PolicyCommitter)
		if !ok {
			return "", ErrNoCommitter
		}
		// The edit is made to main's files as the commit finds them.
		edit := func(root map[string][]byte) (map[string][]byte, error) { return cm.policyDir(root, pol, e.Policy) }
		commit, err = committer.CommitPolicy(ctx, gitsource.CommitPolicyRequest{Policy: pol, Edit: edit, Message: msg,
			Now: cm.cfg.Now(), Check: check})
	}
	var conflict *gitsource.ConflictError
	switch {
	case errors.As(err, &conflict):
		return "", &preview.Error{Code: preview.FailedPrecondition, Msg: fmt.Sprintf(
			"%s cannot be merged into %s without a human (nothing was pushed): %s", e.Name, cm.cfg.Branch, conflict.Error())}
	case errors.Is(err, gitsource.ErrNoChange):
		return "", fmt.Errorf("%w: the live branch already holds this version of %s", gitsource.ErrNoChange, pol)
	}
	return commit, err
}

// commitCheck judges the tree main would hold: the checks of a main
// commit, and the experiment's policy must come out with the
// experiment's etag (main may have moved since the etag was shown: then
// the commit is ABORTED, to be retried on the new version).
func (cm *Committer) commitCheck(e *preview.Experiment) gitsource.CheckFunc {
	return func(files map[string][]byte) error {
		v := cm.trees.validate(files)
		if len(v.Problems) > 0 {
			return &preview.Error{Code: preview.FailedPrecondition, Msg: fmt.Sprintf(
				"committing %s would make %s invalid, so nothing was pushed: %s", e.Name, cm.cfg.Branch,
				strings.Join(capProblems(v.Problems), "; "))}
		}
		pol := e.PolicyName()
		got, ok := v.Etags[pol]
		if !ok && preview.IsNoOp(e.Policy) {
			return nil // a branch deleting the policy
		}
		if got != e.Etag {
			return &preview.Error{Code: preview.Aborted, Msg: fmt.Sprintf(
				"%s changed since its etag was read (the live branch moved); nothing was pushed: read it again and retry", e.Name)}
		}
		return nil
	}
}

// validation is the verdict on the tree main would hold with e committed
// (an API experiment's test results on its resource), nil when there is
// no live tree to start from.
func (cm *Committer) validation(e *preview.Experiment) *preview.Validation {
	g, ok := servedGeneration(cm.cfg.Store.State())
	if !ok {
		return nil
	}
	pol := e.PolicyName()
	dir, err := cm.policyDir(g.Files, pol, e.Policy)
	if err != nil {
		return &preview.Validation{Errors: []string{err.Error()}}
	}
	tree := map[string][]byte{}
	for k, v := range g.Files {
		if !strings.HasPrefix(k, pol+"/") {
			tree[k] = v
		}
	}
	for k, v := range dir {
		tree[pol+"/"+k] = v
	}
	v := cm.trees.validate(tree)
	probs := v.Problems
	if len(probs) > maxExperimentProblems { // the experiment document must stay small in the raft log
		probs = append(probs[:maxExperimentProblems:maxExperimentProblems],
			fmt.Sprintf("… and %d more problems", len(probs)-maxExperimentProblems))
	}
	out := &preview.Validation{Valid: len(probs) == 0, Errors: capProblems(nonNilStrings(probs))}
	if c, ok := v.Tests[pol]; ok {
		out.Tests = &c
	}
	return out
}

// maxExperimentProblems bounds the problems an experiment's validation
// keeps; `reconciler validate` or the commit's error lists them all.
const maxExperimentProblems = 10

// WithValidation is e with its Validation computed (API experiments).
func (cm *Committer) WithValidation(e *preview.Experiment) *preview.Experiment {
	if e == nil || (e.Source.Kind != preview.SourceAPI && e.Source.Kind != "") {
		return e
	}
	c := *e
	c.Validation = cm.validation(e)
	return &c
}
