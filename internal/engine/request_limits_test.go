package engine

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// headersBody is a request of n distinct headers whose values would show
// in an error that echoed them; escaped forces the precise decoder.
func headersBody(n int, escaped bool) string { return headersBodyOf(n, escaped, "secret-") }

// headersBodyOf is headersBody with values prefix followed by the index.
func headersBodyOf(n int, escaped bool, prefix string) string {
	var b strings.Builder
	b.WriteString(`{"method":"GET","headers":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		name := "h" + strconv.Itoa(i)
		if escaped {
			name = `\u0068` + strconv.Itoa(i)
		}
		b.WriteString(`"` + name + `":"` + prefix + strconv.Itoa(i) + `"`)
	}
	b.WriteString(`}}`)
	return b.String()
}

// TestDecodeRequestHeaderCap (issue 22, finding 6): a body of 50,000
// headers was decoded whole, some 8.5 MB of maps and strings for 0.74 MB
// of JSON. Both decoders now refuse the entry after the cap, without
// echoing a header value, and stop reading there.
func TestDecodeRequestHeaderCap(t *testing.T) {
	for _, escaped := range []bool{false, true} {
		if _, err := DecodeRequest([]byte(headersBody(DefaultMaxHeaders, escaped))); err != nil {
			t.Errorf("escaped=%v: %d headers refused: %v", escaped, DefaultMaxHeaders, err)
		}
		_, err := DecodeRequest([]byte(headersBody(DefaultMaxHeaders+1, escaped)))
		want := fmt.Sprintf(`field "headers": more than %d headers`, DefaultMaxHeaders)
		if err == nil || !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), want) {
			t.Fatalf("escaped=%v: %d headers: error %v, want ErrBadRequest with %q", escaped, DefaultMaxHeaders+1, err, want)
		}
		if strings.Contains(err.Error(), "secret-") {
			t.Errorf("the error echoes a header value: %v", err)
		}
		checkFastDecodeAgrees(t, []byte(headersBody(DefaultMaxHeaders+1, escaped)))
	}
	if _, err := DecodeRequestWithin([]byte(headersBody(6, false)), Limits{MaxHeaders: 5}); err == nil ||
		!strings.Contains(err.Error(), "more than 5 headers") {
		t.Errorf("MaxHeaders 5, 6 headers: error %v", err)
	}
	if _, err := DecodeRequestWithin([]byte(headersBody(5, true)), Limits{MaxHeaders: 5}); err != nil {
		t.Errorf("MaxHeaders 5, 5 headers: %v", err)
	}
}

// TestDecodeRequestHeaderCapStopsEarly: refusing 40,000 headers allocates
// a small fraction of the body, on either decoder (today: about 12 times
// the body).
func TestDecodeRequestHeaderCapStopsEarly(t *testing.T) {
	for _, escaped := range []bool{false, true} {
		body := []byte(headersBodyOf(40_000, escaped, ""))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := DecodeRequest(body)
		runtime.ReadMemStats(&after)
		allocated := after.TotalAlloc - before.TotalAlloc
		t.Logf("escaped=%v: %d-byte body of 40,000 headers: %d bytes allocated, error %v", escaped, len(body), allocated, err)
		if err == nil {
			t.Errorf("escaped=%v: 40,000 headers accepted", escaped)
		}
		if allocated > uint64(len(body)/4) {
			t.Errorf("escaped=%v: refusing allocated %d bytes for a %d-byte body", escaped, allocated, len(body))
		}
	}
}
