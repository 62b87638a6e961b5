package experiments

import (
	"context"
	"maps"
	"path"
	"slices"

	"github.com/hashicorp/go-hclog"

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
	// unapproved: a non-writer's pull request whose head no writer
	// approved (markUnapproved); its experiment stops even when nothing
	// moved (a record from before approvals were bound to a head).
	unapproved bool
	// lists are the data of the lists the policy uses whose content the
	// live tree lacks, by content hash: sent with the experiment so that
	// every node can compile it (raftstore.PutExperimentWithLists).
	lists map[string][]byte
	// listChanges say what the source does to each list it changes.
	listChanges []preview.ListChange
}

// sourceSync keeps the experiments of branches and pull requests
// ("branch-<name>", "pr-N") in step with what the reconcile pass computed
// of their sources: it loads and checks their policies, and creates,
// updates, holds and deletes their experiments. The service calls it
// with its mu held.
type sourceSync struct {
	cfg     *Config // the service's
	log     hclog.Logger
	records *records
	// checked keeps the verdicts on the sources' policies (check.go).
	checked checkedPolicies
}

// Change is what one branch or pull request changes, as the reconcile
// pass just computed it: its source (kind, branch or pull request number
// and URL, head commit) and the names of the policies it changes.
type Change struct {
	Source   preview.Source
	Policies []string
	// Hold keeps its experiments from starting by themselves: a pull
	// request whose preview is SUSPENDED (a non-writer's, or stopped by a
	// command).
	Hold bool
	// Main is the live branch's commit the source is merged into.
	Main string
}

// SyncBranches makes the "branch-<name>" experiments match the branches
// the pass just recorded: one per changed policy that loads and compiles
// (a NoOp for a policy the branch deletes), created, updated or deleted
// as needed. live is the tree main stands for. epoch is the count of
// commits pushed when the pass fetched (Epoch): when a commit happened
// since, the refs are stale and the next pass (already triggered) does
// the work.
func (s *Service) SyncBranches(ctx context.Context, changes []Change, live map[string][]byte, epoch uint64) error {
	want, err := s.sources.wanted(changes, live)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.commits.Load() != epoch {
		return nil
	}
	return s.sources.syncSourceExperiments(ctx, preview.SourceBranch, want)
}

// syncSourceExperiments makes the experiments of source kind (branch or
// pull request) match want, by experiment name: a missing one is created
// (and auto-started), one whose policy changed is updated (and
// auto-started), one whose head alone moved keeps its preview with the new
// head, and one of that kind no longer wanted is deleted. One a client
// deleted stays deleted while its source proposes the same policy
// (dismiss.go). A name held by
// an experiment of another kind (an API one took it first) is left alone.
// Called with expMu held.
func (ss *sourceSync) syncSourceExperiments(ctx context.Context, kind preview.SourceKind, want map[string]wantedExperiment) error {
	noun, goneMsg := "pull request", "pull request closed or back to live; experiment deleted"
	if kind == preview.SourceBranch {
		noun, goneMsg = "branch", "branch gone or back to live; experiment deleted"
	}
	now := ss.cfg.Now()
	st := ss.cfg.Store.State()
	exps := ss.records.experiments(st)
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
		case cur == nil && isDismissed(st, name, w.policy.Etag()):
			continue // deleted by a client: stays deleted while the source proposes this policy
		case cur == nil:
			e, err := preview.Create(exps, preview.CreateRequest{Parent: "policies/" + w.policy.Name, Policy: w.policy,
				Source: w.source}, ss.cfg.settings(), now)
			if err != nil {
				ss.log.Warn("cannot create the "+noun+" experiment", "experiment", name, "error", err)
				continue
			}
			next = ss.autoStart(w, preview.SetConflict(e, w.conflict, exps, ss.cfg.settings()), now)
			exps = append(exps, next)
		case cur.Source.Kind != kind:
			continue // an experiment of another kind took the name first
		case cur.Etag != w.policy.Etag():
			e, err := preview.Update(cur, preview.UpdateRequest{Policy: w.policy, HeadCommit: head}, now)
			if err != nil {
				ss.log.Warn("cannot update the "+noun+" experiment", "experiment", name, "error", err)
				continue
			}
			next = ss.autoStart(w, preview.SetConflict(e, w.conflict, exps, ss.cfg.settings()), now)
		case cur.Source.HeadCommit != head:
			c := *cur // same policy, new head: keep the preview running, unless held
			c.Source.HeadCommit, c.UpdateTime = head, now
			next = stopHeld(w, preview.SetConflict(&c, w.conflict, exps, ss.cfg.settings()), now)
		case cur.Conflict != w.conflict: // main moved: the merge (no longer) conflicts
			next = ss.autoStart(w, preview.SetConflict(cur, w.conflict, exps, ss.cfg.settings()), now)
		case w.unapproved && cur.IsActive():
			next = stopHeld(w, cur, now)
		case !carriesLists(cur, w):
			c := *cur // the live tree caught up with a list, or dropped one the experiment still uses
			next = &c
		default:
			continue
		}
		if err := ss.putWithLists(ctx, next, w, undismiss(st, name)); err != nil {
			return err
		}
		args := []any{"experiment", name, "etag", next.Etag, "head", head, "active", next.IsActive()}
		if kind == preview.SourceBranch {
			args = append(args, "previewed", next.Previewed)
		}
		ss.log.Info(noun+" experiment recorded", args...)
	}
	for _, e := range exps {
		if _, keep := want[e.Name]; keep || e.Source.Kind != kind || byName[e.Name] == nil {
			continue
		}
		if err := ss.records.deleteExperiment(ctx, e.Name); err != nil {
			return err
		}
		ss.log.Info(goneMsg, "experiment", e.Name)
	}
	return ss.forgetDismissals(ctx, kind, want)
}

