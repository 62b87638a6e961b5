package engine

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fastAccepted are bodies the fast path must decode itself: the shapes
// clients send. Losing one is no bug, only slow, but should be on purpose.
var fastAccepted = []string{
	`{}`,
	" \t\r\n{ \"method\" : \"GET\" , \"path\" :\"/\"\n}\n ",
	`{"method":"GET","path":"/a/b","host":"h","scheme":"http","principal":"p","source_ip":"10.0.0.1"}`,
	`{"source_ip":"::ffff:10.0.0.1"}`,
	`{"source_ip":"fe80::1%eth0"}`,
	`{"query":{},"headers":{},"groups":[],"attributes":{}}`,
	`{"query":{"a":"1","a":"2"}}`,
	`{"headers":{"X-Token":"t","Accept":"*/*","x-b":""}}`,
	`{"headers":{"K":"kelvin"}}`,
	`{"path":"\/a\u00e9\n\"q\" \ud83d\ude00 \ud800"}`,
	`{"path":"caf` + "\u00e9 \U0001F600" + `"}`,
	"{\"path\":\"\xff\xfe\"}",
	`{"headers":{"\u0058-A":"\u0062"},"query":{"caf\u00e9":"x"}}`,
	`{"time":"2024-05-01T12:00:00.5+02:00"}`,
	`{"time":"2024-05-01T12:00:00Z"}`,
	`{"attributes":{"n":1.5,"list":[true,null,"s",false],"obj":{"k":{}},"e":[]}}`,
	`{"attributes":{"big":1.7976931348623157e308,"neg":-0,"exp":1E-7,"z":0,"i":-12,"f":0.25e+2,"esc\"":"\u2028"}}`,
	`{"attributes":{"a":[[[[]]]],"b":[{"c":[1,2,3]}]}}`,
	nestedAttributes(MaxAttributeDepth),
	`{"attributes":{"l":[` + strings.Repeat(`1,`, MaxAttributeValues-3) + `1]}}`,
	`{"groups":[` + strings.Repeat(`"g",`, 2*maxFastPairs) + `"h"]}`,
	`{"headers":{` + manyPairs(2*maxFastPairs) + `}}`,
	`{"path":"` + strings.Repeat("a", 2*sharedBodyMax) + `","headers":{"A":"1"},"attributes":{"n":3}}`,
}

