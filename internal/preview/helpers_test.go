package preview_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// t0 is the fixed clock of the state machine tests.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func at(minutes int) time.Time { return t0.Add(time.Duration(minutes) * time.Minute) }

// webPolicy is the live policy of most tests: default allow, admin denied.
func webPolicy() *policy.Policy {
	return &policy.Policy{
		Name: "web", DefaultAction: policy.ActionAllow, Group: "default", OnError: policy.OnErrorDeny,
		Rules: []policy.Rule{
			{Name: "deny-admin", Priority: 100, Action: policy.ActionDeny, Match: "request.path.startsWith('/admin')"},
			{Name: "allow-office", Priority: 50, Action: policy.ActionAllow, Match: "inIpRange(request.source_ip, '192.0.2.0/24')"},
		},
	}
}

// tightWeb adds a rule denying plain http: the update being previewed.
func tightWeb() *policy.Policy {
	p := webPolicy()
	p.Rules = append(p.Rules, policy.Rule{Name: "deny-http", Priority: 200, Action: policy.ActionDeny, Match: "request.scheme == 'http'"})
	return p
}

func apiSource() preview.Source { return preview.Source{Kind: preview.SourceAPI} }

// create makes an API experiment of p called id under policies/{p.Name}.
func create(t *testing.T, existing []*preview.Experiment, id string, p *policy.Policy) *preview.Experiment {
	t.Helper()
	e, err := preview.Create(existing, preview.CreateRequest{
		Parent: "policies/" + p.Name, ExperimentID: id, Policy: p, Source: apiSource(),
	}, preview.Settings{}, t0)
	if err != nil {
		t.Fatalf("Create(%s): %v", id, err)
	}
	return e
}

func start(t *testing.T, e *preview.Experiment, now time.Time) *preview.Experiment {
	t.Helper()
	s, err := preview.StartPreview(e, now)
	if err != nil {
		t.Fatalf("StartPreview: %v", err)
	}
	return s
}

func wantCode(t *testing.T, err error, code preview.Code) {
	t.Helper()
	got, ok := preview.CodeOf(err)
	if !ok || got != code {
		t.Fatalf("error = %v, want code %s", err, code)
	}
}

// jsonMap renders v as JSON and reads it back as a map.
func jsonMap(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func compile(t testing.TB, p *policy.Policy) *engine.CompiledPolicy {
	t.Helper()
	cp, err := engine.Compile(p, engine.DefaultOptions())
	if err != nil {
		t.Fatalf("compile %s: %v", p.Name, err)
	}
	return cp
}

// syncBuffer is the preview log as the tests read it.
type syncBuffer struct{ testlog.Buffer }

// lines returns the log's JSON lines decoded.
func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for l := range strings.Lines(s.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// harness runs a Shadow over live policies with a compiler and a log.
type harness struct {
	t    *testing.T
	sh   *preview.Shadow
	log  *syncBuffer
	live map[string]*engine.CompiledPolicy
	comp *preview.Compiler
	sent uint64 // requests offered or mirrored
}

func newHarness(t *testing.T, cfg preview.Config, live ...*policy.Policy) *harness {
	t.Helper()
	h := &harness{t: t, log: &syncBuffer{}, live: map[string]*engine.CompiledPolicy{},
		comp: preview.NewCompiler(engine.Options{})}
	for _, p := range live {
		h.live[p.Name] = compile(t, p)
	}
	if cfg.Log == nil {
		cfg.Log = h.log
	}
	cfg.Logger = testlog.New(t)
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return t0 }
	}
	h.sh = preview.New(cfg)
	if err := h.sh.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.sh.Stop(context.Background()) })
	return h
}

// set installs the experiments as the node loader would.
func (h *harness) set(exps ...*preview.Experiment) {
	h.t.Helper()
	compiled, errs := h.comp.CompileAll(exps, h.live)
	if len(errs) > 0 {
		h.t.Fatalf("CompileAll: %v", errs)
	}
	h.sh.SetExperiments(h.live, compiled)
}

// offer answers each request with the live policy, as the API does, and
// hands it to preview; it waits until the workers are done with them.
func (h *harness) offer(pol string, reqs ...*engine.Request) {
	h.t.Helper()
	for _, r := range reqs {
		h.sent++
		if cp := h.live[pol]; cp != nil {
			h.sh.Offer(pol, cp.Evaluate(r), r)
		} else {
			h.sh.Mirror(pol, r)
		}
	}
	h.wait()
}

// wait returns once every offered request is processed or dropped.
func (h *harness) wait() {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := h.sh.Status()
		if st.Processed+st.Dropped == h.sent {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("workers did not finish: %+v", st)
		}
		time.Sleep(time.Millisecond)
	}
}

// stats returns the stats of experiment name at its etag.
func (h *harness) stats(e *preview.Experiment) preview.Stats {
	h.t.Helper()
	for _, s := range h.sh.Stats() {
		if s.Experiment == e.Name && s.ExperimentEtag == e.Etag {
			return s
		}
	}
	return preview.Stats{}
}

func req(method, scheme, path, ip string) *engine.Request {
	return &engine.Request{Method: method, Scheme: scheme, Path: path, Host: "www.example.com", SourceIP: ip, Time: t0}
}