// wanted computes, by experiment name, what each source wants.
func (ss *sourceSync) wanted(changes []Change, live map[string][]byte) (map[string]wantedExperiment, error) {
	want := map[string]wantedExperiment{}
	for _, c := range changes {
		if err := ss.wantSource(want, c.Source, c.Main, c.Policies, live); err != nil {
			return nil, err
		}
		if c.Hold {
			holdSource(want, c.Source)
		}
	}
	return want, nil
}

// wantSource adds to want the experiments of one branch or pull request
// at src.HeadCommit merged into main (sourceFiles): one for each changed
// policy that has a policy there. A source whose id cannot be made adds
// none.
func (ss *sourceSync) wantSource(want map[string]wantedExperiment, src preview.Source, main string, changed []string,
	liveTree map[string][]byte) error {
	id, err := preview.ExperimentID(src, "")
	if err != nil {
		return nil
	}
	files, conflict, err := ss.cfg.Leader.SourceFiles(main, src.HeadCommit)
	if err != nil {
		return err
	}
	live := liveLists(liveTree)
	rules := 0 // a source's experiments together compile no more than a generation may
	for _, pol := range changed {
		p := ss.branchPolicy(files, liveTree, pol)
		if p == nil {
			continue
		}
		if rules += len(p.Rules); rules > ss.cfg.MaxSourceRules {
			ss.log.Warn("the changed policies of a source have more rules than a tree may; the rest are not previewed",
				"source", id, "rules", rules, "limit", ss.cfg.MaxSourceRules)
			break
		}
		want[preview.ResourceName(pol, id)] = wantedExperiment{policy: p, source: src, conflict: conflict,
			lists: changedListData(p, live), listChanges: preview.ListChanges(p, live)}
	}
	return nil
}

// branchPolicy is the experiment policy of pol at a branch: the branch's
// version when it loads and compiles (checkSourcePolicy: in the sandbox
// child, since the source's tree may be INVALID precisely because it
// killed one), a NoOp of the live version when the branch deletes it,
// nil when it cannot be previewed.
func (ss *sourceSync) branchPolicy(files, liveTree map[string][]byte, pol string) *policy.Policy {
	if _, ok := files[path.Join(pol, "policy.toml")]; !ok {
		var live *policy.Policy
		if liveTree != nil {
			live, _ = policy.LoadPolicy(gitsource.FilesFS(liveTree), pol, ss.cfg.LoadOptions)
		}
		if live == nil {
			return nil
		}
		return preview.NoOp(live, pol)
	}
	p, err := policy.LoadPolicy(gitsource.FilesFS(files), pol, ss.cfg.LoadOptions)
	if err != nil || ss.checkSourcePolicy(p) != nil {
		return nil
	}
	return p
}
