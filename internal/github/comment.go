package github

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strings"

	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// maxListedErrors bounds the validation errors a comment lists.
const maxListedErrors = 20

// pullStatuses keeps, for every recorded open pull request, the
// reconciler/validate and reconciler/preview statuses on its head and its
// one comment up to date. The comment is edited at once when something
// material changed (head, validity, etags, preview state), else only when
// the summary schedule fired and the body differs.
func (g *Worker) pullStatuses(ctx context.Context, w *ghTerm, st *raftstore.State, note func(string, error)) {
	recs := ReadPullRecords(st)
	for _, n := range slices.Sorted(maps.Keys(recs)) {
		rec := recs[n]
		state, desc := validateStatus(rec)
		if w.validate[rec.HeadCommit] != state+desc {
			err := g.cfg.Forge.SetStatus(ctx, rec.HeadCommit, forge.ContextValidate, state, desc, rec.URL)
			if err == nil {
				w.validate[rec.HeadCommit] = state + desc
			}
			note("validate status", err)
		}
		summaries := g.pullSummaries(rec)
		body := commentBody(rec, summaries)
		mat := material(rec) + countsKey(summaries)
		cs, posted := w.comments[n]
		unshown := rec.HeadShown != rec.HeadCommit
		if unshown || !posted || cs.material != mat || (w.due.Load() && cs.body != body) {
			err := g.postComment(ctx, rec, body, unshown)
			if err == nil {
				w.comments[n] = commentState{material: mat, body: body}
			}
			note("preview comment", err)
		}
		state, desc = previewStatus(rec, summaries)
		if w.preview[rec.HeadCommit] != state+desc {
			err := g.cfg.Forge.SetStatus(ctx, rec.HeadCommit, forge.ContextPreview, state, desc, rec.URL)
			if err == nil {
				w.preview[rec.HeadCommit] = state + desc
			}
			note("preview status", err)
		}
	}
}

// postComment makes body rec's preview comment. While the record does not
// say since when GitHub shows its head (a new head, or one whose edit
// failed or was not recorded), it asks GitHub rather than the client's
// cache (another leader may have edited the comment since) and records
// GitHub's updated_at (recordShown): the comment commands bind to the head
// from then on.
func (g *Worker) postComment(ctx context.Context, rec PullRecord, body string, unshown bool) error {
	if !unshown {
		_, err := g.cfg.Forge.UpsertComment(ctx, rec.Number, body)
		return err
	}
	pc, err := g.cfg.Forge.ShowComment(ctx, rec.Number, body)
	if err != nil {
		return err
	}
	return g.recordShown(ctx, rec.Number, rec.HeadCommit, pc.UpdatedAt)
}

// validateStatus is reconciler/validate for a pull request's head.
func validateStatus(rec PullRecord) (state, desc string) {
	if rec.Validation.Valid {
		return forge.StateSuccess, fmt.Sprintf("valid: %d changed policies parse, merge, compile and pass their tests",
			len(rec.ChangedPolicies))
	}
	errs := rec.Validation.Errors
	first := "invalid"
	if len(errs) > 0 {
		first = oneLine(errs[0])
	}
	if len(errs) > 1 {
		first += fmt.Sprintf(" (+%d more)", len(errs)-1)
	}
	return forge.StateFailure, first
}

// previewStatus is reconciler/preview: failing when an experiment fails
// its thresholds or the tree is invalid.
func previewStatus(rec PullRecord, summaries []preview.Summary) (state, desc string) {
	if !rec.Validation.Valid {
		return forge.StateFailure, "not previewed: the pull request's policies are invalid"
	}
	if !rec.Writer && held(rec) && len(rec.ChangedPolicies) > 0 {
		return forge.StatePending, fmt.Sprintf("held: a writer must approve head %s with /reconciler preview start", short(rec.HeadCommit))
	}
	for _, s := range summaries {
		if s.Failing {
			return forge.StateFailure, oneLine(s.Policy + ": " + s.Reason)
		}
	}
	if len(summaries) == 0 {
		return forge.StateSuccess, "no policy changes to preview"
	}
	return forge.StateSuccess, fmt.Sprintf("%d experiments (%s) within thresholds", len(summaries), rec.Preview)
}

// material is what, when it changes, gets the comment edited at once.
func material(rec PullRecord) string {
	return fmt.Sprint(rec.HeadCommit, rec.MainCommit, rec.Validation.Valid, rec.Preview, rec.ApprovedHead, rec.Etags, rec.LiveEtags)
}

