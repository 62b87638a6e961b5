package forge

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/policyrollout/reconciler/internal/githubemu"
)

// marked returns the preview comments on pull request n.
func (e *env) marked(n int) []githubemu.Comment {
	var out []githubemu.Comment
	for _, c := range e.repo.Comments(n) {
		if strings.HasPrefix(c.Body, Marker+"\n") {
			out = append(out, c)
		}
	}
	return out
}

func (e *env) openPull() int {
	return e.repo.OpenPull(githubemu.Pull{HeadRef: "x", HeadSHA: sha("c"), BaseRef: "main"})
}

func TestUpsertCommentEditsInPlace(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	n := e.openPull()
	first, err := e.c.UpsertComment(ctx, n, "summary 1")
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.c.UpsertComment(ctx, n, "summary 2")
	if id, id2 := first.ID, second.ID; err != nil || id2 != id {
		t.Fatalf("second upsert = %d, %v (first %d)", id2, err, id)
	}
	got := e.marked(n)
	if len(got) != 1 || got[0].Body != Marker+"\nsummary 2" || got[0].User != "reconciler[bot]" {
		t.Fatalf("comments = %+v", e.repo.Comments(n))
	}
	before := len(e.emu.Requests())
	if _, err := e.c.UpsertComment(ctx, n, "summary 2"); err != nil || len(e.emu.Requests()) != before {
		t.Errorf("unchanged body sent %d requests, %v", len(e.emu.Requests())-before, err)
	}
}

// An upsert answers with GitHub's updated_at of the comment (GitHub's
// clock, whole seconds): since when it shows the body. An unchanged body
// costs no request and keeps its time. UpsertComment trusts its cache, so
// after another leader's edit it answers for a body GitHub no longer
// shows; ShowComment lists first and edits back, dated by GitHub.
func TestUpsertCommentDatedByGitHub(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	n := e.openPull()
	t0 := e.clock.Now()
	advance := func(d time.Duration) {
		if err := e.clock.Sleep(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	one, err := e.c.UpsertComment(ctx, n, "one")
	if err != nil || !one.UpdatedAt.Equal(t0) {
		t.Fatalf("created: %+v, %v; want updated at %v", one, err, t0)
	}
	advance(1500 * time.Millisecond)
	two, err := e.c.UpsertComment(ctx, n, "two")
	if err != nil || two.ID != one.ID || !two.UpdatedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("edited: %+v, %v; want updated at %v (whole seconds)", two, err, t0.Add(time.Second))
	}
	advance(2 * time.Second)
	if same, err := e.c.UpsertComment(ctx, n, "two"); err != nil || same != two {
		t.Fatalf("unchanged: %+v, %v; want %+v", same, err, two)
	}
	advance(2 * time.Second)
	if _, err := e.client(t).UpsertComment(ctx, n, "three"); err != nil { // another leader
		t.Fatal(err)
	}
	advance(2 * time.Second)
	if stale, _ := e.c.UpsertComment(ctx, n, "two"); stale != two || !strings.HasSuffix(e.marked(n)[0].Body, "three") {
		t.Fatalf("the cached upsert: %+v, comment %q", stale, e.marked(n)[0].Body)
	}
	shown, err := e.c.ShowComment(ctx, n, "two")
	if want := t0.Add(7 * time.Second); err != nil || shown.ID != one.ID || !shown.UpdatedAt.Equal(want) ||
		!strings.HasSuffix(e.marked(n)[0].Body, "two") {
		t.Fatalf("shown: %+v, %v, comment %q; want updated at %v", shown, err, e.marked(n)[0].Body, want)
	}
	advance(2 * time.Second)
	if again, err := e.c.ShowComment(ctx, n, "two"); err != nil || again != shown {
		t.Fatalf("shown again, unchanged: %+v, %v; want %+v", again, err, shown)
	}
}

// A fresh client (restart, new leader) finds the comment by its marker,
// past the first page, and edits it instead of adding one.
func TestUpsertCommentFoundAfterRestart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	n := e.openPull()
	for i := 0; i < 120; i++ {
		e.repo.AddComment(n, "alice", fmt.Sprintf("chatter %d", i))
	}
	e.repo.AddComment(n, "alice", "> "+Marker+"\n> quoting is not the comment")
	before, err := e.c.UpsertComment(ctx, n, "before restart")
	if err != nil {
		t.Fatal(err)
	}
	e.repo.AddComment(n, "bob", "more chatter")
	fresh := e.client(t)
	after, err := fresh.UpsertComment(ctx, n, "after restart")
	if id, id2 := before.ID, after.ID; err != nil || id2 != id {
		t.Fatalf("after restart = %d, %v; want %d", id2, err, id)
	}
	if got := e.marked(n); len(got) != 1 || !strings.HasSuffix(got[0].Body, "after restart") {
		t.Fatalf("preview comments = %+v", got)
	}
	if e.requests("GET", "/comments") < 4 {
		t.Errorf("listed %d pages, want 2 per client", e.requests("GET", "/comments"))
	}
}

