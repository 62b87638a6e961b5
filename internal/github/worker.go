package github

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/lifecycle"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/reconcile"
)

// ghTerm is what the GitHub worker remembers in one leadership term: what
// it posted, so that an unchanged state costs no request. A new leader
// posts everything once again (statuses are idempotent, the comment is
// found by its marker and not edited when its body is the same).
type ghTerm struct {
	promote  map[string]string // commit → posted state and description
	validate map[string]string // head → posted state and description
	preview  map[string]string // head → posted state and description
	comments map[int]commentState
	due      atomic.Bool // the summary schedule fired
	retry    time.Time   // earliest retry after a failure; zero when none
}

// commentState is the last comment posted on a pull request.
type commentState struct {
	material string // what makes a change worth posting at once
	body     string
}

// runGitHub is the leader's GitHub worker: it lists the open pull
// requests, keeps the statuses and the comments up to date and runs the
// comment commands, in its own goroutine, so a slow or rate-limited
// GitHub never delays a reconcile pass, a promotion or a decision.
// Failed calls are retried later (after GitHub's reset when it gave one).
func (g *Worker) runTerm(ctx context.Context) {
	g.run.Set(lifecycle.OK, "")
	w := &ghTerm{promote: map[string]string{}, validate: map[string]string{}, preview: map[string]string{},
		comments: map[int]commentState{}}
	g.relistAll.Store(true)
	sub, unsubscribe := g.cfg.Store.Subscribe()
	defer unsubscribe()
	sched := cron.New()
	if _, err := sched.AddFunc(g.cfg.Summary, func() { w.due.Store(true); g.wake() }); err == nil {
		sched.Start()
		defer sched.Stop()
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case q := <-g.commands:
			g.runCommand(ctx, q)
		case <-g.kick:
		case <-sub:
		case <-timer.C:
			w.retry = time.Time{}
		}
		if !w.retry.IsZero() {
			continue // a retry is scheduled; the timer brings it
		}
		if d := g.pass(ctx, w); d > 0 {
			w.retry = g.cfg.Now().Add(d)
			timer.Reset(d)
		}
	}
}

// Refresh asks the worker to list the open pull requests again (after
// each reconcile pass).
func (g *Worker) Refresh() {
	g.relistAll.Store(true)
	g.wake()
}

// pass is one pass of the worker. It returns how soon to retry when a
// call failed, else 0.
func (g *Worker) pass(ctx context.Context, w *ghTerm) time.Duration {
	var failed error
	note := func(what string, err error) {
		if err == nil || ctx.Err() != nil {
			return
		}
		if failed == nil {
			failed = err
		}
		if forge.Retryable(err) {
			g.log.Debug("GitHub call failed; retrying later", "what", what, "error", err)
		} else {
			g.log.Warn("GitHub call failed", "what", what, "error", err)
		}
	}
	if g.relistAll.Swap(false) {
		if err := g.listPulls(ctx); err != nil {
			g.relistAll.Store(true)
			note("list pull requests", err)
		}
	}
	st := g.cfg.Store.State()
	g.promoteStatuses(ctx, w, st, note)
	g.pullStatuses(ctx, w, st, note)
	w.due.Store(false)
	if failed == nil {
		g.run.Set(lifecycle.OK, "")
		return 0
	}
	g.run.Set(lifecycle.Warn, "GitHub calls fail; retrying: "+failed.Error())
	return g.retryDelay(failed, g.cfg.Now())
}

// listPulls reads the open pull requests into the live branch, and asks
// for a reconcile pass when the set or a head changed.
func (g *Worker) listPulls(ctx context.Context) error {
	open, err := g.cfg.Forge.OpenPullRequests(ctx, g.cfg.Branch)
	if err != nil {
		return err
	}
	if open == nil {
		open = []forge.PullRequest{}
	}
	g.mu.Lock()
	changed := g.open == nil || openListKey(g.open) != openListKey(open)
	g.open = open
	g.mu.Unlock()
	if changed {
		g.cfg.Trigger()
	}
	return nil
}

// promoteStatuses sets reconciler/promote on the commits of the known
// generations: pending while staged, success once active on every node,
// failure when invalid.
func (g *Worker) promoteStatuses(ctx context.Context, w *ghTerm, st *raftstore.State, note func(string, error)) {
	for _, n := range st.GenerationNumbers() {
		gen := st.Generations[n]
		if gen.Commit == "" || reconcile.IsDirCommit(gen.Commit) {
			continue
		}
		state, desc := promoteStatus(gen)
		if state == "" || w.promote[gen.Commit] == state+desc {
			continue
		}
		err := g.cfg.Forge.SetStatus(ctx, gen.Commit, forge.ContextPromote, state, desc, "")
		if err == nil {
			w.promote[gen.Commit] = state + desc
		}
		note("promote status", err)
	}
	g.divergedStatus(ctx, w, note)
}

// promoteStatus is the status a generation's commit shows.
func promoteStatus(g raftstore.Generation) (state, desc string) {
	switch {
	case g.State == raftstore.GenerationStaged:
		return forge.StatePending, fmt.Sprintf("generation %d staged; waiting for every node to compile it", g.Number)
	case g.State == raftstore.GenerationActive || !g.ActivateTime.IsZero():
		return forge.StateSuccess, fmt.Sprintf("generation %d active on all nodes", g.Number)
	case g.State == raftstore.GenerationInvalid:
		errs := append(slices.Clone(g.LeaderErrors), nodeErrors(g)...)
		first := "invalid"
		if len(errs) > 0 {
			first = errs[0]
		}
		return forge.StateFailure, oneLine(fmt.Sprintf("generation %d invalid, previous keeps serving: %s", g.Number, first))
	case g.State == raftstore.GenerationSuperseded:
		return forge.StateSuccess, fmt.Sprintf("generation %d superseded by a newer commit before activation", g.Number)
	}
	return "", ""
}

func nodeErrors(g raftstore.Generation) []string {
	var out []string
	for _, id := range slices.Sorted(maps.Keys(g.NodeErrors)) {
		for _, e := range g.NodeErrors[id] {
			out = append(out, id+": "+e)
		}
	}
	return out
}

// oneLine keeps the first line of s.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// divergedStatus sets a failing reconciler/promote on a diverged head of
// the live branch, once per head, so that whoever pushed it sees on GitHub
// that nothing was promoted and what accepts it.
func (g *Worker) divergedStatus(ctx context.Context, w *ghTerm, note func(string, error)) {
	d := g.cfg.Examiner.Diverged()
	if d == nil {
		return
	}
	desc := oneLine(fmt.Sprintf("not promoted: does not descend from the active commit %.12s; accept with reconciler accept-history", d.Active))
	if w.promote[d.Commit] == forge.StateFailure+desc {
		return
	}
	err := g.cfg.Forge.SetStatus(ctx, d.Commit, forge.ContextPromote, forge.StateFailure, desc, "")
	if err == nil {
		w.promote[d.Commit] = forge.StateFailure + desc
	}
	note("promote status", err)
}
