package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-github/v60/github"
	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/githubemu"
)

const secret = "s3cret"

// recorder fakes Trigger and Commands.
type recorder struct {
	mu       sync.Mutex
	triggers []string
	commands []Command
}

func (r *recorder) Trigger(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.triggers = append(r.triggers, reason)
}

func (r *recorder) Enqueue(c Command) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.commands = append(r.commands, c)
}

// Triggers returns a copy of the reasons triggered so far.
func (r *recorder) Triggers() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.triggers...)
}

// Commands returns a copy of the commands enqueued so far.
func (r *recorder) Commands() []Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Command(nil), r.commands...)
}

func (r *recorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.triggers) + len(r.commands)
}

// fixture is an emulator delivering to a handler behind an httptest server.
type fixture struct {
	emu  *githubemu.Server
	repo *githubemu.Repo
	rec  *recorder
	url  string
	pr   int
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	f := &fixture{rec: &recorder{}}
	f.emu = githubemu.New(githubemu.Options{WebhookSecret: secret})
	t.Cleanup(f.emu.Close)
	f.repo = f.emu.AddRepo("o/r", "main")
	f.repo.SetRef("main", strings.Repeat("b", 40))
	f.pr = f.repo.OpenPull(githubemu.Pull{HeadRef: "feat", HeadSHA: strings.Repeat("c", 40), BaseRef: "main", Author: "alice"})
	if cfg.Secret == nil {
		cfg.Secret = []byte(secret)
	}
	cfg.Trigger, cfg.Commands = f.rec, f.rec
	srv := httptest.NewServer(edge(New(cfg)))
	t.Cleanup(srv.Close)
	f.url = srv.URL + Path
	return f
}

// edge serves h as the API does: a refusal is answered with its code's
// HTTP status and name (internal/api writes the full AIP-193 body).
func edge(h *Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h.Receive(w, r); err != nil {
			var e *errs.Error
			if !errors.As(err, &e) {
				e = &errs.Error{Code: errs.Internal}
			}
			w.WriteHeader(e.HTTPStatus())
			fmt.Fprintf(w, `{"error":{"code":%d,"status":%q}}`, e.HTTPStatus(), e.Code)
		}
	})
}