// pullSummaries are the summaries of a pull request's experiments, one
// per changed policy (ids pr-N): from the AIP experiment and the cluster's
// merged stats when the experiment exists, else from the record alone
// (a policy that does not load or compile has no experiment).
func (g *Worker) pullSummaries(rec PullRecord) []preview.Summary {
	exps := map[string]*preview.Experiment{}
	for _, e := range g.cfg.Experiments.List() {
		if e.Source.Kind == preview.SourcePullRequest && e.Source.Number == rec.Number {
			exps[e.PolicyName()] = e
		}
	}
	var merged []preview.Stats
	if len(exps) > 0 && g.cfg.Stats != nil {
		merged = g.cfg.Stats()
	}
	out := make([]preview.Summary, 0, len(rec.ChangedPolicies))
	for _, name := range rec.ChangedPolicies {
		if e, ok := exps[name]; ok {
			s := preview.Summarize(e, rec.LiveEtags[name], merged, g.cfg.Thresholds.For(name))
			s.Source.URL = rec.URL
			if !rec.Writer { // counts and rule names only: the author chose the rules
				s.Stats.Samples = nil
			}
			out = append(out, s)
			continue
		}
		out = append(out, recordSummary(rec, name))
	}
	return out
}

// recordSummary is the summary of a changed policy without experiment.
func recordSummary(rec PullRecord, name string) preview.Summary {
	s := preview.Summary{Policy: "policies/" + name,
		Experiment: fmt.Sprintf("policies/%s/experiments/pr-%d", name, rec.Number),
		Kind:       preview.KindUpdate, ExperimentEtag: rec.Etags[name], LiveEtag: rec.LiveEtags[name],
		Source:       &preview.Source{Kind: preview.SourcePullRequest, Number: rec.Number, HeadCommit: rec.HeadCommit, URL: rec.URL},
		Stats:        preview.Stats{ExperimentEtag: rec.Etags[name], LiveEtag: rec.LiveEtags[name]},
		NotPreviewed: "the policy does not load or compile at this head",
	}
	s.Stats.Experiment = s.Experiment
	if s.LiveEtag == "" {
		s.Kind = preview.KindNewPolicy
	}
	return s
}

// countsKey buckets an experiment's counts (powers of two), so the
// comment is edited at once only when they change materially.
func countsKey(summaries []preview.Summary) string {
	var b strings.Builder
	for _, s := range summaries {
		c := s.Stats.Counts
		fmt.Fprintf(&b, "%s:%s:%d/%d/%d/%d/%t;", s.Policy, s.State, bits.Len64(c.Evaluated), bits.Len64(c.AllowToDeny),
			bits.Len64(c.DenyToAllow), bits.Len64(c.Errors), s.Failing)
	}
	return b.String()
}

// maxErrorLine bounds one validation error in the comment, so that the
// errors never take the room of the policies' sections.
const maxErrorLine = 300

// commentBody renders the pull request's comment (preview.RenderMarkdown,
// which keeps it within GitHub's limit) with the head it was computed at
// in the title (what a command binds to), the hold notice, the validation
// errors and where the full report is.
func commentBody(rec PullRecord, summaries []preview.Summary) string {
	var b bytes.Buffer
	_ = preview.RenderMarkdown(&b, preview.Report{
		Title:     fmt.Sprintf("Policy preview of #%d at %s", rec.Number, short(rec.HeadCommit)),
		Summaries: summaries, Commands: true, Notes: commentNotes(rec), FullReport: fullReport(rec.Number),
	})
	return b.String()
}

// commentNotes is what the comment says besides the policies: the hold
// notice, no policy changed, the validation errors (at most
// maxListedErrors, each cut to maxErrorLine).
func commentNotes(rec PullRecord) string {
	var b strings.Builder
	b.WriteString(holdNotice(rec))
	if len(rec.ChangedPolicies) == 0 {
		b.WriteString("\nThis pull request changes no policy.\n")
	}
	if !rec.Validation.Valid {
		b.WriteString("\n**Validation failed** (`reconciler/validate`):\n\n```\n")
		for i, e := range rec.Validation.Errors {
			if i == maxListedErrors {
				fmt.Fprintf(&b, "… and %d more\n", len(rec.Validation.Errors)-i)
				break
			}
			b.WriteString(strings.ReplaceAll(clipLine(oneLine(e), maxErrorLine), "```", "'''") + "\n")
		}
		b.WriteString("```\n")
	}
	return b.String()
}

// fullReport says where a pull request's full report is: every policy's
// section, with all its samples, is its pr-N experiment.
func fullReport(pr int) string { return preview.FullReport(fmt.Sprintf("pr-%d", pr)) }

// clipLine cuts s to at most n runes, marking the cut.
func clipLine(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
