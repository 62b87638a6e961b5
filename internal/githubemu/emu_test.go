package githubemu

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"
)

const testToken = "ghp_emulatortesttoken"

// setup starts an emulator with repository o/r (main at "base") and a
// go-github client for it.
func setup(t *testing.T) (*Server, *Repo, *github.Client) {
	t.Helper()
	s := New(Options{Token: testToken, WebhookSecret: "s3cret"})
	t.Cleanup(s.Close)
	r := s.AddRepo("o/r", "main")
	r.SetRef("main", strings.Repeat("b", 40))
	gh, err := github.NewClient(nil).WithAuthToken(testToken).WithEnterpriseURLs(s.URL(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	return s, r, gh
}

// sha makes a 40-character SHA from a letter.
func sha(c string) string { return strings.Repeat(c, 40) }

func TestPullsListGetAndPagination(t *testing.T) {
	_, r, gh := setup(t)
	ctx := context.Background()
	for i := 0; i < 35; i++ {
		r.OpenPull(Pull{HeadRef: "f" + string(rune('a'+i%26)) + string(rune('a'+i/26)), HeadSHA: sha("c"), BaseRef: "main"})
	}
	r.UpdatePull(3, func(p *Pull) { p.State = "closed" })
	var all []*github.PullRequest
	opts := &github.PullRequestListOptions{State: "open", Base: "main", ListOptions: github.ListOptions{PerPage: 10}}
	for pages := 0; ; pages++ {
		list, resp, err := gh.PullRequests.List(ctx, "o", "r", opts)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, list...)
		if resp.NextPage == 0 {
			if pages != 3 {
				t.Errorf("pages = %d, want 4", pages+1)
			}
			break
		}
		opts.Page = resp.NextPage
	}
	if len(all) != 34 {
		t.Fatalf("listed %d open pull requests, want 34", len(all))
	}
	p := all[0]
	if p.GetNumber() != 35 || p.GetHead().GetSHA() != sha("c") || p.GetBase().GetRef() != "main" ||
		p.GetUser().GetLogin() != "octocat" || p.GetNodeID() == "" || p.GetCreatedAt().IsZero() ||
		!strings.HasSuffix(p.GetHTMLURL(), "/o/r/pull/35") {
		t.Errorf("list item = %+v", p)
	}
	got, _, err := gh.PullRequests.Get(ctx, "o", "r", 3)
	if err != nil || got.GetState() != "closed" || got.GetMergeable() != true || got.GetMergeableState() != "clean" {
		t.Fatalf("get = %+v, %v", got, err)
	}
	if _, _, err := gh.PullRequests.Get(ctx, "o", "r", 99); !isStatus(err, 404) {
		t.Errorf("get missing: %v", err)
	}
}

func TestCreatePull(t *testing.T) {
	_, r, gh := setup(t)
	ctx := context.Background()
	r.SetRef("revert-1", sha("d"))
	np := &github.NewPullRequest{Title: github.String("Revert"), Head: github.String("revert-1"), Base: github.String("main")}
	p, _, err := gh.PullRequests.Create(ctx, "o", "r", np)
	if err != nil || p.GetNumber() != 1 || p.GetHead().GetSHA() != sha("d") || p.GetUser().GetLogin() != "reconciler[bot]" {
		t.Fatalf("create = %+v, %v", p, err)
	}
	if _, _, err := gh.PullRequests.Create(ctx, "o", "r", np); !isStatus(err, 422) ||
		!strings.Contains(err.Error(), "already exists") {
		t.Errorf("duplicate create: %v", err)
	}
	np.Head = github.String("nope")
	if _, _, err := gh.PullRequests.Create(ctx, "o", "r", np); !isStatus(err, 422) {
		t.Errorf("unknown head: %v", err)
	}
}

func TestListFiles(t *testing.T) {
	_, r, gh := setup(t)
	n := r.OpenPull(Pull{HeadRef: "x", HeadSHA: sha("c"), BaseRef: "main"})
	r.SetFiles(n, []File{{Filename: "web/policy.toml", Status: "modified", Additions: 2, Deletions: 1}})
	files, _, err := gh.PullRequests.ListFiles(context.Background(), "o", "r", n, nil)
	if err != nil || len(files) != 1 || files[0].GetFilename() != "web/policy.toml" || files[0].GetChanges() != 3 {
		t.Fatalf("files = %v, %v", files, err)
	}
}

func TestComments(t *testing.T) {
	s, r, gh := setup(t)
	ctx := context.Background()
	n := r.OpenPull(Pull{HeadRef: "x", HeadSHA: sha("c"), BaseRef: "main"})
	c, resp, err := gh.Issues.CreateComment(ctx, "o", "r", n, &github.IssueComment{Body: github.String("hi")})
	if err != nil || resp.StatusCode != 201 || resp.Header.Get("Location") != c.GetURL() {
		t.Fatalf("create = %v, %v", c, err)
	}
	if c.GetUser().GetLogin() != "reconciler[bot]" || c.GetUser().GetType() != "Bot" || c.GetHTMLURL() == "" || c.GetCreatedAt().IsZero() {
		t.Errorf("comment = %+v", c)
	}
	e, _, err := gh.Issues.EditComment(ctx, "o", "r", c.GetID(), &github.IssueComment{Body: github.String("edited")})
	if err != nil || e.GetBody() != "edited" {
		t.Fatalf("edit = %v, %v", e, err)
	}
	r.AddComment(n, "alice", "me too")
	list, _, err := gh.Issues.ListComments(ctx, "o", "r", n, nil)
	if err != nil || len(list) != 2 || list[1].GetUser().GetLogin() != "alice" {
		t.Fatalf("list = %v, %v", list, err)
	}
	if got := s.Requests()[len(s.Requests())-1].Header.Get("Accept"); got != "application/vnd.github.squirrel-girl-preview" {
		t.Errorf("list Accept = %q", got)
	}
	for _, body := range []string{`{}`, `{"body":"  "}`} {
		if code := rawStatus(t, s, "POST", "repos/o/r/issues/1/comments", body); code != 422 {
			t.Errorf("create %s: %d, want 422", body, code)
		}
	}
	if code := rawStatus(t, s, "POST", "repos/o/r/issues/1/comments", `{`); code != 400 {
		t.Errorf("bad JSON: %d, want 400", code)
	}
	if _, _, err := gh.Issues.EditComment(ctx, "o", "r", 1, &github.IssueComment{Body: github.String("x")}); !isStatus(err, 404) {
		t.Errorf("edit missing: %v", err)
	}
}

// A comment's created_at and updated_at are the emulator's clock in whole
// seconds, as GitHub's REST API shows them: an edit moves updated_at and
// answers it, created_at stays; the list and Comments agree.
func TestCommentTimes(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 25, 20, 0, 0, 700_000_000, time.FixedZone("x", 3600))
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := New(Options{Token: testToken, Now: clock})
	t.Cleanup(s.Close)
	r := s.AddRepo("o/r", "main")
	gh, err := github.NewClient(nil).WithAuthToken(testToken).WithEnterpriseURLs(s.URL(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n := r.OpenPull(Pull{HeadRef: "x", HeadSHA: sha("c"), BaseRef: "main"})
	created := time.Date(2026, 11, 25, 19, 0, 0, 0, time.UTC)
	c, _, err := gh.Issues.CreateComment(ctx, "o", "r", n, &github.IssueComment{Body: github.String("hi")})
	if err != nil || !c.GetCreatedAt().Time.Equal(created) || !c.GetUpdatedAt().Time.Equal(created) {
		t.Fatalf("create = %v / %v, %v; want both %v", c.GetCreatedAt(), c.GetUpdatedAt(), err, created)
	}
	mu.Lock()
	now = now.Add(1500 * time.Millisecond)
	mu.Unlock()
	edited := created.Add(2 * time.Second)
	e, _, err := gh.Issues.EditComment(ctx, "o", "r", c.GetID(), &github.IssueComment{Body: github.String("edited")})
	if err != nil || !e.GetCreatedAt().Time.Equal(created) || !e.GetUpdatedAt().Time.Equal(edited) {
		t.Fatalf("edit = %v / %v, %v; want %v / %v", e.GetCreatedAt(), e.GetUpdatedAt(), err, created, edited)
	}
	list, _, err := gh.Issues.ListComments(ctx, "o", "r", n, nil)
	if err != nil || len(list) != 1 || !list[0].GetUpdatedAt().Time.Equal(edited) {
		t.Fatalf("list = %v, %v", list, err)
	}
	if cs := r.Comments(n); !cs[0].CreatedAt.Equal(created) || !cs[0].UpdatedAt.Equal(edited) {
		t.Fatalf("Comments = %+v", cs)
	}
}

func TestStatuses(t *testing.T) {
	s, _, gh := setup(t)
	ctx := context.Background()
	for _, st := range []string{"pending", "success"} {
		rs := &github.RepoStatus{State: github.String(st), Context: github.String("reconciler/validate"), Description: github.String("ok")}
		got, resp, err := gh.Repositories.CreateStatus(ctx, "o", "r", sha("c"), rs)
		if err != nil || resp.StatusCode != 201 || got.GetCreator().GetLogin() != "reconciler[bot]" || got.GetState() != st {
			t.Fatalf("create status = %v, %v", got, err)
		}
	}
	_, _, _ = gh.Repositories.CreateStatus(ctx, "o", "r", sha("c"), &github.RepoStatus{State: github.String("failure"), Context: github.String("other")})
	comb, _, err := gh.Repositories.GetCombinedStatus(ctx, "o", "r", sha("c"), nil)
	if err != nil || comb.GetState() != "failure" || comb.GetTotalCount() != 2 || comb.Statuses[0].GetState() != "success" {
		t.Fatalf("combined = %+v, %v", comb, err)
	}
	long := strings.Repeat("x", 141)
	if _, _, err := gh.Repositories.CreateStatus(ctx, "o", "r", sha("c"), &github.RepoStatus{State: github.String("success"), Description: &long}); !isStatus(err, 422) {
		t.Errorf("long description: %v", err)
	}
	if _, _, err := gh.Repositories.CreateStatus(ctx, "o", "r", sha("c"), &github.RepoStatus{State: github.String("done")}); !isStatus(err, 422) {
		t.Errorf("bad state: %v", err)
	}
	if code := rawStatus(t, s, "POST", "repos/o/r/statuses/"+sha("c"), `{"context":"x"}`); code != 422 {
		t.Errorf("missing state: %d", code)
	}
}

func TestMerge(t *testing.T) {
	s, r, gh := setup(t)
	ctx := context.Background()
	n := r.OpenPull(Pull{HeadRef: "x", HeadSHA: sha("c"), BaseRef: "main"})
	_, _, err := gh.PullRequests.Merge(ctx, "o", "r", n, "", &github.PullRequestOptions{SHA: sha("d")})
	if !isStatus(err, 409) || !strings.Contains(err.Error(), "Head branch was modified") {
		t.Fatalf("stale sha: %v", err)
	}
	r.UpdatePull(n, func(p *Pull) { p.Mergeable = ptr(false) })
	if _, _, err := gh.PullRequests.Merge(ctx, "o", "r", n, "", nil); !isStatus(err, 405) {
		t.Fatalf("unmergeable: %v", err)
	}
	r.UpdatePull(n, func(p *Pull) { p.Mergeable = ptr(true) })
	var hooked MergeRequest
	s.OnMerge(func(m MergeRequest) (string, error) { hooked = m; return sha("e"), nil })
	res, _, err := gh.PullRequests.Merge(ctx, "o", "r", n, "", &github.PullRequestOptions{SHA: sha("c"), MergeMethod: "squash"})
	if err != nil || res.GetSHA() != sha("e") || !res.GetMerged() {
		t.Fatalf("merge = %v, %v", res, err)
	}
	if hooked.Number != n || hooked.Method != "squash" || hooked.HeadSHA != sha("c") {
		t.Errorf("hook saw %+v", hooked)
	}
	if p, _ := r.Pull(n); !p.Merged || p.State != "closed" || p.MergeCommitSHA != sha("e") {
		t.Errorf("after merge: %+v", p)
	}
	if ref, _ := r.Ref("main"); ref != sha("e") {
		t.Errorf("main = %s", ref)
	}
	if _, _, err := gh.PullRequests.Merge(ctx, "o", "r", n, "", nil); !isStatus(err, 405) {
		t.Errorf("second merge: %v", err)
	}
}

func TestPermissionLevels(t *testing.T) {
	s, r, _ := setup(t)
	want := map[string][2]string{"admin": {"admin", "admin"}, "maintain": {"write", "maintain"},
		"write": {"write", "write"}, "triage": {"read", "triage"}, "read": {"read", "read"}}
	for role, w := range want {
		r.SetPermission("u-"+role, role)
		var got struct {
			Permission string `json:"permission"`
			RoleName   string `json:"role_name"`
			User       struct{ Login string }
		}
		body := rawGet(t, s, "repos/o/r/collaborators/u-"+role+"/permission")
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if got.Permission != w[0] || got.RoleName != w[1] || got.User.Login != "u-"+role {
			t.Errorf("%s: %+v", role, got)
		}
	}
	if code := rawStatus(t, s, "GET", "repos/o/r/collaborators/stranger/permission", ""); code != 404 {
		t.Errorf("unknown user: %d", code)
	}
}

func TestBranchRefAndCheckRuns(t *testing.T) {
	_, r, gh := setup(t)
	ctx := context.Background()
	r.SetRef("feature/x", sha("f"))
	r.SetProtected("main", true)
	b, _, err := gh.Repositories.GetBranch(ctx, "o", "r", "feature/x", 0)
	if err != nil || b.GetCommit().GetSHA() != sha("f") || b.GetName() != "feature/x" {
		t.Fatalf("branch = %+v, %v", b, err)
	}
	if b, _, _ := gh.Repositories.GetBranch(ctx, "o", "r", "main", 0); !b.GetProtected() {
		t.Error("main not protected")
	}
	if _, _, err := gh.Repositories.GetBranch(ctx, "o", "r", "gone", 0); err == nil || !strings.Contains(err.Error(), "unexpected status code: 404") {
		t.Errorf("missing branch: %v", err)
	}
	ref, _, err := gh.Git.GetRef(ctx, "o", "r", "refs/heads/main")
	if err != nil || ref.GetObject().GetSHA() != sha("b") || ref.GetRef() != "refs/heads/main" {
		t.Fatalf("ref = %+v, %v", ref, err)
	}
	done := "completed"
	if _, _, err := gh.Checks.CreateCheckRun(ctx, "o", "r", github.CreateCheckRunOptions{Name: "reconciler", HeadSHA: sha("c"), Status: &done}); !isStatus(err, 422) {
		t.Errorf("completed without conclusion: %v", err)
	}
	run, _, err := gh.Checks.CreateCheckRun(ctx, "o", "r", github.CreateCheckRunOptions{Name: "reconciler", HeadSHA: sha("c")})
	if err != nil || run.GetStatus() != "queued" {
		t.Fatalf("check run = %v, %v", run, err)
	}
	upd, _, err := gh.Checks.UpdateCheckRun(ctx, "o", "r", run.GetID(), github.UpdateCheckRunOptions{Conclusion: github.String("success")})
	if err != nil || upd.GetName() != "reconciler" || upd.GetStatus() != "completed" || upd.GetCompletedAt().IsZero() {
		t.Fatalf("update = %+v, %v", upd, err)
	}
}

func TestHeadersChecked(t *testing.T) {
	s, _, _ := setup(t)
	bad, _ := github.NewClient(nil).WithAuthToken("wrong").WithEnterpriseURLs(s.URL(), s.URL())
	if _, _, err := bad.PullRequests.List(context.Background(), "o", "r", nil); !isStatus(err, 401) {
		t.Errorf("wrong token: %v", err)
	}
	req, _ := http.NewRequest("GET", s.APIURL()+"repos/o/r/pulls", nil)
	req.Header.Set("Authorization", "token "+testToken)
	req.Header.Set("Accept", "text/html")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 415 {
		t.Errorf("Accept text/html: %v %v", resp, err)
	}
	for _, rq := range s.Requests() {
		if strings.Contains(rq.Header.Get("Authorization"), testToken) {
			t.Errorf("recorded a token: %v", rq.Header)
		}
	}
	if code := rawStatusAt(t, s.URL()+"/repos/o/r/pulls", "GET", ""); code != 404 {
		t.Errorf("outside the prefix: %d", code)
	}
}

func TestFaults(t *testing.T) {
	s, _, gh := setup(t)
	ctx := context.Background()
	reset := time.Now().Add(time.Hour).Truncate(time.Second)
	s.Inject(Fault{Kind: PrimaryRateLimit, Reset: reset})
	_, _, err := gh.PullRequests.List(ctx, "o", "r", nil)
	var rl *github.RateLimitError
	if !errors.As(err, &rl) || !rl.Rate.Reset.Time.Equal(reset) {
		t.Fatalf("primary: %v", err)
	}
	gh2, _ := github.NewClient(nil).WithAuthToken(testToken).WithEnterpriseURLs(s.URL(), s.URL())
	s.Inject(Fault{Kind: SecondaryRateLimit, RetryAfter: 3 * time.Second, Path: "/pulls"})
	_, _, err = gh2.PullRequests.List(ctx, "o", "r", nil)
	var ab *github.AbuseRateLimitError
	if !errors.As(err, &ab) || ab.RetryAfter == nil || *ab.RetryAfter != 3*time.Second {
		t.Fatalf("secondary: %v", err)
	}
	gh3, _ := github.NewClient(nil).WithAuthToken(testToken).WithEnterpriseURLs(s.URL(), s.URL())
	s.Inject(Fault{Kind: TooManyRequests, RetryAfter: 2 * time.Second})
	_, resp, err := gh3.PullRequests.List(ctx, "o", "r", nil)
	if !isStatus(err, 429) || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("429: %v", err)
	}
	s.FailNext(2, 503)
	for i := 0; i < 2; i++ {
		if _, _, err := gh3.PullRequests.List(ctx, "o", "r", nil); !isStatus(err, 503) {
			t.Fatalf("5xx %d: %v", i, err)
		}
	}
	if _, _, err := gh3.PullRequests.List(ctx, "o", "r", nil); err != nil || s.PendingFaults() != 0 {
		t.Fatalf("after faults: %v", err)
	}
}

func TestFaultAfterHandlingApplies(t *testing.T) {
	s, r, gh := setup(t)
	n := r.OpenPull(Pull{HeadRef: "x", HeadSHA: sha("c"), BaseRef: "main"})
	s.Inject(Fault{Kind: ServerError, Method: "POST", Path: "/comments", AfterHandling: true})
	_, _, err := gh.Issues.CreateComment(context.Background(), "o", "r", n, &github.IssueComment{Body: github.String("x")})
	if !isStatus(err, 502) || len(r.Comments(n)) != 1 {
		t.Fatalf("lost answer: %v, comments %v", err, r.Comments(n))
	}
}

func TestRootPrefix(t *testing.T) {
	s := New(Options{Prefix: "/"})
	defer s.Close()
	s.AddRepo("o/r", "main")
	gh := github.NewClient(nil)
	gh.BaseURL, _ = gh.BaseURL.Parse(s.APIURL())
	if _, _, err := gh.PullRequests.List(context.Background(), "o", "r", nil); err != nil {
		t.Fatal(err)
	}
}

// isStatus reports whether err is a go-github error with that HTTP status.
func isStatus(err error, code int) bool {
	var er *github.ErrorResponse
	return errors.As(err, &er) && er.Response.StatusCode == code
}

// rawStatus sends a hand-made request below the API base; returns the status.
func rawStatus(t *testing.T, s *Server, method, path, body string) int {
	return rawStatusAt(t, s.APIURL()+path, method, body)
}

func rawStatusAt(t *testing.T, url, method, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func rawGet(t *testing.T, s *Server, path string) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", s.APIURL()+path, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}
