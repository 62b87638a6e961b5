package preview_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/preview"
)

// FuzzParseFilter: any input either fails with INVALID_ARGUMENT or gives
// a filter whose canonical spelling parses back to the same filter.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"", "preview_metadata.state = ACTIVE", "preview_metadata.state=SUSPENDED",
		"preview_metadata.state == ACTIVE", "x = y", "=", "preview_metadata.state = ACTIVE = ACTIVE", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := preview.ParseFilter(s)
		if err != nil {
			if code, _ := preview.CodeOf(err); code != preview.InvalidArgument {
				t.Fatalf("ParseFilter(%q): %v", s, err)
			}
			return
		}
		switch got.State {
		case "":
			if strings.TrimSpace(s) != "" {
				t.Fatalf("ParseFilter(%q) = empty filter", s)
			}
		case preview.Active, preview.Suspended:
			again, err := preview.ParseFilter("preview_metadata.state = " + string(got.State))
			if err != nil || again != got {
				t.Fatalf("canonical form of %q does not parse back: %v", s, err)
			}
		default:
			t.Fatalf("ParseFilter(%q) = state %q", s, got.State)
		}
	})
}

// FuzzReadTraffic: any input either fails or yields requests that
// re-encode to JSON the strict decoder accepts again, at most one per line.
func FuzzReadTraffic(f *testing.F) {
	f.Add([]byte(`{"method":"GET","path":"/","headers":{"X-A":"b"},"source_ip":"192.0.2.1"}` + "\n\n" + `{"time":"2025-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"attributes":{"a":[1,{"b":null}]}}` + "\r\n"))
	f.Add([]byte("{}\n{"))
	f.Add([]byte(`{"query":{"q":"\u00e9"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := bytes.Count(data, []byte("\n")) + 1
		n := 0
		preview.ReadTraffic(bytes.NewReader(data), func(line int, req *engine.Request) error {
			n++
			if line < n || line > lines {
				t.Fatalf("line %d for request %d of %d lines", line, n, lines)
			}
			b, err := json.Marshal(req)
			if err != nil {
				t.Fatalf("re-encoding %+v: %v", req, err)
			}
			if _, err := engine.DecodeRequest(b); err != nil {
				t.Fatalf("re-decoding %s: %v", b, err)
			}
			return nil
		})
	})
}