// deliver sends payload as event and returns the answer.
func (f *fixture) deliver(t *testing.T, event string, payload []byte, err error) *githubemu.DeliveryResult {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.emu.Deliver(f.url, event, payload)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestEventsTrigger(t *testing.T) {
	f := newFixture(t, Config{Branch: "main"})
	check := func(res *githubemu.DeliveryResult, status int, trigger string) {
		t.Helper()
		got := ""
		if n := len(f.rec.Triggers()); n > 0 {
			got = f.rec.Triggers()[n-1]
		}
		if res.Status != status || got != trigger {
			t.Errorf("%s: %d %s, trigger %q; want %d %q", res.Event, res.Status, res.Body, got, status, trigger)
		}
	}
	for _, action := range []string{"opened", "synchronize", "reopened"} {
		p, err := f.repo.PullRequestEvent(action, f.pr)
		check(f.deliver(t, "pull_request", p, err), 202, "github pull_request #1 "+action)
	}
	p, err := f.repo.BaseEditedEvent(f.pr, "develop")
	check(f.deliver(t, "pull_request", p, err), 202, "github pull_request #1 edited")
	p, err = f.repo.PushEvent("main", strings.Repeat("b", 40), strings.Repeat("d", 40))
	check(f.deliver(t, "push", p, err), 202, "github push main dddddddddddd")
	f.repo.UpdatePull(f.pr, func(p *githubemu.Pull) { p.State, p.Merged = "closed", true })
	p, err = f.repo.PullRequestEvent("closed", f.pr)
	check(f.deliver(t, "pull_request", p, err), 202, "github pull_request #1 merged")
	if len(f.rec.Triggers()) != 6 {
		t.Errorf("triggers = %v", f.rec.Triggers())
	}
}

func TestEventsIgnored(t *testing.T) {
	f := newFixture(t, Config{Branch: "main", Repository: "o/r"})
	p, _ := f.repo.PullRequestEvent("labeled", f.pr)
	for _, c := range []struct {
		event   string
		payload []byte
	}{
		{"pull_request", p},
		{"push", mustPayload(f.repo.PushEvent("feature", strings.Repeat("0", 40), strings.Repeat("d", 40)))},
		{"pull_request", mustPayload(f.repo.PullRequestEvent("edited", f.pr))}, // no base change
		{"check_run", []byte(`{"action":"created"}`)},
		{"star", []byte(`not even json`)},
		{"push", bytes.ReplaceAll(mustPayload(f.repo.PushEvent("main", strings.Repeat("b", 40), strings.Repeat("d", 40))), []byte(`"o/r"`), []byte(`"x/y"`))},
	} {
		res := f.deliver(t, c.event, c.payload, nil)
		if res.Status != 202 || !strings.Contains(string(res.Body), "ignored") {
			t.Errorf("%s: %d %s", c.event, res.Status, res.Body)
		}
	}
	if f.rec.calls() != 0 {
		t.Errorf("called: %v %v", f.rec.Triggers(), f.rec.Commands())
	}
	ping, _ := f.repo.PingEvent(f.url)
	if res := f.deliver(t, "ping", ping, nil); res.Status != 200 {
		t.Errorf("ping: %d %s", res.Status, res.Body)
	}
}

func mustPayload(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestSignatureRequired(t *testing.T) {
	f := newFixture(t, Config{})
	payload, _ := f.repo.PullRequestEvent("opened", f.pr)
	sig256, sig1 := githubemu.Sign(secret, payload)
	wrong256, _ := githubemu.Sign("other", payload)
	for name, h := range map[string]map[string]string{
		"none":        {},
		"sha1 only":   {"X-Hub-Signature": sig1},
		"wrong mac":   {"X-Hub-Signature-256": wrong256, "X-Hub-Signature": sig1},
		"bad hex":     {"X-Hub-Signature-256": "sha256=zz"},
		"no prefix":   {"X-Hub-Signature-256": strings.TrimPrefix(sig256, "sha256=")},
		"sha1 in 256": {"X-Hub-Signature-256": sig1},
	} {
		d := f.emu.NewDelivery("pull_request", payload)
		d.Header.Del("X-Hub-Signature-256")
		d.Header.Del("X-Hub-Signature")
		for k, v := range h {
			d.Header.Set(k, v)
		}
		res, err := f.emu.Redeliver(f.url, d)
		if err != nil || res.Status != 401 || !strings.Contains(string(res.Body), "UNAUTHENTICATED") {
			t.Errorf("%s: %v %v", name, res, err)
		}
	}
	// A body changed after signing.
	d := f.emu.NewDelivery("pull_request", payload)
	d.Payload = append(bytes.Clone(payload), ' ')
	if res, _ := f.emu.Redeliver(f.url, d); res.Status != 401 {
		t.Errorf("tampered body: %d", res.Status)
	}
	if f.rec.calls() != 0 {
		t.Errorf("called: %v", f.rec.Triggers())
	}
}

func TestEmptySecretRefusesAll(t *testing.T) {
	var logs bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Trace})
	h := New(Config{Logger: log, Trigger: &recorder{}})
	emu := githubemu.New(githubemu.Options{}) // unsigned, as GitHub without a secret
	defer emu.Close()
	repo := emu.AddRepo("o/r", "main")
	payload, _ := repo.PushEvent("main", strings.Repeat("0", 40), strings.Repeat("d", 40))
	for i := 0; i < 3; i++ {
		d := emu.NewDelivery("push", payload)
		sig, _ := githubemu.Sign("", payload) // valid for an empty secret: still refused
		d.Header.Set("X-Hub-Signature-256", sig)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, request(d.Header, bytes.NewReader(payload), int64(len(payload))))
		if w.Code != 503 {
			t.Errorf("status %d", w.Code)
		}
	}
	if n := strings.Count(logs.String(), "secret is empty"); n != 1 {
		t.Errorf("logged %d times:\n%s", n, logs.String())
	}
}

func request(h http.Header, body io.Reader, length int64) *http.Request {
	r := httptest.NewRequest("POST", Path, body)
	r.Header = h.Clone()
	r.ContentLength = length
	return r
}

