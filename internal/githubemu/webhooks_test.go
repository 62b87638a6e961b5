package githubemu

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-github/v60/github"
)

func TestPayloadsReflectState(t *testing.T) {
	_, r, _ := setup(t)
	n := r.OpenPull(Pull{HeadRef: "feat", HeadSHA: sha("c"), BaseRef: "main", Author: "alice"})
	b, err := r.PullRequestEvent("synchronize", n)
	ev := parse[*github.PullRequestEvent](t, "pull_request", b, err)
	if ev.GetAction() != "synchronize" || ev.GetNumber() != n || ev.GetAfter() != sha("c") ||
		ev.GetPullRequest().GetHead().GetSHA() != sha("c") || ev.GetRepo().GetFullName() != "o/r" ||
		ev.GetSender().GetLogin() != "alice" || ev.GetPullRequest().GetMerged() {
		t.Errorf("synchronize = %+v", ev)
	}
	b, err = r.BaseEditedEvent(n, "develop")
	ev = parse[*github.PullRequestEvent](t, "pull_request", b, err)
	if ev.GetChanges().GetBase().GetRef().GetFrom() != "develop" {
		t.Errorf("edited changes = %+v", ev.GetChanges())
	}
	r.UpdatePull(n, func(p *Pull) { p.State, p.Merged, p.MergeCommitSHA = "closed", true, sha("m") })
	b, err = r.PullRequestEvent("closed", n)
	ev = parse[*github.PullRequestEvent](t, "pull_request", b, err)
	if !ev.GetPullRequest().GetMerged() || ev.GetPullRequest().GetMergeCommitSHA() != sha("m") {
		t.Errorf("closed merged = %+v", ev.GetPullRequest())
	}
	b, id, err := r.CommentEvent(n, "bob", "/reconciler status")
	ce := parse[*github.IssueCommentEvent](t, "issue_comment", b, err)
	if !ce.GetIssue().IsPullRequest() || ce.GetIssue().GetNumber() != n || ce.GetComment().GetID() != id ||
		ce.GetComment().GetBody() != "/reconciler status" || ce.GetComment().GetUser().GetLogin() != "bob" {
		t.Errorf("comment = %+v", ce)
	}
	b, err = r.PushEvent("main", sha("b"), sha("d"))
	pe := parse[*github.PushEvent](t, "push", b, err)
	if pe.GetRef() != "refs/heads/main" || pe.GetHeadCommit().GetID() != sha("d") || pe.GetCreated() {
		t.Errorf("push = %+v", pe)
	}
	b, err = r.PingEvent("http://x/v1/webhooks/github")
	pg := parse[*github.PingEvent](t, "ping", b, err)
	if pg.GetHookID() != HookID || pg.GetZen() == "" {
		t.Errorf("ping = %+v", pg)
	}
}

func parse[T any](t *testing.T, event string, b []byte, err error) T {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	v, err := github.ParseWebHook(event, b)
	if err != nil {
		t.Fatalf("%s: %v", event, err)
	}
	return v.(T)
}

func TestDeliverSignsLikeGitHub(t *testing.T) {
	s, r, _ := setup(t)
	var got *http.Request
	var body []byte
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		got, body = req, mustRead(req.Body)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer recv.Close()
	payload, _ := r.PingEvent(recv.URL)
	res, err := s.Deliver(recv.URL, "ping", payload)
	if err != nil || res.Status != 202 {
		t.Fatalf("deliver: %v %v", res, err)
	}
	if !bytes.Equal(body, payload) {
		t.Error("payload changed in transit")
	}
	for _, h := range []string{"X-Hub-Signature-256", "X-Hub-Signature"} {
		if err := github.ValidateSignature(got.Header.Get(h), body, []byte("s3cret")); err != nil {
			t.Errorf("go-github rejects %s: %v", h, err)
		}
	}
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	if !uuid.MatchString(github.DeliveryID(got)) || github.WebHookType(got) != "ping" ||
		got.Header.Get("X-GitHub-Hook-ID") == "" || got.Header.Get("X-Hub-Signature") == "" ||
		!regexp.MustCompile(`^GitHub-Hookshot/`).MatchString(got.UserAgent()) {
		t.Errorf("headers = %v", got.Header)
	}
	again, err := s.Redeliver(recv.URL, res.Delivery)
	if err != nil || github.DeliveryID(got) != res.ID || again.ID != res.ID {
		t.Errorf("redelivery id changed: %v", err)
	}
}

func mustRead(r io.Reader) []byte {
	b, _ := io.ReadAll(r)
	return b
}

// The embedded examples are verbatim copies of the shared reference.
func TestWebhookExamplesMatchShared(t *testing.T) {
	const dir = "/work/shared/github/webhooks"
	if _, err := os.Stat(dir); err != nil {
		t.Skip("shared reference not present")
	}
	for _, name := range WebhookExamples {
		want, err := os.ReadFile(filepath.Join(dir, name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := WebhookExample(name); !bytes.Equal(got, want) {
			t.Errorf("%s differs from the shared copy", name)
		}
	}
}
