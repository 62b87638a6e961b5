package github

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/policyrollout/reconciler/internal/experiments"
	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/reconcile"
)

// PullRecordPrefix names the replicated records of open pull requests
// ("pulls/42") in logs. They live in raftstore's Pulls table, beside the
// branch records (records.go): what each open pull request into the live
// branch changes, the etags of its changed policies, whether its tree
// validates, and its preview state as set by comment commands.
const PullRecordPrefix = "pulls/"

// maxPulls bounds how many open pull requests the leader tracks.
const maxPulls = 200

// PullRecord is one open pull request into the live branch, as an
// experiment tracked by the leader (CONTRACT.md §5).
type PullRecord = raftstore.PullRecord

// ReadPullRecords returns the replicated pull request records by number.
func ReadPullRecords(st *raftstore.State) map[int]PullRecord {
	return maps.Clone(st.Pulls)
}

// PullInvalid reports whether pull request n is recorded as invalid at
// head (experiments.PullRequests): a commit of its experiments is then
// refused before GitHub is asked to merge.
func (g *Worker) PullInvalid(n int, head string) bool {
	rec, ok := ReadPullRecords(g.cfg.Store.State())[n]
	return ok && rec.HeadCommit == head && !rec.Validation.Valid
}

// pullEntry caches a computed record with what it was computed from.
type pullEntry struct {
	main string
	rec  PullRecord
}

// openListKey identifies the open pull request list for the skip check:
// numbers, heads and bases (a base edited away from the live branch ends
// the experiment though no ref moved).
func openListKey(open []forge.PullRequest) string {
	var b strings.Builder
	for _, p := range open {
		fmt.Fprintf(&b, "%d@%s>%s;", p.Number, p.HeadSHA, p.BaseRef)
	}
	return b.String()
}

// SyncPulls records every open pull request into the live branch whose
// head the fetch brought (refs/pull/N/head), written only when it changed,
// deletes the records of pull requests no longer open, and returns what
// each open one changes, for its experiments (reconcile.Pulls). live holds
// the etags main stands for. Before the worker listed the pull requests
// once, it does nothing and returns nil changes (reconcile.Pulls).
func (g *Worker) SyncPulls(ctx context.Context, refs *gitsource.Refs, live map[string]string) ([]experiments.Change, error) {
	open, listed := g.openPulls()
	if !listed {
		return nil, nil
	}
	want := map[int]PullRecord{}
	for _, p := range open {
		if len(want) == maxPulls {
			g.log.Warn("too many open pull requests; tracking the oldest", "tracked", maxPulls)
			break
		}
		head, ok := refs.Pulls[p.Number]
		if !ok || (p.BaseRef != "" && p.BaseRef != g.cfg.Branch) {
			continue
		}
		rec, err := g.pullRecord(p, head, refs.Main, live)
		if err != nil {
			return nil, err
		}
		want[p.Number] = rec
	}
	g.judgeAuthors(ctx, want)
	if err := g.writePulls(ctx, want); err != nil {
		return nil, err
	}
	st := g.cfg.Store.State()         // the records as written, preview state included
	changes := []experiments.Change{} // not nil: the open pull requests are known
	for _, n := range slices.Sorted(maps.Keys(want)) {
		if rec := want[n]; len(rec.ChangedPolicies) > 0 {
			written, ok := st.Pulls[n]
			hold := !ok || held(written) // a record past raftstore's bounds is held too
			changes = append(changes, experiments.Change{Policies: rec.ChangedPolicies, Main: rec.MainCommit, Hold: hold,
				Source: preview.Source{Kind: preview.SourcePullRequest, Number: n, HeadCommit: rec.HeadCommit, URL: rec.URL}})
		}
	}
	return changes, nil
}

