package main

import (
	"net/http"
	"strings"
	"testing"
)

// A 503 of a cluster between leaders names its reason and says whether
// the request was done: NO_LEADER and NOT_LEADER mean nothing was written
// (safe to run again), LEADERSHIP_LOST and FORWARD_FAILED that the leader
// may have done it. The reason was dropped, so an operator could not tell
// a safe re-run from one that rolls back twice.
func TestAnswerErrorNamesTheReasonAndWhetherItWasDone(t *testing.T) {
	body := func(reason string) []byte {
		return []byte(`{"error":{"code":503,"status":"UNAVAILABLE","message":"between leaders",` +
			`"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"` + reason + `","domain":"reconciler"}]}}`)
	}
	resp := &http.Response{Status: "503 Service Unavailable", StatusCode: http.StatusServiceUnavailable}
	for reason, want := range map[string]string{
		"NO_LEADER":       "nothing was done",
		"NOT_LEADER":      "nothing was done",
		"LEADERSHIP_LOST": "may have been done",
		"FORWARD_FAILED":  "may have been done",
	} {
		msg := answerError("http://n1", resp, body(reason)).Error()
		if !strings.Contains(msg, "UNAVAILABLE ("+reason+")") || !strings.Contains(msg, want) {
			t.Errorf("%s: %q, want the reason and %q", reason, msg, want)
		}
	}
	other := answerError("http://n1", &http.Response{Status: "409 Conflict", StatusCode: http.StatusConflict},
		[]byte(`{"error":{"code":409,"status":"ALREADY_EXISTS","message":"taken","details":[{"reason":"MEMBERSHIP_CONFLICT","domain":"reconciler"}]}}`)).Error()
	if other != "http://n1 answered 409 Conflict: ALREADY_EXISTS (MEMBERSHIP_CONFLICT): taken" {
		t.Errorf("a 409: %q", other)
	}
}