// countingReader counts what is read of an endless body.
type countingReader struct{ n int64 }

func (c *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	c.n += int64(len(p))
	return len(p), nil
}

// TestMalformedSignatureReadsNothing: a signature header that is not
// sha256= and 64 hex digits is refused before a byte of the body is read.
func TestMalformedSignatureReadsNothing(t *testing.T) {
	h := New(Config{Secret: []byte(secret)})
	for _, sig := range []string{"", "sha1=" + strings.Repeat("00", 20), "sha256=", "sha256=00", "sha256=" + strings.Repeat("zz", 32), "sha256=" + strings.Repeat("00", 33)} {
		body := &countingReader{}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, request(http.Header{"X-Hub-Signature-256": {sig}, "X-Github-Event": {"push"}}, body, 1000))
		if w.Code != 401 || body.n != 0 {
			t.Errorf("%q: %d after reading %d bytes", sig, w.Code, body.n)
		}
	}
}

func TestBodyTooLarge(t *testing.T) {
	rec := &recorder{}
	h := New(Config{Secret: []byte(secret), Trigger: rec})
	hdr := http.Header{"X-Hub-Signature-256": {"sha256=" + strings.Repeat("00", 32)}, "X-Github-Event": {"push"}}
	// Declared too large: refused without reading.
	body := &countingReader{}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, request(hdr, body, MaxBodyBytes+1))
	if w.Code != 413 || body.n != 0 {
		t.Errorf("declared: %d after reading %d bytes", w.Code, body.n)
	}
	// Chunked (no length): read up to the limit only.
	body = &countingReader{}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, request(hdr, body, -1))
	if w.Code != 413 || body.n > MaxBodyBytes+64<<10 {
		t.Errorf("chunked: %d after reading %d bytes", w.Code, body.n)
	}
	if rec.calls() != 0 {
		t.Error("called")
	}
}

func TestRedeliveryHarmless(t *testing.T) {
	f := newFixture(t, Config{})
	payload, _, err := f.repo.CommentEvent(f.pr, "alice", "/reconciler commit")
	first := f.deliver(t, "issue_comment", payload, err)
	again, err := f.emu.Redeliver(f.url, first.Delivery)
	if err != nil || first.Status != 202 || again.Status != 200 || !strings.Contains(string(again.Body), "duplicate") {
		t.Fatalf("first %d, again %v %v", first.Status, again, err)
	}
	if len(f.rec.Commands()) != 1 {
		t.Errorf("commands = %v", f.rec.Commands())
	}
	// The same payload in a new delivery is a new event (a second comment).
	f.deliver(t, "issue_comment", payload, nil)
	if len(f.rec.Commands()) != 2 {
		t.Errorf("commands = %v", f.rec.Commands())
	}
}

func TestCommentCommands(t *testing.T) {
	f := newFixture(t, Config{})
	payload, id, err := f.repo.CommentEvent(f.pr, "alice", "  /Reconciler   PREVIEW  Start \r\nplease")
	res := f.deliver(t, "issue_comment", payload, err)
	want := Command{PR: f.pr, User: "alice", Verb: VerbPreview, Args: []string{"start"}, CommentID: id, DeliveryID: res.ID}
	if res.Status != 202 || len(f.rec.Commands()) != 1 || !equal(f.rec.Commands()[0], want) {
		t.Fatalf("%d: %+v, want %+v", res.Status, f.rec.Commands(), want)
	}
	for _, body := range []string{"LGTM", "please run /reconciler status"} {
		p, _, err := f.repo.CommentEvent(f.pr, "alice", body)
		f.deliver(t, "issue_comment", p, err)
	}
	bot, _, _ := f.repo.CommentEvent(f.pr, "reconciler[bot]", "/reconciler help")
	f.deliver(t, "issue_comment", bot, nil)
	plain, _ := githubemu.WebhookExample("issue_comment.created")
	f.deliver(t, "issue_comment", bytes.Replace(plain, []byte("You are totally right!"), []byte("/reconciler status"), 1), nil)
	if len(f.rec.Commands()) != 1 || len(f.rec.Triggers()) != 0 {
		t.Errorf("commands = %+v", f.rec.Commands())
	}
}

