package reconcile

import (
	"context"

	"github.com/policyrollout/reconciler/internal/experiments"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/preview"
)

// pass is what one reconcile pass computed so far; each step reads what
// the earlier ones left and hands on what it computed, in memory.
type pass struct {
	term *term
	// epoch is the experiment service's commit count at the start.
	epoch uint64
	// refs and fresh are the fetch's outcome.
	refs *gitsource.Refs
	// open is the open pull request list (Pulls.OpenKey).
	open string
	// live is the tree main stands for after the main step, and its etags.
	live      map[string][]byte
	liveEtags map[string]string
	// kind and changes are the experiments' sources and what each changes.
	kind    preview.SourceKind
	changes []experiments.Change
}

// passStep is one step of a pass. run returns stop when the pass ends
// early without an error (unchanged, or a failure it handled itself);
// an error is retried with failed as the warning.
type passStep struct {
	name   string
	run    func(ctx context.Context, p *pass) (stop bool, err error)
	failed string
}

// passSteps is a pass, in order, as flux's source-controller runs its
// reconcile: fetch, skip when unchanged, sync main, sync the sources of
// experiments (branches or pull requests), sync the experiments. The
// clone's housekeeping waits for the next idle pass (stepSkipUnchanged).
func (l *Loop) passSteps() []passStep {
	return []passStep{
		{name: "fetch", run: l.stepFetch},
		{name: "skip-unchanged", run: l.stepSkipUnchanged},
		{name: "sync main", run: l.stepSyncMain, failed: "cannot promote the live branch"},
		{name: "sync sources", run: l.stepSyncSources, failed: "cannot record the branches"},
		{name: "sync experiments", run: l.stepSyncExperiments, failed: "cannot record the branch experiments"},
	}
}

// reconcile runs one pass: old operations are pruned first, then the
// steps in order until one stops or fails. A complete pass remembers its
// refs for the next one's skip-unchanged step.
func (l *Loop) reconcile(ctx context.Context, t *term) {
	defer l.passes.Add(1)
	p := &pass{term: t}
	if l.cfg.Experiments != nil {
		l.cfg.Experiments.PruneOperations(ctx, &t.pruned)
		p.epoch = l.cfg.Experiments.Epoch()
	}
	defer func() {
		if p.refs != nil && l.cfg.Pulls != nil {
			l.cfg.Pulls.Refresh()
		}
	}()
	for _, s := range l.steps {
		stop, err := s.run(ctx, p)
		if err != nil {
			l.retry(ctx, "error", s.failed, err)
			return
		}
		if stop {
			return
		}
	}
	t.refs, t.open = p.refs, p.open
}

// stepFetch brings the clone up to date (fetch); a failure is the
// PullError condition, retried, and logged only when new.
func (l *Loop) stepFetch(ctx context.Context, p *pass) (bool, error) {
	refs, fresh, err := l.fetch(ctx)
	if err != nil {
		msg := "cannot fetch the policy repository"
		if !fresh {
			msg = "" // logged when it started; the record and the view show it
		}
		l.retry(ctx, "pull_error", msg, err)
		return true, nil
	}
	p.refs = refs
	if l.cfg.Pulls != nil {
		p.open = l.cfg.Pulls.OpenKey()
	}
	return false, nil
}

// stepSkipUnchanged ends an idle pass: no ref moved and no pull request
// opened, closed or moved since the last complete pass, and no operator
// accepted a new history (AcceptHistory forces a pass). The first idle
// pass housekeepQuiet after the last one that was not does the clone's
// housekeeping.
func (l *Loop) stepSkipUnchanged(ctx context.Context, p *pass) (bool, error) {
	t := p.term
	if t.refs != nil && sameRefs(t.refs, p.refs) && t.open == p.open && !l.forcePass.Swap(false) {
		l.metrics.result("unchanged")
		l.log.Trace("unchanged", "revision", p.refs.Main.String())
		if t.housekeep && l.cfg.Now().Sub(t.changed) >= l.housekeepQuiet && l.housekeep(ctx, t) {
			t.housekeep = false
		}
		return true, nil
	}
	t.housekeep, t.changed = true, l.cfg.Now() // this pass may have fetched objects
	return false, nil
}

// stepSyncMain turns the live branch's new commits into generations
// (syncMain), then notes the tree main stands for.
func (l *Loop) stepSyncMain(ctx context.Context, p *pass) (bool, error) {
	if err := l.syncMain(ctx, p.term, p.refs.Main); err != nil {
		p.term.cursor = "" // resume from the replicated state
		return false, err
	}
	if g, ok := servedGeneration(l.cfg.Store.State()); ok {
		p.live, p.liveEtags = g.Files, g.Etags
	}
	return false, nil
}

// stepSyncSources records what the experiments come from: the open pull
// requests with [github] (Pulls), else the other branches.
func (l *Loop) stepSyncSources(ctx context.Context, p *pass) (bool, error) {
	var err error
	if l.cfg.Pulls != nil {
		p.kind = preview.SourcePullRequest
		p.changes, err = l.cfg.Pulls.SyncPulls(ctx, p.refs, p.liveEtags)
		return false, err
	}
	p.kind = preview.SourceBranch
	p.changes, err = l.branches.syncBranches(ctx, p.term, p.refs)
	return false, err
}

// stepSyncExperiments makes the experiments follow the sources just
// recorded. With [github] the branch experiments have no source left.
func (l *Loop) stepSyncExperiments(ctx context.Context, p *pass) (bool, error) {
	exps := l.cfg.Experiments
	if exps == nil {
		return false, nil
	}
	branches := p.changes
	if p.kind == preview.SourcePullRequest {
		// Unknown pull requests (nil) are not closed ones: a new leader's
		// first pass must not delete their experiments and their previews.
		if p.changes != nil {
			if err := exps.SyncPulls(ctx, p.changes, p.live); err != nil {
				return false, err
			}
		}
		branches = nil
	}
	return false, exps.SyncBranches(ctx, branches, p.live, p.epoch)
}
