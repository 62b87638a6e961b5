package reconcile

import (
	"context"
	"errors"

	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// fetch is the first step of a pass: bring the clone up to date, keep the
// outcome in memory for the cluster view, and keep the replicated
// SourceRecord (PullError) in step: written when fetching starts failing
// or fails differently, deleted by the first successful fetch. An idle
// poll, failing or not, writes nothing to raft.
//
// It returns whether a failure is new (first, or different from the last),
// so that a remote that stays down is logged once, not at every poll.
func (l *Loop) fetch(ctx context.Context) (*gitsource.Refs, bool, error) {
	if l.cfg.Source == nil {
		return nil, l.noteFetch(ctx, nil, errNoSource), errNoSource
	}
	start := l.cfg.Now()
	refs, err := l.cfg.Source.Fetch(ctx)
	took := l.cfg.Now().Sub(start)
	l.metrics.fetched(err, took)
	if err == nil && l.movedMain(refs) {
		l.log.Info("fetched a new live commit", "revision", refs.Main.String(), "took", took)
	}
	if ctx.Err() != nil {
		return nil, false, ctx.Err() // leadership ended mid-fetch: not the source's fault
	}
	return refs, l.noteFetch(ctx, refs, err), err
}

// movedMain reports whether refs' live branch differs from the last
// fetch's: the fetch time of a new commit is the first phase of
// push→Active (docs/performance.md).
func (l *Loop) movedMain(refs *gitsource.Refs) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.status.Commit != refs.Main.Hash
}

// noteFetch records the outcome of a fetch and reports whether a failure
// is new.
func (l *Loop) noteFetch(ctx context.Context, refs *gitsource.Refs, err error) bool {
	now := l.cfg.Now()
	l.mu.Lock()
	fresh := err != nil && l.status.Error != err.Error()
	if err != nil {
		l.status = SourceStatus{Commit: l.status.Commit, Error: err.Error(), Time: now}
	} else {
		l.status = SourceStatus{Commit: refs.Main.Hash, Time: now}
	}
	last := l.status.Commit
	l.mu.Unlock()
	prev, had := ReadSourceRecord(l.cfg.Store.State())
	var p raftstore.Payload
	msg := raftstore.ClipText(errText(err), raftstore.MaxTextBytes)
	switch {
	case err == nil && had:
		p = &raftstore.DeleteSourceStatus{Source: raftstore.SourceGit}
		l.log.Info("policy repository reachable again", "revision", refs.Main.String(), "failing_since", prev.Since)
	case err != nil && (!had || prev.Error != msg):
		rec := SourceRecord{URL: raftstore.ClipText(l.cfg.URL, raftstore.MaxTextBytes), Error: msg,
			Reason: reasonOf(err), Since: now, Revision: l.revision(last)}
		if had {
			rec.Since = prev.Since
		}
		p = &raftstore.PutSourceStatus{Source: raftstore.SourceGit, Status: rec}
	default:
		return fresh
	}
	if _, perr := l.cfg.Store.Propose(ctx, p); perr != nil && ctx.Err() == nil {
		l.log.Warn("cannot record the policy source's state; retrying at the next pass", "error", perr)
	}
	return fresh
}

// errText is err's message, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// reasonOf is gitsource's classification of a failed fetch.
func reasonOf(err error) string {
	var re *gitsource.RemoteError
	if errors.As(err, &re) {
		return string(re.Reason)
	}
	return ""
}
