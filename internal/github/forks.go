package github

import (
	"context"

	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/preview"
)

// judgeAuthors asks GitHub, for each pull request not recorded yet,
// whether its author may write. Anyone can open a pull request (from a
// fork), and its rules choose which live requests are sampled, so a
// non-writer's preview starts only when a writer comments `/reconciler
// preview start` (as GitHub holds workflows from forks), and its comment
// never shows sample requests. A failed permission call holds it too.
func (g *Worker) judgeAuthors(ctx context.Context, want map[int]PullRecord) {
	old := ReadPullRecords(g.cfg.Store.State())
	for n, rec := range want {
		if _, ok := old[n]; ok {
			continue
		}
		perm, err := g.cfg.Forge.Permission(ctx, rec.Author)
		rec.Writer = err == nil && forge.CanWrite(perm)
		if !rec.Writer {
			rec.Preview = string(preview.Suspended)
			g.log.Info("pull request from a user without write permission; its preview waits for a writer's /reconciler preview start",
				"pull", n, "author", rec.Author, "permission", perm, "error", err)
		}
		want[n] = rec
	}
}
