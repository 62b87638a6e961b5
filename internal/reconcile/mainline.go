package reconcile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// step is what one commit of the live branch becomes.
type step struct {
	commit string
	// files and etags are set for a valid tree, problems for an invalid one.
	files    map[string][]byte
	etags    map[string]string
	problems []string
}

func (s step) valid() bool { return len(s.problems) == 0 }

// syncMain turns the live branch's new commits into generations, oldest
// first, so that every commit is accounted for in order: an invalid one is
// recorded INVALID (MarkInvalid) and never served; the newest valid one is
// staged, and older valid ones of the same pass are superseded before
// staging (the cluster never serves a commit that main has already moved
// past). A commit whose policies equal those of the generation being
// served or staged (it touched no policy) makes no generation.
//
// "New" starts after the cursor: the last commit handled in this term, or
// at the start of a term the newest generation's commit in the replicated
// state, so a new leader resumes where the old one stopped and nothing is
// recorded twice.
func (l *Loop) syncMain(ctx context.Context, t *term, head gitsource.Revision) error {
	st := l.cfg.Store.State()
	if ok, err := l.mayPromote(st, head); !ok || err != nil {
		return err
	}
	from := t.cursor
	if from == "" {
		if g, ok := st.Generation(st.Highest); ok {
			from = g.Commit
		}
	}
	commits, err := l.cfg.Source.Commits(from, head.Hash, l.cfg.MaxCommits)
	if err != nil {
		return err
	}
	if len(commits) == 1 && from != "" && commits[0] == head.Hash {
		l.log.Debug("taking the newest commit only", "revision", head.String(), "after", l.revision(from))
	}
	steps, err := l.plan(st, commits)
	if err != nil {
		return err
	}
	if err := l.apply(ctx, st.Highest, steps); err != nil {
		return err
	}
	t.cursor = head.Hash
	return nil
}

// plan reads and validates each commit; it proposes nothing.
func (l *Loop) plan(st *raftstore.State, commits []string) ([]step, error) {
	ref, newestInvalid := reference(st)
	var steps []step
	lastValid := -1
	for _, c := range commits {
		files, problems, err := l.read(gitsource.Revision{Ref: l.cfg.Branch, Hash: c})
		if err != nil {
			return nil, err
		}
		if problems == nil && l.cfg.Verify != nil {
			if _, verr := l.cfg.Verify(c); verr != nil {
				problems = []string{verr.Error()} // fail-closed: never served
			}
		}
		if problems == nil && !newestInvalid && ref != nil && l.samePolicies(ref, files) {
			l.metrics.result("no_policy_change")
			l.log.Info("commit changes no policy; no new generation", "revision", l.revision(c))
			continue
		}
		s := step{commit: c, problems: problems}
		if problems == nil {
			v := l.validate(files)
			s.problems, s.etags = v.Problems, v.Etags
		}
		if s.valid() {
			if lastValid >= 0 {
				steps[lastValid].files = nil // superseded: only the newest is staged
			}
			s.files, ref, lastValid = files, files, len(steps)
		}
		newestInvalid = !s.valid()
		steps = append(steps, s)
	}
	return steps, nil
}

// reference is the tree the newest generation serves or will serve, which
// a commit is compared with, and whether the newest generation is INVALID
// (then every commit is validated: main is broken until a valid one).
func reference(st *raftstore.State) (map[string][]byte, bool) {
	if g, ok := st.Generation(st.Highest); ok && g.State == raftstore.GenerationInvalid {
		return nil, true
	}
	if g, ok := st.StagedGeneration(); ok {
		return g.Files, false
	}
	if g, ok := st.ActiveGeneration(); ok {
		return g.Files, false
	}
	return nil, false
}