func manyPairs(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"H-` + strings.Repeat("x", i) + `":"v"`)
	}
	return b.String()
}

// fastRefused are bodies the fast path must leave to the precise decoder:
// errors, and the valid oddities it does not handle itself.
var fastRefused = []string{
	``, `[]`, `null`, `{`, `{}x`, `{} {}`, `{},`, `{"method":"GET",}`, `{"method":"GET" "path":"/"}`,
	`{"method":"GET"`, `{"method" "GET"}`, `{"method":GET}`, `{method:"GET"}`, `{"method":'GET'}`,
	`{"methd":"GET"}`, `{"Method":"GET"}`, `{"m\u0065thod":"GET"}`, `{"path":"/a","path":"/b"}`,
	`{"method":1}`, `{"path":null}`, `{"groups":"a"}`, `{"groups":["a",1]}`, `{"groups":["a",]}`,
	`{"groups":[null]}`, `{"query":[]}`, `{"query":{"a":1}}`, `{"query":{"a":"1",}}`, `{"query":{a:"1"}}`,
	`{"headers":{"a":["b"]}}`, `{"headers":{"X-A":"1","x-a":"2"}}`, `{"headers":{"a":"1","a":"2"}}`,
	`{"headers":{"K":"1","k":"2"}}`, `{"headers":null}`,
	`{"source_ip":"10.0.0.256"}`, `{"source_ip":""}`, `{"source_ip":1}`,
	`{"time":"yesterday"}`, `{"time":1}`, `{"time":null}`,
	`{"attributes":[1]}`, `{"attributes":null}`, `{"attributes":"x"}`, `{"attributes":{"a":1,"a":2}}`,
	`{"attributes":{"a":1e400}}`, `{"attributes":{"a":01}}`, `{"attributes":{"a":1.}}`, `{"attributes":{"a":.5}}`,
	`{"attributes":{"a":-}}`, `{"attributes":{"a":1e}}`, `{"attributes":{"a":+1}}`, `{"attributes":{"a":0x1}}`,
	`{"attributes":{"a":NaN}}`, `{"attributes":{"a":truex}}`, `{"attributes":{"a":nul}}`, `{"attributes":{"a":tru}}`,
	`{"attributes":{"a":[1,]}}`, `{"attributes":{"a":[1 2]}}`, `{"attributes":{"a":{"b":1]}}`,
	`{"attributes":{"a":"\x"}}`, `{"attributes":{"a":"\u12"}}`, "{\"attributes\":{\"a\":\"\x01\"}}",
	"{\"path\":\"a\\\xc3\xa9\"}", `{"path":"a\`, `{"path":"a`,
	nestedAttributes(MaxAttributeDepth + 1),
	`{"attributes":{"a":[` + strings.Repeat("[", MaxAttributeDepth) + strings.Repeat("]", MaxAttributeDepth) + `]}}`,
	`{"attributes":{"l":[` + strings.Repeat(`1,`, MaxAttributeValues-2) + `1]}}`,
	"\xef\xbb\xbf{}", "{}\x00", "{\"method\":\"GET\"}\v",
}

// checkFastDecodeAgrees fails t unless the fast path, when it accepts data,
// decodes it exactly as the precise decoder does, and unless DecodeRequest
// answers as the precise decoder does (errors word for word).
func checkFastDecodeAgrees(t *testing.T, data []byte) (accepted bool) {
	t.Helper()
	precise, perr := decodeRequestPrecise(data)
	got, err := DecodeRequest(data)
	if len(data) <= MaxRequestBytes {
		if (err == nil) != (perr == nil) || (err != nil && err.Error() != perr.Error()) {
			t.Fatalf("%q: DecodeRequest error %v, precise decoder %v", data, err, perr)
		}
		if err == nil && !reflect.DeepEqual(got, precise) {
			t.Fatalf("%q: DecodeRequest\n%#v\nprecise decoder\n%#v", data, got, precise)
		}
	}
	fast, ok := decodeRequestFast(data)
	if !ok {
		return false
	}
	if perr != nil {
		t.Fatalf("%q: fast path accepted what the precise decoder refuses: %v", data, perr)
	}
	if !reflect.DeepEqual(fast, precise) {
		t.Fatalf("%q: fast path\n%#v\nprecise decoder\n%#v", data, fast, precise)
	}
	checkSameJSON(t, data, fast, precise)
	return true
}

// checkSameJSON fails t unless the two requests marshal alike and as a
// Request with Go maps for query and headers did (mapRequest): the JSON
// of a request (the preview log, recorded traffic) did not change when
// they became Pairs. The JSON also reads back as the same request.
func checkSameJSON(t *testing.T, data []byte, fast, precise *Request) {
	t.Helper()
	a, errA := json.Marshal(fast)
	b, errB := json.Marshal(precise)
	m, errM := json.Marshal(mapRequestOf(precise))
	if errA != nil || errB != nil || errM != nil {
		t.Fatalf("%q: marshal: %v, %v, %v", data, errA, errB, errM)
	}
	if !bytes.Equal(a, b) || !bytes.Equal(b, m) {
		t.Fatalf("%q: JSON of the fast path\n%s\nof the precise decoder\n%s\nwith maps\n%s", data, a, b, m)
	}
	var back Request
	if err := json.Unmarshal(a, &back); err != nil {
		t.Fatalf("%q: %s does not read back: %v", data, a, err)
	}
	if again, _ := json.Marshal(&back); !bytes.Equal(again, a) {
		t.Fatalf("%q: JSON\n%s\nreads back as\n%s", data, a, again)
	}
	if back.Headers.Present() != (precise.Headers.Len() > 0) || back.Query.Present() != (precise.Query.Len() > 0) {
		t.Fatalf("%q: read back, headers and query present %v %v", data, back.Headers.Present(), back.Query.Present())
	}
}

// mapRequest is Request as it was before Pairs: its JSON is the reference.
type mapRequest struct {
	Method     string            `json:"method,omitempty"`
	Path       string            `json:"path,omitempty"`
	RawPath    string            `json:"raw_path,omitempty"`
	Host       string            `json:"host,omitempty"`
	Scheme     string            `json:"scheme,omitempty"`
	Query      map[string]string `json:"query,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	SourceIP   string            `json:"source_ip,omitempty"`
	Principal  string            `json:"principal,omitempty"`
	Groups     []string          `json:"groups,omitempty"`
	Attributes map[string]any    `json:"attributes,omitempty"`
	Time       time.Time         `json:"time,omitzero"`
}

func mapRequestOf(r *Request) *mapRequest {
	return &mapRequest{Method: r.Method, Path: r.Path, RawPath: r.RawPath, Host: r.Host, Scheme: r.Scheme,
		Query: r.Query.Map(), Headers: r.Headers.Map(), SourceIP: r.SourceIP, Principal: r.Principal,
		Groups: r.Groups, Attributes: r.Attributes, Time: r.Time}
}

func TestDecodeRequestFastAgrees(t *testing.T) {
	for _, in := range fastAccepted {
		if !checkFastDecodeAgrees(t, []byte(in)) {
			_, err := decodeRequestPrecise([]byte(in))
			t.Errorf("%.80q: fast path refused (precise decoder: %v)", in, err)
		}
	}
	for _, in := range fastRefused {
		if checkFastDecodeAgrees(t, []byte(in)) {
			t.Errorf("%.80q: fast path accepted", in)
		}
	}
	for _, c := range benchRequestBodies {
		if !checkFastDecodeAgrees(t, []byte(c.body)) {
			t.Errorf("%s: fast path refused", c.name)
		}
	}
}

// FuzzDecodeRequestFast checks the fast path against the precise decoder
// on arbitrary bodies.
func FuzzDecodeRequestFast(f *testing.F) {
	for _, in := range fastAccepted {
		if len(in) < 4096 {
			f.Add([]byte(in))
		}
	}
	for _, in := range fastRefused {
		if len(in) < 4096 {
			f.Add([]byte(in))
		}
	}
	for _, c := range benchRequestBodies {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastDecodeAgrees(t, data)
	})
}

// TestDecodeAllocations (issue 26): a typical request body decodes in three
// allocations: the one copy of the body its strings share, the request
// with the entries of its query and headers, and its groups. Query and
// headers as Go maps cost two allocations each and a hashed insert per
// entry.
func TestDecodeAllocations(t *testing.T) {
	data := []byte(benchRequestBodies[0].body)
	allocs := testing.AllocsPerRun(100, func() {
		if _, ok := decodeRequestFast(data); !ok {
			t.Fatal("fast path refused the typical body")
		}
	})
	if allocs != 3 {
		t.Errorf("decoding the typical body allocates %v times, want 3", allocs)
	}
}

// TestNewRequestWithOneAllocation: for every count of pairs the request
// and room for them are one allocation, of at least that room.
func TestNewRequestWithOneAllocation(t *testing.T) {
	for n := 1; n <= 2*maxFastPairs; n++ {
		var slab []Pair
		allocs := testing.AllocsPerRun(10, func() { _, slab = newRequestWith(n) })
		want := 1.0
		if n > maxFastPairs {
			want = 2 // past the largest size: a Request and a slice
		}
		if allocs != want || len(slab) != 0 || cap(slab) < n {
			t.Errorf("%d pairs: %v allocations, len %d cap %d", n, allocs, len(slab), cap(slab))
		}
	}
}
