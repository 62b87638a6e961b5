package reconcile

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/experiments"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// maxBranches bounds how many branches the leader tracks (by name order);
// each costs two policy loads and a validation when it or main moves.
const maxBranches = 200

// branchRecorder records the other branches of the repository for the
// pass (BranchRecord) and says what each changes, for the experiments.
type branchRecorder struct {
	cfg   *Config // the loop's
	log   hclog.Logger
	trees *Trees
}

// branchEntry is a computed branch record and the main commit it was
// computed against.
type branchEntry struct {
	main string
	rec  BranchRecord
}

// syncBranches records every branch other than the live one: which
// policies differ from the live branch's head and whether its tree
// validates. Records are recomputed only for branches whose head or main
// moved, written only when they differ from the replicated ones, and
// deleted when their branch is gone: an idle poll writes nothing. It
// returns what each branch changes, for the experiments.
func (b *branchRecorder) syncBranches(ctx context.Context, t *term, refs *gitsource.Refs) ([]experiments.Change, error) {
	want, err := b.branchRecords(t, refs)
	if err != nil {
		return nil, err
	}
	if err := b.writeBranches(ctx, want); err != nil {
		return nil, err
	}
	var changes []experiments.Change
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if rec := want[name]; len(rec.ChangedPolicies) > 0 {
			changes = append(changes, experiments.Change{Policies: rec.ChangedPolicies, Main: refs.Main.Hash,
				Source: preview.Source{Kind: preview.SourceBranch, Branch: rec.Branch, HeadCommit: rec.HeadCommit}})
		}
	}
	return changes, nil
}

// writeBranches proposes the records that changed and deletes the gone ones.
func (b *branchRecorder) writeBranches(ctx context.Context, want map[string]BranchRecord) error {
	st := b.cfg.Store.State()
	for _, name := range slices.Sorted(maps.Keys(want)) {
		rec := want[name]
		if old, ok := st.Branches[rec.Branch]; ok && SameRecord(old, rec) {
			continue
		}
		if err := rec.Validate(); err != nil {
			// A name or content past raftstore's bounds (a hostile
			// push): leave the branch out rather than stop the pass.
			b.log.Warn("cannot record a branch; skipped", "record", name, "error", err)
			continue
		}
		if _, err := b.cfg.Store.Propose(ctx, &raftstore.PutBranch{Record: rec}); err != nil {
			return fmt.Errorf("recording %s: %w", name, err)
		}
		b.log.Info("branch recorded", "revision", rec.Revision, "changed_policies", rec.ChangedPolicies,
			"valid", rec.Validation.Valid)
	}
	for _, branch := range slices.Sorted(maps.Keys(st.Branches)) {
		name := BranchRecordPrefix + branch
		if _, keep := want[name]; keep {
			continue
		}
		if _, err := b.cfg.Store.Propose(ctx, &raftstore.DeleteBranch{Branch: branch}); err != nil {
			return fmt.Errorf("deleting %s: %w", name, err)
		}
		b.log.Info("branch gone; record deleted", "record", name)
	}
	return nil
}

// branchRecords computes the wanted records, by record name.
func (b *branchRecorder) branchRecords(t *term, refs *gitsource.Refs) (map[string]BranchRecord, error) {
	names := slices.Sorted(maps.Keys(refs.Branches))
	names = slices.DeleteFunc(names, func(n string) bool { return n == b.cfg.Branch })
	if len(names) > maxBranches {
		b.log.Warn("too many branches; tracking the first ones by name", "branches", len(names), "tracked", maxBranches)
		names = names[:maxBranches]
	}
	want := make(map[string]BranchRecord, len(names))
	for _, name := range names {
		head := refs.Branches[name]
		e, ok := t.branches[name]
		if !ok || e.rec.HeadCommit != head.Hash || e.main != refs.Main.Hash {
			rec, err := b.branchRecord(head, refs.Main)
			if err != nil {
				return nil, err
			}
			e = branchEntry{main: refs.Main.Hash, rec: rec}
			t.branches[name] = e
		}
		want[BranchRecordPrefix+name] = e.rec
	}
	for name := range t.branches {
		if _, ok := refs.Branches[name]; !ok {
			delete(t.branches, name)
		}
	}
	return want, nil
}

// branchRecord compares what one branch would make of main (merged.go)
// with main and validates that tree.
func (b *branchRecorder) branchRecord(head, main gitsource.Revision) (BranchRecord, error) {
	ex, err := b.trees.Examine(head, main)
	if err != nil {
		return BranchRecord{}, err
	}
	return BranchRecord{Branch: head.Ref, HeadCommit: head.Hash, Revision: head.String(),
		ChangedPolicies: ex.ChangedPolicies, Validation: ex.Validation}, nil
}

// Examination is what a branch or pull request would make of main
// (merged.go): the policies it changes, whether the merged tree is valid,
// and the etags of its policies when it is.
type Examination struct {
	// ChangedPolicies names, sorted, the policies whose content differs.
	ChangedPolicies []string
	Validation      BranchValidation
	// Etags are the etags of every policy of the merged tree (valid
	// trees only).
	Etags map[string]string
	// ChangedMatches are the match expressions of the rules the source
	// adds or changes (changedMatches): what a preview of it evaluates
	// that main does not.
	ChangedMatches []string
}

// Examine compares what head would make of main with main and validates
// that tree with the same checks as a main commit: the shared work of
// branch records and pull request records (internal/github).
func (t *Trees) Examine(head, main gitsource.Revision) (Examination, error) {
	c, err := t.changeOf(main, head)
	if err != nil {
		return Examination{}, err
	}
	val, v := t.judge(c)
	return Examination{ChangedPolicies: c.changed, Validation: val, Etags: v.Etags,
		ChangedMatches: t.changedMatches(c, main)}, nil
}