// A cached comment that was deleted is looked for again, then recreated.
func TestUpsertCommentDeleted(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	n := e.openPull()
	one, _ := e.c.UpsertComment(ctx, n, "one")
	e.repo.DeleteComment(one.ID)
	two, err := e.c.UpsertComment(ctx, n, "two")
	if id, id2 := one.ID, two.ID; err != nil || id2 == id || len(e.marked(n)) != 1 {
		t.Fatalf("after delete = %d, %v, %+v", id2, err, e.repo.Comments(n))
	}
}

// Once the comment exists, any number of clients (old and new leader)
// racing to update it edit that one comment.
func TestUpsertCommentConcurrent(t *testing.T) {
	e := newEnv(t)
	n := e.openPull()
	if _, err := e.c.UpsertComment(context.Background(), n, "first"); err != nil {
		t.Fatal(err)
	}
	clients := []*Client{e.c, e.client(t)}
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := clients[i%2].UpsertComment(context.Background(), n, fmt.Sprintf("body %d", i)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := e.marked(n); len(got) != 1 {
		t.Fatalf("%d preview comments", len(got))
	}
}

// Upserts racing on one client with no comment yet make exactly one.
func TestUpsertCommentConcurrentCreate(t *testing.T) {
	e := newEnv(t)
	n := e.openPull()
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.c.UpsertComment(context.Background(), n, fmt.Sprintf("body %d", i)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := e.marked(n); len(got) != 1 {
		t.Fatalf("%d preview comments", len(got))
	}
}

// GitHub creates the comment but the answer is lost: the retry lists
// first and edits what it finds.
func TestUpsertCommentLostCreateAnswer(t *testing.T) {
	e := newEnv(t)
	n := e.openPull()
	e.emu.Inject(githubemu.Fault{Method: "POST", Path: "/comments", AfterHandling: true, Status: 502})
	pc, err := e.c.UpsertComment(context.Background(), n, "summary")
	got := e.marked(n)
	if id := pc.ID; err != nil || len(got) != 1 || got[0].ID != id {
		t.Fatalf("upsert = %d, %v; comments %+v", id, err, got)
	}
	if e.requests("POST", "/comments") != 1 {
		t.Errorf("%d creates", e.requests("POST", "/comments"))
	}
}

// 5xx before GitHub did anything: list again, then create once.
func TestUpsertCommentRetriesCreate(t *testing.T) {
	e := newEnv(t)
	n := e.openPull()
	e.emu.Inject(githubemu.Fault{Method: "POST", Path: "/comments", Times: 2, Status: 500})
	if _, err := e.c.UpsertComment(context.Background(), n, "summary"); err != nil {
		t.Fatal(err)
	}
	if len(e.marked(n)) != 1 || e.requests("POST", "/comments") != 3 || len(e.clock.Slept()) != 2 {
		t.Errorf("creates %d, sleeps %v", e.requests("POST", "/comments"), e.clock.Slept())
	}
}

func TestUpsertCommentTooLong(t *testing.T) {
	e := newEnv(t)
	n := e.openPull()
	if _, err := e.c.UpsertComment(context.Background(), n, strings.Repeat("é", 70000)); err != nil {
		t.Fatal(err)
	}
	if body := e.marked(n)[0].Body; !strings.HasSuffix(body, truncated) || len([]rune(body)) > maxCommentRunes {
		t.Errorf("body of %d runes", len([]rune(body)))
	}
}

// TestFitCommentCutsAtLineEnd: the last-resort cut falls at a line end
// and closes a code block it would leave open.
func TestFitCommentCutsAtLineEnd(t *testing.T) {
	body := "intro\n```\n" + strings.Repeat("a line of the code block\n", 4000) + "```\n"
	got := fitComment(body)
	if n := utf8.RuneCountInString(got); n > maxCommentRunes {
		t.Fatalf("%d code points", n)
	}
	cut := strings.TrimSuffix(got, truncated)
	if !strings.HasSuffix(cut, "a line of the code block\n```") || strings.Count(cut, "```")%2 != 0 {
		t.Errorf("cut ends %q", cut[len(cut)-60:])
	}
}

func TestComment(t *testing.T) {
	e := newEnv(t)
	n := e.openPull()
	id, err := e.c.Comment(context.Background(), n, "@alice you need write permission")
	if err != nil || id == 0 || len(e.repo.Comments(n)) != 1 {
		t.Fatalf("comment = %d, %v", id, err)
	}
	// A reply is not repeated after a 5xx: it might have been posted.
	e.emu.FailNext(1, 502)
	_, err = e.c.Comment(context.Background(), n, "again")
	if !errors.Is(err, ErrUnavailable) || e.requests("POST", "/comments") != 2 {
		t.Errorf("5xx: %v after %d posts", err, e.requests("POST", "/comments"))
	}
	if _, err := e.c.Comment(context.Background(), 99, "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown pull request: %v", err)
	}
}

func TestSetStatus(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	long := strings.Repeat("policy web: 3 allow→deny, ", 10)
	for _, c := range []string{ContextValidate, ContextPreview, ContextPromote} {
		if err := e.c.SetStatus(ctx, sha("c"), c, StateSuccess, long, "https://reconciler.example/x"); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
	}
	sts := e.repo.Statuses(sha("c"))
	if len(sts) != 3 || sts[0].Context != ContextValidate || sts[0].TargetURL != "https://reconciler.example/x" {
		t.Fatalf("statuses = %+v", sts)
	}
	if d := []rune(sts[0].Description); len(d) != 140 || d[139] != '…' {
		t.Errorf("description %q", sts[0].Description)
	}
	if err := e.c.SetStatus(ctx, sha("c"), ContextValidate, "done", "", ""); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("bad state: %v", err)
	}
	if err := e.c.SetStatus(ctx, sha("c"), ContextPromote, StateFailure, "  invalid\nmain  ", ""); err != nil {
		t.Fatal(err)
	}
	if got := e.repo.Statuses(sha("c"))[3]; got.Description != "invalid main" || got.TargetURL != "" {
		t.Errorf("status = %+v", got)
	}
}

// GetComment reads a comment as GitHub has it now: its author, body, pull
// request and creation time; a deleted one is ErrNotFound.
func TestGetComment(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	n := e.openPull()
	id := e.repo.AddComment(n, "alice", "/reconciler commit")
	got, err := e.c.GetComment(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != id || got.PR != n || got.User != "alice" || got.Body != "/reconciler commit" || got.CreatedAt.IsZero() {
		t.Fatalf("GetComment = %+v; want #%d by alice", got, n)
	}
	e.repo.DeleteComment(id)
	if _, err := e.c.GetComment(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted comment: %v, want ErrNotFound", err)
	}
}

// issueNumber reads GitHub's issue_url: a positive number only when the
// URL ends in "/<that number>", else 0; never a panic.
func FuzzIssueNumber(f *testing.F) {
	for _, s := range []string{"https://api.github.com/repos/o/r/issues/12", "", "/", "x/0", "x/-3", "x/9999999999999999999999", "12"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := issueNumber(s)
		if n < 0 || (n > 0 && !strings.HasSuffix(s, strconv.Itoa(n))) {
			t.Fatalf("issueNumber(%q) = %d", s, n)
		}
	})
}
