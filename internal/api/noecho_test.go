package api

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// lockedBuffer is a log sink that handlers may write to while the test
// reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestNoEchoOfRequestValues (issue 22, finding 9): a malformed
// X-Original-URI was echoed whole, query included, into X-Policy-Error and
// the debug log ("/%zz?access_token=SECRET"). No decision form echoes a
// value of the request now, in an answer header, an AIP-193 message or a
// log line at debug level.
func TestNoEchoOfRequestValues(t *testing.T) {
	logs := &lockedBuffer{}
	log := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace})
	e := newTestEnv(t, Config{Logger: log, Mirror: &mirrorRecorder{}})
	const secret = "SECRET"
	gateway := []map[string]string{
		{"X-Original-URI": "/%zz?access_token=" + secret},
		{"X-Original-URI": "/ok?access_token=" + secret + "&bad=%zz"},
		{"X-Original-URI": "/ok", "X-Forwarded-For": secret},
		{"X-Original-URI": "/ok", "X-Real-Ip": secret},
	}
	for _, h := range gateway {
		a := e.do("GET", "/v1/policies/web:authorize", nil, h)
		if perr := a.header.Get("X-Policy-Error"); a.code != 403 || !strings.HasPrefix(perr, "INVALID_ARGUMENT: ") || strings.Contains(perr, secret) {
			t.Errorf(":authorize %v: %d X-Policy-Error %q", h, a.code, perr)
		}
		a = e.do("GET", "/v1/policies/web:mirror", nil, h)
		wantError(t, a, 400, "INVALID_ARGUMENT")
		if strings.Contains(string(a.body), secret) {
			t.Errorf(":mirror %v: %s", h, a.body)
		}
	}
	for _, body := range []string{
		`{"source_ip": "SECRET"}`, `{"time": "SECRET"}`, `{"headers": {"SECRET": "a", "secret": "b"}}`,
		`{"query": {"SECRET": 1}}`, `{"attributes": {"SECRET": 1, "SECRET": 2}}`,
	} {
		a := e.do("POST", "/v1/policies/web:evaluate", strings.NewReader(body), nil)
		wantError(t, a, 400, "INVALID_ARGUMENT")
		if strings.Contains(string(a.body), secret) {
			t.Errorf(":evaluate %s: %s", body, a.body)
		}
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the log holds a request value:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "gateway check undecided") {
		t.Errorf("the debug log was not written, so it proves nothing:\n%s", logs.String())
	}
}

// TestUnenforcedLogNoEcho: a node in TEST logs each decision with its
// match error; an error that quotes the request (cel-go's "no such key:
// <key>") loses the quote there, in every decision form.
func TestUnenforcedLogNoEcho(t *testing.T) {
	p := &policy.Policy{Name: "quoting", DefaultAction: policy.ActionAllow, Group: "default", OnError: policy.OnErrorDeny,
		Rules: []policy.Rule{{Name: "lookup", Priority: 1, Action: policy.ActionDeny, Match: "request.headers[request.path] == 'x'"}}}
	b, err := engine.NewBundle([]*policy.Policy{p}, engine.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	gens := &fakeGenerations{}
	gens.set(&Snapshot{Generation: 2, Bundle: b})
	st := &fixedState{}
	st.v.Store(raftstore.NodeTest)
	logs := &lockedBuffer{}
	e := newTestEnv(t, Config{Generations: gens, States: st, Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace})})
	e.post("/v1/policies/quoting:evaluate", `{"path":"/SECRET"}`)
	e.do("GET", "/v1/policies/quoting:authorize", nil, map[string]string{"X-Original-URI": "/SECRET"})
	out := logs.String()
	if strings.Count(out, "decision not enforced") != 2 || !strings.Contains(out, "no such key") || strings.Contains(out, "SECRET") {
		t.Errorf("want two TEST lines naming the error without the key:\n%s", out)
	}
}
