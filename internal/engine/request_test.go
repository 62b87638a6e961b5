package engine

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDecodeRequest(t *testing.T) {
	in := `{
		"method": "POST", "path": "/a", "host": "h", "scheme": "https",
		"query": {"q": "1"}, "headers": {"X-Token": "t", "accept": "*/*"},
		"source_ip": "2001:db8::1", "principal": "alice", "groups": ["g"],
		"attributes": {"n": 1.5, "list": [true, null, "s"], "obj": {"k": {}}},
		"time": "2024-05-01T12:00:00.5+02:00"
	}` + "\n"
	got, err := DecodeRequest([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := &Request{
		Method: "POST", Path: "/a", RawPath: "/a", Host: "h", Scheme: "https", // raw_path defaults to path
		Query: PairsOf(map[string]string{"q": "1"}), Headers: PairsOf(map[string]string{"x-token": "t", "accept": "*/*"}),
		SourceIP: "2001:db8::1", Principal: "alice", Groups: []string{"g"},
		Attributes: map[string]any{"n": 1.5, "list": []any{true, nil, "s"}, "obj": map[string]any{"k": map[string]any{}}},
		Time:       time.Date(2024, 5, 1, 10, 0, 0, 5e8, time.UTC),
	}
	if !got.Time.Equal(want.Time) {
		t.Errorf("time %v, want %v", got.Time, want.Time)
	}
	got.Time = want.Time
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
	empty, err := DecodeRequest([]byte(`{}`))
	if err != nil || !empty.Time.IsZero() {
		t.Errorf("empty object: %+v, %v", empty, err)
	}
}

func TestDecodeRequestErrors(t *testing.T) {
	deep := nestedAttributes(MaxAttributeDepth + 1)
	many := `{"attributes": {"l": [` + strings.Repeat(`1,`, MaxAttributeValues) + `1]}}`
	cases := []struct{ name, in, want string }{
		{"empty", ``, "body must be a JSON object"},
		{"not an object", `[1]`, "body must be a JSON object"},
		{"malformed", `{"method": "GET"`, "malformed JSON"},
		{"malformed value", `{"method": GET}`, "malformed JSON"},
		{"unknown field", `{"methd": "GET"}`, `field "methd": unknown field`},
		{"duplicate field", `{"path": "/a", "path": "/b"}`, `field "path": given twice`},
		{"wrong type", `{"method": 1}`, `field "method": must be a string, not a number`},
		{"null", `{"path": null}`, `field "path": must be a string, not null`},
		{"groups not strings", `{"groups": ["a", 1]}`, `field "groups": item 1 must be a string`},
		{"headers not strings", `{"headers": {"a": ["b"]}}`, `field "headers": every value must be a string, not a list`},
		{"duplicate header", `{"headers": {"X-A": "1", "x-a": "2"}}`, `field "headers": a header name is given twice`},
		{"invalid ip", `{"source_ip": "10.0.0.256"}`, `field "source_ip": the value is not an IPv4 or IPv6 address`},
		{"empty ip", `{"source_ip": ""}`, `field "source_ip": the value is not an IPv4 or IPv6 address`},
		{"bad time", `{"time": "yesterday"}`, `field "time": the value is not an RFC 3339 timestamp`},
		{"attributes not an object", `{"attributes": [1]}`, `field "attributes": must be an object`},
		{"too deep", deep, `field "attributes": nested deeper than 32 levels`},
		{"too many", many, `field "attributes": more than 10000 values`},
		{"duplicate attribute key", `{"attributes": {"a": 1, "a": 2}}`, `field "attributes": a key is given twice`},
		{"trailing data", `{} {}`, "unexpected data after the request object"},
		{"trailing garbage", `{}x`, "unexpected data after the request object"},
		{"huge", `{"path": "` + strings.Repeat("a", MaxRequestBytes) + `"}`, "over the limit"},
	}
	for _, tc := range cases {
		_, err := DecodeRequest([]byte(tc.in))
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q, want ErrBadRequest containing %q", tc.name, err, tc.want)
		}
		if strings.Contains(err.Error(), "yesterday") || strings.Contains(err.Error(), "10.0.0.256") || strings.Contains(err.Error(), `"x-a"`) {
			t.Errorf("%s: error %q echoes a value of the request (issue 22, finding 9)", tc.name, err)
		}
	}
}

// nestedAttributes is a request whose attributes nest depth objects deep,
// the attributes object itself included.
func nestedAttributes(depth int) string {
	return `{"attributes": ` + strings.Repeat(`{"a":`, depth) + `1` + strings.Repeat(`}`, depth) + `}`
}

func TestDecodeRequestDepthLimitIsInclusive(t *testing.T) {
	if _, err := DecodeRequest([]byte(nestedAttributes(MaxAttributeDepth))); err != nil {
		t.Errorf("depth %d refused: %v", MaxAttributeDepth, err)
	}
}

func TestRequestFromMap(t *testing.T) {
	when := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	got, err := RequestFromMap(map[string]any{
		"method": "GET", "headers": map[string]any{"User-Agent": "x"}, "groups": []any{"a"},
		"time": when, "source_ip": "10.0.0.1",
		"attributes": map[string]any{"n": int64(3), "t": when, "rows": []map[string]any{{"k": "v"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &Request{Method: "GET", Headers: PairsOf(map[string]string{"user-agent": "x"}), Groups: []string{"a"},
		Time: when, SourceIP: "10.0.0.1",
		Attributes: map[string]any{"n": int64(3), "t": when, "rows": []any{map[string]any{"k": "v"}}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
	if r, err := RequestFromMap(map[string]any{"time": "2024-01-02T03:04:05Z"}); err != nil || !r.Time.Equal(when) {
		t.Errorf("time string: %v, %v", r, err)
	}
	for name, m := range map[string]map[string]any{
		"unknown": {"verb": "GET"}, "type": {"groups": "a"}, "ip": {"source_ip": "x"},
		"attr type": {"attributes": map[string]any{"f": func() {}}}, "time type": {"time": int64(1)},
	} {
		if _, err := RequestFromMap(m); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: error %v, want ErrBadRequest", name, err)
		}
	}
}

// benchRequestBodies are decision requests as clients send them: the API
// benchmark's body, and one with a time and a few attributes.
var benchRequestBodies = []struct{ name, body string }{
	{"typical", `{"method":"GET","path":"/svc60/items/42","host":"shop.example","scheme":"https",` +
		`"query":{"page":"2","lang":"en"},"headers":{"user-agent":"bench/1.0","accept":"application/json","x-tenant":"acme"},` +
		`"source_ip":"192.0.2.10","principal":"alice@example.com","groups":["staff","eu"]}`},
	{"attributes", `{"method":"POST","path":"/orders","host":"shop.example","scheme":"https",` +
		`"headers":{"User-Agent":"bench/1.0","Content-Type":"application/json"},"source_ip":"2001:db8::7",` +
		`"principal":"bob","groups":["staff"],"time":"2024-05-01T12:00:00.5+02:00",` +
		`"attributes":{"tier":"gold","amount":12.5,"tags":["a","b"],"geo":{"country":"DE","eu":true},"note":null}}`},
}

func BenchmarkDecodeRequest(b *testing.B) {
	for _, c := range benchRequestBodies {
		b.Run(c.name, func(b *testing.B) {
			data := []byte(c.body)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeRequest(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A query of more entries than Go's net/url parses from a URL is refused
// by every path, as headers over their cap are: the entries are sorted by
// name, and 70,000 distinct names in an 800 KB body took 31 ms to decode.
func TestQueryEntriesAreBounded(t *testing.T) {
	body := func(n int) []byte {
		var b strings.Builder
		b.WriteString(`{"query":{`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"p%d":"v"`, i)
		}
		b.WriteString(`}}`)
		return []byte(b.String())
	}
	req, err := DecodeRequest(body(MaxQueryEntries))
	if err != nil || req.Query.Len() != MaxQueryEntries {
		t.Fatalf("%d entries: %v", MaxQueryEntries, err)
	}
	if _, err := DecodeRequest(body(MaxQueryEntries + 1)); err == nil || !strings.Contains(err.Error(), "at most 10000") {
		t.Fatalf("%d entries: %v, want the query refused", MaxQueryEntries+1, err)
	}
	if _, ok := decodeRequestFast(body(MaxQueryEntries + 1)); ok {
		t.Fatal("the fast path accepted a query over the cap")
	}
	m := map[string]any{"query": map[string]any{}}
	for i := range MaxQueryEntries + 1 {
		m["query"].(map[string]any)[fmt.Sprint("p", i)] = "v"
	}
	if _, err := RequestFromMap(m); err == nil {
		t.Fatal("RequestFromMap accepted a query over the cap")
	}
}