// read gets a commit's policies root; a root that is missing or too large
// is a problem of that commit (gitsource.TreeProblem), not a failure of
// the pass.
func (l *Loop) read(rev gitsource.Revision) (map[string][]byte, []string, error) {
	files, err := gitsource.ReadPolicies(l.cfg.Source, rev)
	var problem *gitsource.TreeProblem
	switch {
	case errors.As(err, &problem):
		return nil, []string{problem.Msg}, nil
	case err != nil:
		return nil, nil, err
	}
	return files, nil, nil
}

// samePolicies reports whether two trees hold the same policies, by etag
// (gitsource.ChangedPoliciesFS): files outside policies, comments and
// layout do not count.
func (l *Loop) samePolicies(a, b map[string][]byte) bool {
	if maps.EqualFunc(a, b, bytes.Equal) {
		return true
	}
	changed, err := gitsource.ChangedPoliciesFS(gitsource.FilesFS(a), gitsource.FilesFS(b), l.cfg.LoadOptions)
	return err == nil && len(changed) == 0
}

// apply proposes the plan in commit order; generation numbers follow it.
func (l *Loop) apply(ctx context.Context, highest uint64, steps []step) error {
	last := -1
	for i, s := range steps {
		if s.valid() {
			last = i
		}
	}
	n := highest
	for i, s := range steps {
		var err error
		switch {
		case !s.valid():
			n++
			err = l.markInvalid(ctx, n, s.commit, s.problems)
		case i == last:
			n++
			err = l.stage(ctx, n, s)
		default:
			l.metrics.result("superseded")
			l.log.Info("valid commit superseded by a newer one before staging", "revision", l.revision(s.commit))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// stage proposes a valid tree as generation n.
func (l *Loop) stage(ctx context.Context, n uint64, s step) error {
	_, stats, err := raftstore.ProposeGeneration(ctx, l.cfg.Store, &raftstore.StageGeneration{Generation: n,
		Commit: s.commit, Files: s.files, Etags: s.etags, History: l.history(l.cfg.Store.State(), s.commit)})
	if errors.Is(err, raftstore.ErrTooLarge) {
		return l.markInvalid(ctx, n, s.commit, []string{err.Error()})
	}
	if err != nil {
		return fmt.Errorf("staging generation %d: %w", n, err)
	}
	l.metrics.result("staged")
	l.log.Info("generation staged", "generation", n, "revision", l.revision(s.commit), "policies", len(s.etags),
		"chunked", stats.Chunked, "chunks_sent", stats.Chunks, "chunk_bytes_sent", stats.ChunkBytes)
	return nil
}

// markInvalid records a commit that failed validation as INVALID
// generation n; the active generation keeps serving.
func (l *Loop) markInvalid(ctx context.Context, n uint64, commit string, problems []string) error {
	_, err := l.cfg.Store.Propose(ctx, &raftstore.MarkInvalid{Generation: n, Commit: commit,
		Errors: capProblems(problems)})
	if err != nil {
		return fmt.Errorf("recording invalid generation %d: %w", n, err)
	}
	l.metrics.result("invalid")
	l.log.Warn("generation invalid; the active generation keeps serving", "generation", n,
		"revision", l.revision(commit), "problems", len(problems), "first", problems[0])
	return nil
}

// validate checks that a tree can become a generation, exactly as
// `reconciler validate` does: the tree budgets (within
// raftstore.MaxGenerationBytes, which stage checks again) and every policy
// valid.
func (l *Loop) validate(files map[string][]byte) Validation {
	if l.cfg.Validator != nil {
		return l.cfg.Validator(files, l.cfg.LoadOptions, l.cfg.EngineOptions)
	}
	return Validate(files, l.cfg.LoadOptions, l.cfg.EngineOptions)
}

func capProblems(p []string) []string {
	out := make([]string, 0, min(len(p), maxProblems+1))
	for i, s := range p {
		if i == maxProblems {
			out = append(out, fmt.Sprintf("… and %d more problems", len(p)-maxProblems))
			break
		}
		if len(s) > maxProblemLen {
			s = s[:maxProblemLen] + "…"
		}
		out = append(out, s)
	}
	return out
}
