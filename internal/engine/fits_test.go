package engine

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestFitsEstimateDecodedAgrees checks the shortcut EvaluateDecoded takes
// against the full check: for every request decoded from a body, counting
// entries says what measuring every string says. The edge bodies sit at
// the shortcut's bound with the strings that grow most when decoded.
func TestFitsEstimateDecodedAgrees(t *testing.T) {
	t.Parallel()
	samples, err := os.ReadFile("../../policies.example/_traffic/sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	bodies := bytes.Split(bytes.TrimSpace(samples), []byte("\n"))
	bound := EstimatedMaxStringBytes / maxDecodedGrowth
	// padded is a body of exactly n bytes whose header value is filled
	// with unit, a JSON fragment that decodes to one rune.
	padded := func(n int, name, unit string) []byte {
		head := `{"headers":{"` + name + `":"`
		tail := `"}}`
		fill := n - len(head) - len(tail)
		return []byte(head + strings.Repeat(unit, fill/len(unit)) + strings.Repeat("a", fill%len(unit)) + tail)
	}
	many := func(field string, n int) []byte {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			if field == "groups" {
				fmt.Fprintf(&b, `"g%d"`, i)
			} else {
				fmt.Fprintf(&b, `"k%d":"v"`, i)
			}
		}
		if field == "groups" {
			return []byte(`{"groups":[` + b.String() + `]}`)
		}
		return []byte(`{"` + field + `":{` + b.String() + `}}`)
	}
	bodies = append(bodies,
		padded(bound, "x", "\xff"),   // each invalid byte decodes to U+FFFD, 3 bytes
		padded(bound+1, "x", "\xff"), // past the bound: measured
		padded(bound*2, "x", "\xff"), // decodes past the estimate
		padded(bound, "x", `\u0800`), // an escape decodes shorter
		padded(bound, "x", "\u0800"), // a 3-byte rune as is
		padded(bound, "\u023a", "a"), // a name that grows when lower-cased
		padded(bound, "x"+strings.Repeat("\u023a", 1300), "a"),
		many("headers", EstimatedMaxEntries), many("headers", EstimatedMaxEntries+1),
		many("query", EstimatedMaxEntries+1), many("groups", EstimatedMaxEntries+1),
		[]byte(`{"attributes":{"s":"`+strings.Repeat("\xff", 2000)+`"}}`),
		[]byte(`{"attributes":{"l":[`+strings.Repeat("1,", EstimatedMaxEntries)+`1]}}`),
	)
	fits, not := 0, 0
	for i, body := range bodies {
		req, err := DecodeRequestWithin(body, Limits{MaxHeaders: 1000})
		if err != nil {
			t.Fatalf("body %d: %v", i, err)
		}
		want := fitsEstimate(req)
		if got := fitsEstimateDecoded(req, len(body)); got != want {
			t.Errorf("body %d (%d bytes): fitsEstimateDecoded %v, fitsEstimate %v", i, len(body), got, want)
		}
		if want {
			fits++
		} else {
			not++
		}
	}
	if fits == 0 || not < 6 {
		t.Errorf("the bodies exercise too little: %d fit, %d do not", fits, not)
	}
}
