package github

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/githubemu"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/webhook"
)

// A pull request from a user without write permission (a fork's) is
// recorded SUSPENDED: its experiment is not previewed until a writer
// comments /reconciler preview start, and its comment shows counts and
// rule names but no sample request, which a writer's pull request shows.
func TestForkPullPreviewWaitsForWriter(t *testing.T) {
	const token = "emu-token"
	store, repo := newFakeStore(), newFakeRepo()
	emu := githubemu.New(githubemu.Options{Token: token})
	t.Cleanup(emu.Close)
	gh := emu.AddRepo("o/r", "main")
	gh.SetPermission("alice", forge.PermWrite)
	gh.SetPermission("mallory", forge.PermRead)
	gh.SetRef("main", repo.Commit("main", webPolicy("v1")))
	head := repo.Commit("fork", webPolicy("v2"))
	n := gh.OpenPull(githubemu.Pull{HeadRef: "fork", HeadRepo: "mallory/r", HeadSHA: head, BaseRef: "main", Author: "mallory"})
	repo.Pulls = map[int]string{n: head}
	planted := "/planted-sample-LIVE-SECRET"
	var mu sync.Mutex
	var exp *preview.Experiment
	stats := func() []preview.Stats {
		mu.Lock()
		defer mu.Unlock()
		if exp == nil {
			return nil
		}
		return []preview.Stats{{Experiment: exp.Name, ExperimentEtag: exp.Etag,
			Tally: preview.Tally{Counts: preview.Counts{Evaluated: 10, Unchanged: 9, AllowToDeny: 1},
				Transitions: []preview.Transition{{LiveRule: "v1", ExperimentRule: "v2", LiveDecision: engine.Allow, ExperimentDecision: engine.Deny, Count: 1}}},
			Samples: []preview.Sample{{LiveDecision: engine.Allow, ExperimentDecision: engine.Deny, ExperimentRule: "v2", Request: map[string]any{"path": planted}}}}}
	}
	l := emuLoop(t, emu, token, store, repo, stats, preview.Settings{AutoStart: true}) // a writer's pull request would start at once
	stop := runLoop(t, l)
	defer stop()
	eventually(t, "generation 1 staged", func() bool { _, ok := store.State().Generation(1); return ok })
	ready(t, store, 1, "n1")
	name := fmt.Sprintf("policies/web/experiments/pr-%d", n)
	find := func() *preview.Experiment {
		for _, e := range l.exps.List() {
			if e.Name == name {
				return e
			}
		}
		return nil
	}
	eventually(t, "experiment of the fork's pull request", func() bool { l.loop.Trigger(); return find() != nil })
	rec := ReadPullRecords(store.State())[n]
	if e := find(); rec.Writer || rec.Preview != string(preview.Suspended) || e.IsActive() {
		t.Fatalf("fork's pull request: writer %v, preview %q, experiment active %v; want held", rec.Writer, rec.Preview, e.IsActive())
	}
	mu.Lock()
	exp = find()
	mu.Unlock()
	body := commentBody(rec, l.pullSummaries(rec))
	if strings.Contains(body, planted) || strings.Contains(body, "Sample changes") || !strings.Contains(body, "`v2`") {
		t.Fatalf("the fork's comment shows samples or no rule:\n%s", body)
	}
	writer := rec
	writer.Writer = true
	if body := commentBody(writer, l.pullSummaries(writer)); !strings.Contains(body, planted) {
		t.Fatalf("a writer's pull request's comment has no sample:\n%s", body)
	}

	ctx := context.Background()
	say := func(user string) webhook.Command {
		cmd, _ := webhook.ParseCommand("/reconciler preview start")
		cmd.PR, cmd.User, cmd.CommentID = n, user, gh.AddComment(n, user, "/reconciler preview start")
		return cmd
	}
	l.runCommand(ctx, queuedCommand{cmd: say("mallory")})
	if find().IsActive() {
		t.Fatal("the fork's author started its own preview")
	}
	l.runCommand(ctx, queuedCommand{cmd: say("alice")})
	eventually(t, "the preview started by a writer", func() bool { return find().IsActive() })
}
