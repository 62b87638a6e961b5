package webhook

import (
	"bytes"
	"net/http/httptest"
	"testing"
	"unicode/utf8"

	"github.com/policyrollout/reconciler/internal/githubemu"
)

// FuzzWebhook: any event name and body, correctly signed, never panics
// and never answers 5xx. The seeds in testdata/fuzz/FuzzWebhook are
// GitHub's examples trimmed to the fields the handler reads (the full
// examples, 30 KB each, make the fuzzer crawl; TestExamplePayloads covers
// them) plus malformed shapes.
func FuzzWebhook(f *testing.F) {
	f.Add("ping", []byte(`{"zen":"x","hook_id":1}`))
	f.Add("issue_comment", []byte(`{"action":"created","issue":{"number":1,"pull_request":{}},"comment":{"body":"/reconciler preview start","user":{"login":"a"}}}`))
	h := New(Config{Secret: []byte(secret), Trigger: &recorder{}, Commands: &recorder{}})
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		sig, _ := githubemu.Sign(secret, body)
		r := httptest.NewRequest("POST", Path, bytes.NewReader(body))
		r.Header.Set("X-Hub-Signature-256", sig)
		r.Header.Set("X-GitHub-Event", event)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("%s: status %d: %s", event, w.Code, w.Body)
		}
	})
}

// FuzzCommand: the comment parser never panics, and what it returns is
// one of the verbs with bounded, well-formed arguments.
func FuzzCommand(f *testing.F) {
	for _, s := range []string{"/reconciler preview start", "/reconciler status\nx", "/RECONCILER commit",
		"/reconciler", "/reconciler preview", "/reconciler héllo", "  /reconciler\thelp  ", "/reconcilerx", "text"} {
		f.Add(s)
	}
	verbs := map[string]bool{VerbPreview: true, VerbStatus: true, VerbCommit: true, VerbHelp: true}
	f.Fuzz(func(t *testing.T, body string) {
		cmd, ok := ParseCommand(body)
		if !ok {
			if cmd.Verb != "" {
				t.Fatalf("not a command but verb %q", cmd.Verb)
			}
			return
		}
		if !verbs[cmd.Verb] || (cmd.Error != "" && cmd.Verb != VerbHelp) || len(cmd.Args) > 1 {
			t.Fatalf("ParseCommand(%q) = %+v", body, cmd)
		}
		if cmd.Verb == VerbPreview && cmd.Args[0] != "start" && cmd.Args[0] != "stop" {
			t.Fatalf("preview args %v", cmd.Args)
		}
		if len(cmd.Error) > 200 || (utf8.ValidString(body) && !utf8.ValidString(cmd.Error)) {
			t.Fatalf("error note %q", cmd.Error)
		}
	})
}
