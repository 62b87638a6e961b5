package reconcile

import (
	"context"
	"maps"
	"path"
	"slices"

	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// wantedExperiment is what one branch or pull request wants for one
// policy: the policy and the experiment's full Source (kind, branch or
// pull request number and URL, head commit).
type wantedExperiment struct {
	policy *policy.Policy
	source preview.Source
	// conflict, when set, is why the source cannot be merged into main:
	// the experiment is listed, not previewed.
	conflict string
	// hold keeps the experiment from starting by itself: a pull request
	// whose preview is SUSPENDED (a non-writer's, or stopped by command).
	hold bool
}

// syncExperiments makes the "branch-<name>" experiments match the branches
// (after syncBranches computed the records): one per changed policy that
// loads and compiles (a NoOp for a policy the branch deletes), created,
// updated or deleted as needed. epoch is the count of commits this leader
// had pushed when the pass fetched: when a commit happened since, the refs
// are stale and the next pass (already triggered) does the work.
func (l *Loop) syncExperiments(ctx context.Context, refs *gitsource.Refs, epoch uint64) error {
	want, err := l.wantedBranchExperiments(refs)
	if err != nil {
		return err
	}
	l.expMu.Lock()
	defer l.expMu.Unlock()
	if l.commits.Load() != epoch {
		return nil
	}
	return l.syncSourceExperiments(ctx, preview.SourceBranch, want)
}

// syncSourceExperiments makes the experiments of source kind (branch or
// pull request) match want, by experiment name: a missing one is created
// (and auto-started), one whose policy changed is updated (and
// auto-started), one whose head alone moved keeps its preview with the new
// head, and one of that kind no longer wanted is deleted. A name held by
// an experiment of another kind (an API one took it first) is left alone.
// Called with expMu held.
func (l *Loop) syncSourceExperiments(ctx context.Context, kind preview.SourceKind, want map[string]wantedExperiment) error {
	noun, goneMsg := "pull request", "pull request closed or back to live; experiment deleted"
	if kind == preview.SourceBranch {
		noun, goneMsg = "branch", "branch gone or back to live; experiment deleted"
	}
	now := l.cfg.Now()
	exps := l.experiments(l.cfg.Store.State())
	byName := map[string]*preview.Experiment{}
	for _, e := range exps {
		byName[e.Name] = e
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		w := want[name]
		head := w.source.HeadCommit
		cur := byName[name]
		var next *preview.Experiment
		switch {
		case cur == nil:
			e, err := preview.Create(exps, preview.CreateRequest{Parent: "policies/" + w.policy.Name, Policy: w.policy,
				Source: w.source}, l.settings(), now)
			if err != nil {
				l.log.Warn("cannot create the "+noun+" experiment", "experiment", name, "error", err)
				continue
			}
			next = l.autoStart(w, preview.SetConflict(e, w.conflict, exps, l.settings()), now)
			exps = append(exps, next)
		case cur.Source.Kind != kind:
			continue // an experiment of another kind took the name first
		case cur.Etag != w.policy.Etag():
			e, err := preview.Update(cur, preview.UpdateRequest{Policy: w.policy, HeadCommit: head}, now)
			if err != nil {
				l.log.Warn("cannot update the "+noun+" experiment", "experiment", name, "error", err)
				continue
			}
			next = l.autoStart(w, preview.SetConflict(e, w.conflict, exps, l.settings()), now)
		case cur.Source.HeadCommit != head:
			c := *cur // same policy, new head: keep the preview running
			c.Source.HeadCommit, c.UpdateTime = head, now
			next = preview.SetConflict(&c, w.conflict, exps, l.settings())
		case cur.Conflict != w.conflict: // main moved: the merge (no longer) conflicts
			next = l.autoStart(w, preview.SetConflict(cur, w.conflict, exps, l.settings()), now)
		default:
			continue
		}
		if err := l.putExperiment(ctx, next); err != nil {
			return err
		}
		args := []any{"experiment", name, "etag", next.Etag, "head", head, "active", next.IsActive()}
		if kind == preview.SourceBranch {
			args = append(args, "previewed", next.Previewed)
		}
		l.log.Info(noun+" experiment recorded", args...)
	}
	for _, e := range exps {
		if _, keep := want[e.Name]; keep || e.Source.Kind != kind || byName[e.Name] == nil {
			continue
		}
		if err := l.deleteExperiment(ctx, e.Name); err != nil {
			return err
		}
		l.log.Info(goneMsg, "experiment", e.Name)
	}
	return nil
}

// wantedBranchExperiments computes, by experiment name, what each branch
// wants, from the branch records of the replicated state (written by
// syncBranches this pass) and the policies at each branch's head.
func (l *Loop) wantedBranchExperiments(refs *gitsource.Refs) (map[string]wantedExperiment, error) {
	st := l.cfg.Store.State()
	var liveTree map[string][]byte
	if g, ok := servedGeneration(st); ok {
		liveTree = g.Files
	}
	want := map[string]wantedExperiment{}
	for _, rec := range ReadBranchRecords(st) {
		if rec.Branch == l.cfg.Branch || len(rec.ChangedPolicies) == 0 {
			continue
		}
		if b, ok := refs.Branches[rec.Branch]; !ok || b.Hash != rec.HeadCommit {
			continue // a record of an earlier pass
		}
		src := preview.Source{Kind: preview.SourceBranch, Branch: rec.Branch, HeadCommit: rec.HeadCommit}
		if err := l.wantSource(want, src, refs.Main.Hash, rec.ChangedPolicies, liveTree); err != nil {
			return nil, err
		}
	}
	return want, nil
}

// wantSource adds to want the experiments of one branch or pull request
// at src.HeadCommit merged into main (sourceFiles): one for each changed
// policy that has a policy there. A source whose id cannot be made adds
// none.
func (l *Loop) wantSource(want map[string]wantedExperiment, src preview.Source, main string, changed []string,
	liveTree map[string][]byte) error {
	id, err := preview.ExperimentID(src, "")
	if err != nil {
		return nil
	}
	files, conflict, err := l.sourceFiles(main, src.HeadCommit)
	if err != nil {
		return err
	}
	rules := 0 // a branch's experiments together compile no more than a generation may
	for _, pol := range changed {
		p := l.branchPolicy(files, liveTree, pol)
		if p == nil {
			continue
		}
		if rules += len(p.Rules); rules > l.cfg.MaxSourceRules {
			l.log.Warn("the changed policies of a source have more rules than a tree may; the rest are not previewed",
				"source", id, "rules", rules, "limit", l.cfg.MaxSourceRules)
			break
		}
		want[preview.ResourceName(pol, id)] = wantedExperiment{policy: p, source: src, conflict: conflict}
	}
	return nil
}

// branchFiles reads a branch head's policies root, cached by commit.
func (l *Loop) branchFiles(commit string) (map[string][]byte, error) {
	l.expCacheMu.Lock()
	defer l.expCacheMu.Unlock()
	if f, ok := l.expCache[commit]; ok {
		return f, nil
	}
	files, problems, err := l.read(gitsource.Revision{Ref: "branch", Hash: commit})
	if err != nil {
		return nil, err
	}
	if problems != nil {
		files = map[string][]byte{}
	}
	if len(l.expCache) > 4*maxBranches {
		clear(l.expCache)
	}
	l.expCache[commit] = files
	return files, nil
}

// branchPolicy is the experiment policy of pol at a branch: the branch's
// version when it loads and compiles, a NoOp of the live version when the
// branch deletes it, nil when it cannot be previewed.
func (l *Loop) branchPolicy(files, liveTree map[string][]byte, pol string) *policy.Policy {
	if _, ok := files[path.Join(pol, "policy.toml")]; !ok {
		var live *policy.Policy
		if liveTree != nil {
			live, _ = policy.LoadPolicy(gitsource.FilesFS(liveTree), pol, l.cfg.LoadOptions)
		}
		if live == nil {
			return nil
		}
		return preview.NoOp(live, pol)
	}
	p, err := policy.LoadPolicy(gitsource.FilesFS(files), pol, l.cfg.LoadOptions)
	if err != nil || preview.CheckPolicy(p, l.cfg.EngineOptions) != nil {
		return nil
	}
	return p
}
