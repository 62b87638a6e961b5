package github

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/githubemu"
)

// Issue 16, the clock-skew attack: a writer's command binds to the head
// the preview comment showed before GitHub dates the command, by GitHub's
// clock on both sides, whatever the leader's clock says. With the
// leader's clock an hour behind GitHub's, an approval or commit written
// for one head and delivered after a push used to bind to the pushed head
// (it was dated after the leader "recorded" it); an hour ahead, every
// command written after the push was refused. Now, either way: the late
// command is refused, a command while GitHub refuses the comment's edit
// (the new head not shown) is refused, and one written after the edit
// showed the head runs.
func TestCommandsBoundToShownHead(t *testing.T) {
	for _, verb := range []string{"/reconciler preview start", "/reconciler commit"} {
		for _, skew := range []time.Duration{-time.Hour, time.Hour} {
			t.Run(fmt.Sprintf("%s/leader%+v", strings.Fields(verb)[1], skew), func(t *testing.T) {
				f := newForkEnvAt(t, nil, webPolicy("v1"), webPolicy("v2"), func() time.Time { return time.Now().Add(skew) })
				f.boundToShownHead(verb)
			})
		}
	}
}

// boundToShownHead is the scenario of TestCommandsBoundToShownHead for
// alice's command verb.
func (f *forkEnv) boundToShownHead(verb string) {
	f.t.Helper()
	ctx := context.Background()
	run := func(cmd string) string {
		f.l.runCommand(ctx, queuedCommand{cmd: f.say("alice", cmd)})
		return f.lastReply()
	}
	ran := func(head string) bool {
		if strings.HasSuffix(verb, "commit") {
			p, _ := f.gh.Pull(f.n)
			return p.Merged
		}
		e := f.find()
		return e.IsActive() && e.Source.HeadCommit == head && f.record().ApprovedHead == head
	}

	// alice writes her command for the first head; mallory pushes; the
	// leader shows the new head; the command's webhook comes late.
	f.waitShown(f.head)
	late := f.say("alice", verb)
	head2 := f.push(webPolicy("v3"))
	f.waitShown(head2)
	f.l.runCommand(ctx, queuedCommand{cmd: late})
	if r := f.lastReply(); ran(head2) || !strings.Contains(r, "written before the preview comment showed the head "+short(head2)) {
		f.t.Fatalf("a late command ran %v; reply %q", ran(head2), r)
	}

	// An edit answered for an older head while the push came in dates
	// nothing; a new leader's edit does not move the date of a head.
	shown := f.record()
	for _, head := range []string{f.head, head2} {
		if err := f.l.recordShown(ctx, f.n, head, shown.HeadShownAt.Add(time.Hour)); err != nil {
			f.t.Fatal(err)
		}
	}
	if rec := f.record(); rec.HeadShown != head2 || !rec.HeadShownAt.Equal(shown.HeadShownAt) {
		f.t.Fatalf("shown %s at %v, was %v", short(rec.HeadShown), rec.HeadShownAt, shown.HeadShownAt)
	}

	// GitHub refuses the comment's edits: the next head is not shown, and
	// a command written a minute later is refused all the same.
	f.emu.Inject(githubemu.Fault{Kind: githubemu.ServerError, Method: "PATCH", Path: "/issues/comments/", Times: 1 << 30})
	head3 := f.push(webPolicy("v4"))
	f.clock.Add(time.Minute)
	if r := run(verb); ran(head3) || f.record().HeadShown == head3 ||
		!strings.Contains(r, "the preview comment does not show the head "+short(head3)+" of #") {
		f.t.Fatalf("a command before the head was shown ran %v; reply %q", ran(head3), r)
	}

	// GitHub recovers; alice comments a second after the edit.
	f.emu.ClearFaults()
	f.waitShown(head3)
	f.clock.Add(time.Second)
	if r := run(verb); !ran(head3) {
		f.t.Fatalf("alice's command after the comment showed %s did not run; reply %q", short(head3), r)
	}
}
