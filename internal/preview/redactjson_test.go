package preview

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
)

// redactorPathSets are the redaction configurations the encoder is held
// to: none, the defaults, every field whole, spellings in other cases,
// paths into headers, query and attributes, paths into lists and strings
// (which redact nothing), and a field named both whole and by a sub-path.
var redactorPathSets = [][]string{
	{},
	DefaultRedact,
	requestKeys[:],
	{"HEADERS.Authorization", "query.TOKEN", "Attributes.user.email", "PRINCIPAL"},
	{"headers", "headers.cookie", "attributes.user", "groups.0", "path.x", "time"},
	{"attributes", "query", "source_ip", "host", "method", "scheme"},
	{"attributes.list.0", "attributes.deep.b.c", "nosuch", "nosuch.field"},
}

// redactorShowSets are the shown values the encoder is held to: the
// defaults, none, and names the requests below use, in other cases too.
var redactorShowSets = [][]string{
	nil,
	{},
	{"headers.a0", "HEADERS.Authorization1", "headers.b", "headers.x-é", "query.q", "Query.TOKEN",
		"attributes.user", "attributes.list", "attributes.deep", "attributes.at", "attributes.n", "nosuch", "path.x"},
}

// checkAppendJSON: AppendJSON writes exactly json.Marshal(Request(req)),
// or declines (false).
func checkAppendJSON(t *testing.T, paths, show []string, req *engine.Request) bool {
	t.Helper()
	r := NewRedactor(paths, show)
	want, err := json.Marshal(r.Request(req))
	if err != nil {
		if _, ok := r.AppendJSON(nil, req); ok {
			t.Fatalf("paths %q: AppendJSON encoded what json.Marshal refuses (%v): %+v", paths, err, req)
		}
		return false
	}
	got, ok := r.AppendJSON([]byte("prefix"), req)
	if !ok {
		return false // the caller falls back to Request
	}
	if string(got) != "prefix"+string(want) {
		t.Fatalf("paths %q, request %+v:\ngot  %s\nwant prefix%s", paths, req, got, want)
	}
	return true
}

// TestRedactorAppendJSON holds the encoder of log line requests to the
// map that samples and summaries use, encoded by encoding/json.
func TestRedactorAppendJSON(t *testing.T) {
	srcs := []string{
		`{}`,
		`{"method":"GET","path":"/a<b>&\u2028","headers":{"b":"2","a":"1","Authorization":"x","x-\u00e9":"\u65e5"},"query":{"q":"","token":"t"}}`,
		`{"source_ip":"2001:db8::1","principal":"alice","groups":["ops","dev"],"time":"2026-11-21T10:00:00.123+02:00"}`,
		`{"host":"h","scheme":"https","attributes":{"user":{"email":"a@b","plan":"pro"},"n":1e21,"m":1e-7,"list":[1,"two",{"k":false}],"deep":{"b":{"c":[]}}}}`,
	}
	var reqs []*engine.Request
	for _, src := range srcs {
		req, err := engine.DecodeRequest([]byte(src))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		reqs = append(reqs, req)
	}
	rng := rand.New(rand.NewPCG(22, 11))
	for range 200 {
		reqs = append(reqs, randomRequest(rng))
	}
	// A kind the encoder leaves to encoding/json.
	reqs = append(reqs, &engine.Request{Method: "GET", Attributes: map[string]any{"at": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}})
	encoded := 0
	for _, paths := range redactorPathSets {
		for _, show := range redactorShowSets {
			for _, req := range reqs {
				if checkAppendJSON(t, paths, show, req) {
					encoded++
				}
			}
		}
	}
	// Only the request with a time among its attributes is declined
	// (unless a path redacts the attributes whole, or they are hidden).
	if total := len(redactorPathSets) * len(redactorShowSets) * len(reqs); encoded < total-len(redactorPathSets) {
		t.Errorf("AppendJSON encoded %d of %d", encoded, total)
	}
}

func randomRequest(rng *rand.Rand) *engine.Request {
	word := func() string {
		return []string{"", "a", "Authorization", "cookie", "x-h1", "tok\"en", "<b>", "é", "\u2028"}[rng.IntN(9)]
	}
	strs := func() map[string]string {
		m := map[string]string{}
		for range rng.IntN(20) {
			m[word()+fmt.Sprint(rng.IntN(3))] = word()
		}
		return m
	}
	req := &engine.Request{Method: word(), Path: "/" + word(), Host: word(), Scheme: word(), SourceIP: word(),
		Principal: word(), Headers: engine.PairsOf(strs()), Query: engine.PairsOf(strs())}
	for range rng.IntN(3) {
		req.Groups = append(req.Groups, word())
	}
	if rng.IntN(2) == 0 {
		req.Attributes = map[string]any{"user": map[string]any{"email": word(), "n": float64(rng.IntN(100))},
			word(): []any{word(), true, nil}}
	}
	if rng.IntN(2) == 0 {
		req.Time = time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).In(time.FixedZone("x", 3600))
	}
	return req
}

// FuzzRedactorAppendJSON: for any request that decodes and any redaction
// paths (shown, and redacted), AppendJSON writes json.Marshal(Request(req)) or declines.
func FuzzRedactorAppendJSON(f *testing.F) {
	f.Add([]byte(`{"method":"GET","headers":{"authorization":"x"},"attributes":{"u":{"e":"@"}}}`), "headers.authorization,attributes.u.e")
	f.Add([]byte(`{"query":{"a":"\u0000"},"groups":["g"],"time":"2026-01-01T00:00:00Z"}`), "QUERY,groups.g,time")
	f.Fuzz(func(t *testing.T, data []byte, paths string) {
		req, err := engine.DecodeRequest(data)
		if err != nil {
			return
		}
		list := strings.Split(paths, ",")
		checkAppendJSON(t, list, list, req)
	})
}
