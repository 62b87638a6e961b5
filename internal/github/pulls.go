package github

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/policyrollout/reconciler/internal/experiments"
	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/reconcile"
)

// PullRecordPrefix names the replicated records of open pull requests
// ("pulls/42"), kept beside the branch records (records.go) while the AIP
// experiments `pr-N` of internal/preview are not wired: what each open
// pull request into the live branch changes, the etags of its changed
// policies, whether its tree validates, and its preview state as set by
// comment commands.
const PullRecordPrefix = "pulls/"

// maxPulls bounds how many open pull requests the leader tracks.
const maxPulls = 200

// PullRecord is one open pull request into the live branch, as an
// experiment tracked by the leader (CONTRACT.md §5).
type PullRecord struct {
	Number     int    `json:"number"`
	Title      string `json:"title"`
	URL        string `json:"url"`
	Author     string `json:"author"`
	HeadCommit string `json:"headCommit"`
	// MainCommit is the live branch's head it was compared with.
	MainCommit string `json:"mainCommit"`
	// ChangedPolicies names, sorted, the policies whose content differs
	// from the live branch's head; Etags are their etags at HeadCommit
	// (set when the tree is valid), LiveEtags at MainCommit.
	ChangedPolicies []string                   `json:"changedPolicies"`
	Etags           map[string]string          `json:"etags"`
	LiveEtags       map[string]string          `json:"liveEtags"`
	Validation      reconcile.BranchValidation `json:"validation"`
	// Preview is ACTIVE or SUSPENDED (comment commands); ACTIVE at first.
	Preview string `json:"preview"`
}

// ReadPullRecords returns the replicated pull request records by number.
func ReadPullRecords(st *raftstore.State) map[int]PullRecord {
	out := map[int]PullRecord{}
	for name, doc := range st.Experiments {
		num, ok := strings.CutPrefix(name, PullRecordPrefix)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(num)
		var r PullRecord
		if err == nil && json.Unmarshal(doc.Data, &r) == nil {
			out[n] = r
		}
	}
	return out
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
// once, it does nothing.
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
	if err := g.writePulls(ctx, want); err != nil {
		return nil, err
	}
	var changes []experiments.Change
	for _, n := range slices.Sorted(maps.Keys(want)) {
		if rec := want[n]; len(rec.ChangedPolicies) > 0 {
			changes = append(changes, experiments.Change{Policies: rec.ChangedPolicies, Source: preview.Source{
				Kind: preview.SourcePullRequest, Number: n, HeadCommit: rec.HeadCommit, URL: rec.URL}})
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
		if rec, ok := want[n]; ok && prev.Preview != "" {
			rec.Preview = prev.Preview
			want[n] = rec
		}
	}
	for _, n := range slices.Sorted(maps.Keys(want)) {
		name := PullRecordPrefix + strconv.Itoa(n)
		p, err := reconcile.PutRecord(name, want[n])
		if err != nil {
			return err
		}
		if old, ok := st.Experiments[name]; ok && bytes.Equal(old.Data, p.Data) {
			continue
		}
		if _, err := g.cfg.Store.Propose(ctx, p); err != nil {
			return fmt.Errorf("recording %s: %w", name, err)
		}
		g.log.Info("pull request recorded", "pull", n, "head", want[n].HeadCommit,
			"changed_policies", want[n].ChangedPolicies, "valid", want[n].Validation.Valid)
	}
	closed := map[int]bool{}
	for n := range old {
		if _, keep := want[n]; keep {
			continue
		}
		name := PullRecordPrefix + strconv.Itoa(n)
		if _, err := g.cfg.Store.Propose(ctx, &raftstore.DeleteExperiment{Name: name}); err != nil {
			return fmt.Errorf("deleting %s: %w", name, err)
		}
		closed[n] = true
		g.log.Info("pull request closed; record deleted", "pull", n)
	}
	if len(closed) > 0 {
		g.pruneCommandRecords(ctx, closed)
	}
	return nil
}

// pullRecord compares a pull request's head with main and validates its
// tree (the same checks as a main commit: Examiner), cached per head and
// main for the term.
func (g *Worker) pullRecord(p forge.PullRequest, head, main gitsource.Revision, live map[string]string) (PullRecord, error) {
	if e, ok := g.pulls[p.Number]; ok && e.rec.HeadCommit == head.Hash && e.main == main.Hash {
		e.rec.Title, e.rec.URL, e.rec.Author = p.Title, p.URL, p.Author
		return e.rec, nil
	}
	ex, err := g.cfg.Examiner.Examine(head, main)
	if err != nil {
		return PullRecord{}, fmt.Errorf("comparing pull request #%d with %s: %w", p.Number, main, err)
	}
	rec := PullRecord{Number: p.Number, Title: p.Title, URL: p.URL, Author: p.Author, HeadCommit: head.Hash,
		MainCommit: main.Hash, ChangedPolicies: ex.ChangedPolicies, Etags: map[string]string{},
		LiveEtags: map[string]string{}, Validation: ex.Validation, Preview: "ACTIVE"}
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

// OpenKey identifies the open pull requests the worker last listed
// (reconcile.Pulls).
func (g *Worker) OpenKey() string {
	open, listed := g.openPulls()
	if !listed {
		return "unlisted"
	}
	return openListKey(open)
}