func equal(a, b Command) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// Every example payload GitHub documents parses and gets its answer.
func TestExamplePayloads(t *testing.T) {
	f := newFixture(t, Config{})
	want := map[string]string{
		"issue_comment.created":                 "ignored",
		"issue_comment.created.on-pull-request": "ignored", // not a command
		"pull_request.closed":                   "github pull_request #2 closed",
		"pull_request.closed.merged":            "github pull_request #2 merged",
		"pull_request.opened":                   "github pull_request #2 opened",
		"pull_request.synchronize":              "github pull_request #2 synchronize",
		"push":                                  "github push master 6113728f27ae",
	}
	for _, name := range githubemu.WebhookExamples {
		payload, err := githubemu.WebhookExample(name)
		event, _, _ := strings.Cut(name, ".")
		if _, perr := github.ParseWebHook(event, payload); perr != nil {
			t.Errorf("%s: go-github: %v", name, perr)
		}
		before := len(f.rec.Triggers())
		res := f.deliver(t, event, payload, err)
		got := "ignored"
		if len(f.rec.Triggers()) > before {
			got = f.rec.Triggers()[before]
		}
		if res.Status != 202 || got != want[name] {
			t.Errorf("%s: %d %s, trigger %q; want %q", name, res.Status, res.Body, got, want[name])
		}
	}
}

func TestMalformedPayloads(t *testing.T) {
	f := newFixture(t, Config{})
	for _, c := range []struct{ event, body string }{
		{"push", "{"}, {"push", "null"}, {"push", "[]"}, {"push", `"x"`}, {"ping", "[1]"},
		{"pull_request", `{"action":"opened"}`}, {"pull_request", `{"action":"closed","number":-3}`},
		{"issue_comment", `{"action":"created","issue":{"number":0,"pull_request":{}},"comment":{"body":"/reconciler status"}}`},
		{"issue_comment", `{"action":"created","issue":null}`}, {"pull_request", `{"number":"two"}`},
	} {
		res := f.deliver(t, c.event, []byte(c.body), nil)
		if res.Status != 400 && res.Status != 202 {
			t.Errorf("%s %s: %d", c.event, c.body, res.Status)
		}
		if c.body == "{" && res.Status != 400 {
			t.Errorf("bad JSON: %d", res.Status)
		}
	}
	if f.rec.calls() != 0 {
		t.Errorf("called: %v %v", f.rec.Triggers(), f.rec.Commands())
	}
	d := f.emu.NewDelivery("", []byte("{}"))
	if res, _ := f.emu.Redeliver(f.url, d); res.Status != 400 {
		t.Errorf("no event header: %d", res.Status)
	}
}

func TestFormContentType(t *testing.T) {
	f := newFixture(t, Config{})
	payload, _ := f.repo.PullRequestEvent("opened", f.pr)
	body := []byte("payload=" + url.QueryEscape(string(payload)))
	d := f.emu.NewDelivery("pull_request", body)
	d.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if res, err := f.emu.Redeliver(f.url, d); err != nil || res.Status != 202 || len(f.rec.Triggers()) != 1 {
		t.Fatalf("form: %v %v", res, err)
	}
	d = f.emu.NewDelivery("pull_request", payload)
	d.Header.Set("Content-Type", "text/plain")
	if res, _ := f.emu.Redeliver(f.url, d); res.Status != 400 {
		t.Errorf("text/plain: %d", res.Status)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	w := httptest.NewRecorder()
	New(Config{Secret: []byte(secret)}).ServeHTTP(w, httptest.NewRequest("GET", Path, nil))
	if w.Code != 405 || w.Header().Get("Allow") != "POST" {
		t.Errorf("GET: %d", w.Code)
	}
}

func TestRecentIsBounded(t *testing.T) {
	r := newRecent(3)
	for _, id := range []string{"a", "b", "c"} {
		if !r.add(id) {
			t.Fatalf("%s seen", id)
		}
	}
	if r.add("a") || !r.add("d") || !r.add("a") || len(r.ids) != 3 {
		t.Errorf("ids = %v", r.ids)
	}
}
