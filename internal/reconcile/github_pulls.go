package reconcile

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/raftstore"
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

// syncPulls records every open pull request into the live branch whose
// head the fetch brought (refs/pull/N/head), written only when it changed,
// and deletes the records of pull requests no longer open. Before the
// GitHub worker listed them once, it does nothing.
func (l *Loop) syncPulls(ctx context.Context, t *term, refs *gitsource.Refs) error {
	open, listed := l.gh.openPulls()
	if !listed {
		return nil
	}
	want := map[int]PullRecord{}
	for _, p := range open {
		if len(want) == maxPulls {
			l.log.Warn("too many open pull requests; tracking the oldest", "tracked", maxPulls)
			break
		}
		head, ok := refs.Pulls[p.Number]
		if !ok || (p.BaseRef != "" && p.BaseRef != l.cfg.Branch) {
			continue
		}
		rec, err := l.pullRecord(t, p, head, refs.Main)
		if err != nil {
			return err
		}
		want[p.Number] = rec
	}
	l.judgeAuthors(ctx, want)
	return l.writePulls(ctx, want)
}

// writePulls proposes the records that changed and deletes the gone ones.
// It keeps each record's preview state as the comment commands set it:
// under pullMu, read from the state current then, so a command's change
// made while the records were computed is not overwritten.
func (l *Loop) writePulls(ctx context.Context, want map[int]PullRecord) error {
	l.gh.pullMu.Lock()
	defer l.gh.pullMu.Unlock()
	st := l.cfg.Store.State()
	old := ReadPullRecords(st)
	for n, prev := range old {
		if rec, ok := want[n]; ok && prev.Preview != "" {
			rec.Preview, rec.Writer = prev.Preview, prev.Writer
			want[n] = rec
		}
	}
	for _, n := range slices.Sorted(maps.Keys(want)) {
		rec := want[n]
		if prev, ok := old[n]; ok && sameRecord(prev, rec) {
			continue
		}
		if err := rec.Validate(); err != nil {
			// Past raftstore's bounds (a hostile pull request): leave it
			// out rather than stop the pass.
			l.log.Warn("cannot record a pull request; skipped", "pull", n, "error", err)
			continue
		}
		if _, err := l.cfg.Store.Propose(ctx, &raftstore.PutPull{Record: rec}); err != nil {
			return fmt.Errorf("recording %s%d: %w", PullRecordPrefix, n, err)
		}
		l.log.Info("pull request recorded", "pull", n, "head", rec.HeadCommit,
			"changed_policies", rec.ChangedPolicies, "valid", rec.Validation.Valid)
	}
	return l.deleteClosedPulls(ctx, st, old, want)
}

// deleteClosedPulls deletes the records of the pull requests no longer
// wanted and their command claims, in one log entry.
func (l *Loop) deleteClosedPulls(ctx context.Context, st *raftstore.State, old, want map[int]PullRecord) error {
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
		_, err = l.cfg.Store.Propose(ctx, p)
	}
	if err != nil {
		return fmt.Errorf("deleting closed pull requests: %w", err)
	}
	for _, n := range slices.Sorted(maps.Keys(closed)) {
		l.log.Info("pull request closed; record deleted", "pull", n)
	}
	return nil
}

// pullRecord compares what a pull request would make of main (merged.go)
// with main and validates that tree (the same checks as a main commit), cached per head and main.
func (l *Loop) pullRecord(t *term, p forge.PullRequest, head, main gitsource.Revision) (PullRecord, error) {
	if e, ok := t.pulls[p.Number]; ok && e.rec.HeadCommit == head.Hash && e.main == main.Hash {
		e.rec.Title, e.rec.URL, e.rec.Author = pullTitle(p), p.URL, p.Author
		return e.rec, nil
	}
	rec := PullRecord{Number: p.Number, Title: pullTitle(p), URL: p.URL, Author: p.Author, HeadCommit: head.Hash,
		MainCommit: main.Hash, ChangedPolicies: []string{}, Etags: map[string]string{}, LiveEtags: map[string]string{},
		Validation: BranchValidation{Errors: []string{}}, Preview: "ACTIVE"}
	c, err := l.changeOf(main, head)
	if err != nil {
		return rec, fmt.Errorf("pull request #%d: %w", p.Number, err)
	}
	rec.ChangedPolicies = c.changed
	var v Validation
	rec.Validation, v = l.judge(c)
	live := l.liveEtags()
	for _, name := range rec.ChangedPolicies {
		if e, ok := v.Etags[name]; ok {
			rec.Etags[name] = e
		}
		if e, ok := live[name]; ok {
			rec.LiveEtags[name] = e
		}
	}
	t.pulls[p.Number] = pullEntry{main: main.Hash, rec: rec}
	return rec, nil
}

// pullTitle is a pull request's title as a record holds it (GitHub bounds
// titles well below raftstore.MaxTextBytes; this makes sure).
func pullTitle(p forge.PullRequest) string {
	return raftstore.ClipText(p.Title, raftstore.MaxTextBytes)
}

// liveEtags are the etags of the generation main stands for.
func (l *Loop) liveEtags() map[string]string {
	if g, ok := servedGeneration(l.cfg.Store.State()); ok {
		return g.Etags
	}
	return nil
}

// syncSources records what the experiments come from: the open pull
// requests with [github], else the other branches.
func (l *Loop) syncSources(ctx context.Context, t *term, refs *gitsource.Refs) error {
	if l.gh != nil {
		if err := l.syncPulls(ctx, t, refs); err != nil {
			return err
		}
		return l.syncPullExperiments(ctx)
	}
	return l.syncBranches(ctx, t, refs)
}

// openKey identifies the open pull requests the GitHub worker last listed
// ("" without GitHub).
func (l *Loop) openKey() string {
	if l.gh == nil {
		return ""
	}
	open, listed := l.gh.openPulls()
	if !listed {
		return "unlisted"
	}
	return openListKey(open)
}
