package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/raftstore"
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
	ChangedPolicies []string          `json:"changedPolicies"`
	Etags           map[string]string `json:"etags"`
	LiveEtags       map[string]string `json:"liveEtags"`
	Validation      BranchValidation  `json:"validation"`
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
			rec.Preview = prev.Preview
			want[n] = rec
		}
	}
	for _, n := range slices.Sorted(maps.Keys(want)) {
		name := PullRecordPrefix + strconv.Itoa(n)
		p, err := putRecord(name, want[n])
		if err != nil {
			return err
		}
		if old, ok := st.Experiments[name]; ok && bytes.Equal(old.Data, p.Data) {
			continue
		}
		if _, err := l.cfg.Store.Propose(ctx, p); err != nil {
			return fmt.Errorf("recording %s: %w", name, err)
		}
		l.log.Info("pull request recorded", "pull", n, "head", want[n].HeadCommit,
			"changed_policies", want[n].ChangedPolicies, "valid", want[n].Validation.Valid)
	}
	closed := map[int]bool{}
	for n := range old {
		if _, keep := want[n]; keep {
			continue
		}
		name := PullRecordPrefix + strconv.Itoa(n)
		if _, err := l.cfg.Store.Propose(ctx, &raftstore.DeleteExperiment{Name: name}); err != nil {
			return fmt.Errorf("deleting %s: %w", name, err)
		}
		closed[n] = true
		l.log.Info("pull request closed; record deleted", "pull", n)
	}
	if len(closed) > 0 {
		l.pruneCommandRecords(ctx, closed)
	}
	return nil
}

// pullRecord compares what a pull request would make of main (merged.go)
// with main and validates that tree (the same checks as a main commit), cached per head and main.
func (l *Loop) pullRecord(t *term, p forge.PullRequest, head, main gitsource.Revision) (PullRecord, error) {
	if e, ok := t.pulls[p.Number]; ok && e.rec.HeadCommit == head.Hash && e.main == main.Hash {
		e.rec.Title, e.rec.URL, e.rec.Author = p.Title, p.URL, p.Author
		return e.rec, nil
	}
	rec := PullRecord{Number: p.Number, Title: p.Title, URL: p.URL, Author: p.Author, HeadCommit: head.Hash,
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
