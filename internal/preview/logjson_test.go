package preview

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
)

// TestMarshalLineMatchesEncodingJSON: the hand-written encoding of preview
// log lines is byte for byte json.Marshal's, for every kind of value a
// request holds, and falls back to it for a kind it does not know.
func TestMarshalLineMatchesEncodingJSON(t *testing.T) {
	reqs := []string{
		`{}`,
		`{"method":"GET","path":"/a<b>&\u2028","headers":{"b":"2","a":"1","x-\u00e9":"\u65e5"},"query":{"q":""}}`,
		`{"source_ip":"2001:db8::1","principal":"alice","groups":["ops","dev"],"time":"2026-11-21T10:00:00.123Z"}`,
		`{"attributes":{"n":1e21,"m":1e-7,"z":0,"neg":-0.5,"big":123456789012,"e20":5e20,"e6":1e-6,"e7":9.99e-7,"f":1.5,"t":true,"nil":null,
		  "list":[1,"two",[3],{"k":false}],"deep":{"b":{"c":[]},"a":{}}}}`,
	}
	for _, src := range reqs {
		req, err := engine.DecodeRequest([]byte(src))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		checkLine(t, testLine(requestMap(req), "node-1"))
	}
	checkLine(t, testLine(nil, ""))
	checkLine(t, testLine(map[string]any{"i": int64(-7), "l": []any(nil), "m": map[string]any(nil)}, ""))
	// Kinds it leaves to encoding/json: the result is still json.Marshal's.
	checkLine(t, testLine(map[string]any{"at": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}, ""))
	if _, err := marshalLine(nil, testLine(map[string]any{"x": math.NaN()}, "")); err == nil {
		t.Fatal("NaN encoded")
	}
}

// FuzzMarshalLine: for any request that decodes, the log line encodes as
// json.Marshal encodes it.
func FuzzMarshalLine(f *testing.F) {
	f.Add([]byte(`{"method":"GET","headers":{"a":"1"},"attributes":{"x":[1.25,{"y":null}]}}`))
	f.Add([]byte(`{"path":"\u0000\ud800","attributes":{"e":1e-300}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := engine.DecodeRequest(data)
		if err != nil {
			return
		}
		checkLine(t, testLine(requestMap(req), "n"))
	})
}

func testLine(req map[string]any, node string) *LogLine {
	live := engine.Decision{Verdict: engine.Allow, Rule: "r<1>", Etag: `"e1"`}
	exp := engine.Decision{Verdict: engine.Deny, Rule: "r\n2", Etag: "e2"}
	at := time.Date(2026, 11, 21, 1, 2, 3, 4, time.UTC).Format(time.RFC3339Nano)
	l := newLogLine(at, "policies/p/experiments/x", 7, live, exp, true, node)
	l.Request = req
	return &l
}

func checkLine(t *testing.T, l *LogLine) {
	t.Helper()
	want, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	got, err := marshalLine([]byte("prefix"), l)
	if err != nil || !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("marshalLine:\n got %s (%v)\nwant prefix%s", got, err, want)
	}
}