// writePulls proposes the records that changed and deletes the gone ones.
// It keeps each record's preview state as the comment commands set it:
// under pullMu, read from the state current then, so a command's change
// made while the records were computed is not overwritten.
func (g *Worker) writePulls(ctx context.Context, want map[int]PullRecord) error {
	g.pullMu.Lock()
	defer g.pullMu.Unlock()
	st := g.cfg.Store.State()
	old := ReadPullRecords(st)
	for n, prev := range old {
		if rec, ok := want[n]; ok {
			want[n] = carried(prev, rec)
			if prev.Preview == string(preview.Active) && want[n].Preview == string(preview.Suspended) {
				g.log.Info("a non-writer's pull request moved past the head a writer approved; its preview is held again",
					"pull", n, "approved", prev.ApprovedHead, "head", rec.HeadCommit)
			}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(want)) {
		rec := want[n]
		if prev, ok := old[n]; ok && reconcile.SameRecord(prev, rec) {
			continue
		}
		if err := rec.Validate(); err != nil {
			// Past raftstore's bounds (a hostile pull request): leave it
			// out rather than stop the pass.
			g.log.Warn("cannot record a pull request; skipped", "pull", n, "error", err)
			continue
		}
		if _, err := g.cfg.Store.Propose(ctx, &raftstore.PutPull{Record: rec}); err != nil {
			return fmt.Errorf("recording %s%d: %w", PullRecordPrefix, n, err)
		}
		g.log.Info("pull request recorded", "pull", n, "head", rec.HeadCommit,
			"changed_policies", rec.ChangedPolicies, "valid", rec.Validation.Valid)
	}
	return g.deleteClosedPulls(ctx, st, old, want)
}

// deleteClosedPulls deletes the records of the pull requests no longer
// wanted and their command claims, in one log entry.
func (g *Worker) deleteClosedPulls(ctx context.Context, st *raftstore.State, old, want map[int]PullRecord) error {
	closed := map[int]bool{}
	var ps []raftstore.Payload
	for _, n := range slices.Sorted(maps.Keys(old)) {
		if _, keep := want[n]; !keep {
			closed[n] = true
			ps = append(ps, &raftstore.DeletePull{Number: n})
		}
	}
	if len(ps) == 0 {
		return nil
	}
	p, err := raftstore.Batch(append(ps, claimDeletes(st, closed, 0)...)...)
	if err == nil {
		_, err = g.cfg.Store.Propose(ctx, p)
	}
	if err != nil {
		return fmt.Errorf("deleting closed pull requests: %w", err)
	}
	for _, n := range slices.Sorted(maps.Keys(closed)) {
		g.log.Info("pull request closed; record deleted", "pull", n)
	}
	return nil
}

// pullRecord compares what a pull request would make of main (its merge,
// reconcile's merged.go) with main and validates that tree (the same
// checks as a main commit: Examiner), cached per head and main for the
// term.
func (g *Worker) pullRecord(p forge.PullRequest, head, main gitsource.Revision, live map[string]string) (PullRecord, error) {
	if e, ok := g.pulls[p.Number]; ok && e.rec.HeadCommit == head.Hash && e.main == main.Hash {
		e.rec.Title, e.rec.URL, e.rec.Author = pullTitle(p), p.URL, p.Author
		return e.rec, nil
	}
	ex, err := g.cfg.Examiner.Examine(head, main)
	if err != nil {
		return PullRecord{}, fmt.Errorf("pull request #%d: %w", p.Number, err)
	}
	rec := PullRecord{Number: p.Number, Title: pullTitle(p), URL: p.URL, Author: p.Author, HeadCommit: head.Hash,
		MainCommit: main.Hash, ChangedPolicies: ex.ChangedPolicies, Etags: map[string]string{},
		LiveEtags: map[string]string{}, Validation: ex.Validation, Preview: "ACTIVE",
		HiddenReads: g.hiddenReads(ex.ChangedMatches)}
	for _, name := range rec.ChangedPolicies {
		if e, ok := ex.Etags[name]; ok {
			rec.Etags[name] = e
		}
		if e, ok := live[name]; ok {
			rec.LiveEtags[name] = e
		}
	}
	g.pulls[p.Number] = pullEntry{main: main.Hash, rec: rec}
	return rec, nil
}

// pullTitle is a pull request's title as a record holds it (GitHub bounds
// titles well below raftstore.MaxTextBytes; this makes sure).
func pullTitle(p forge.PullRequest) string {
	return raftstore.ClipText(p.Title, raftstore.MaxTextBytes)
}

// OpenKey identifies the open pull requests the worker last listed
// (reconcile.Pulls).
func (g *Worker) OpenKey() string {
	open, listed := g.openPulls()
	if !listed {
		return "unlisted"
	}
	return openListKey(open)
}
