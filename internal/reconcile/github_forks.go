package reconcile

import (
	"context"
	"time"

	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/preview"
)

// judgeAuthors asks GitHub, for each pull request not recorded yet,
// whether its author may write. Anyone can open a pull request (from a
// fork), and its rules choose which live requests are sampled, so a
// non-writer's preview starts only when a writer comments `/reconciler
// preview start` (as GitHub holds workflows from forks), and its comment
// never shows sample requests. A failed permission call holds it too.
func (l *Loop) judgeAuthors(ctx context.Context, want map[int]PullRecord) {
	old := ReadPullRecords(l.cfg.Store.State())
	for n, rec := range want {
		if _, ok := old[n]; ok {
			continue
		}
		perm, err := l.gh.cfg.Forge.Permission(ctx, rec.Author)
		rec.Writer = err == nil && forge.CanWrite(perm)
		if !rec.Writer {
			rec.Preview = string(preview.Suspended)
			l.gh.log.Info("pull request from a user without write permission; its preview waits for a writer's /reconciler preview start",
				"pull", n, "author", rec.Author, "permission", perm, "error", err)
		}
		want[n] = rec
	}
}

// holdSuspended marks the wanted experiments of rec held while its
// preview is SUSPENDED.
func holdSuspended(want map[string]wantedExperiment, rec PullRecord) {
	if rec.Preview != string(preview.Suspended) {
		return
	}
	for name, w := range want {
		if w.source.Kind == preview.SourcePullRequest && w.source.Number == rec.Number {
			w.hold = true
			want[name] = w
		}
	}
}

// autoStart starts e as preview.AutoStart does, unless w is held.
func (l *Loop) autoStart(w wantedExperiment, e *preview.Experiment, now time.Time) *preview.Experiment {
	if w.hold {
		return e
	}
	return preview.AutoStart(e, l.settings(), now)
}
