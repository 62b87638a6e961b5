package policy

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// Canonical returns the canonical form of a merged policy: JSON with rules
// in (priority, name) order, tests by name and map keys sorted, so the same
// content gives the same bytes whatever the file layout or TOML formatting.
// Sources and positions are left out because they describe the layout, not
// the content.
func (p *Policy) Canonical() []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// CEL is full of && and <; escaping them as \u0026 would make the
	// canonical form (and anything shown from it) harder to read.
	enc.SetEscapeHTML(false)
	var v any = p.canonicalCopy()
	if h := p.listHashes(); h != nil {
		// Only a policy that uses lists has the key, so every other
		// policy keeps the etag it had before lists existed.
		v = struct {
			*Policy
			Lists map[string]string `json:"lists"`
		}{v.(*Policy), h}
	}
	if err := enc.Encode(v); err != nil {
		// canonicalCopy leaves only JSON-representable values.
		panic("policy: canonical form: " + err.Error())
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// Etag is the opaque version of a policy's content (AIP-154 style): the
// first 128 bits of the SHA-256 of its canonical form, in hex.
func (p *Policy) Etag() string {
	sum := sha256.Sum256(p.Canonical())
	return hex.EncodeToString(sum[:16])
}

// canonicalCopy returns p sorted and normalised, leaving p untouched, so
// that a Policy built by hand gets the same etag as one from Load.
func (p *Policy) canonicalCopy() *Policy {
	c := *p
	c.Lists = nil // Canonical records their hashes only
	c.Rules = slices.Clone(p.Rules)
	if c.Rules == nil {
		c.Rules = []Rule{} // "rules": [] whether or not any were listed
	}
	sortRules(c.Rules)
	c.Tests = slices.Clone(p.Tests)
	for i := range c.Tests {
		c.Tests[i].Request = normalizeMap(c.Tests[i].Request)
	}
	sortTests(c.Tests)
	return &c
}

// sortRules orders rules as they are evaluated: by priority, ties by name.
func sortRules(rules []Rule) {
	slices.SortStableFunc(rules, func(a, b Rule) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Name, b.Name))
	})
}

func sortTests(tests []Test) {
	slices.SortStableFunc(tests, func(a, b Test) int { return cmp.Compare(a.Name, b.Name) })
}

// normalizeMap returns a copy of a request table holding only JSON values:
// nil becomes an empty table, so that `request = {}` and a missing table
// marshal alike.
func normalizeMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = normalizeValue(v)
	}
	return out
}

// normalizeValue maps a TOML-decoded value to one whose JSON is stable.
// Datetimes become RFC 3339 strings (offset datetimes in UTC, so the same
// instant written with two offsets is the same content); TOML's local
// date/time kinds keep their own forms, which carry no offset. Test requests
// are JSON everywhere else, so this is what the engine sees too.
func normalizeValue(v any) any {
	switch x := v.(type) {
	case nil, string, bool, int64:
		return x
	case int:
		return int64(x)
	case float64:
		return normalizeFloat(x)
	case time.Time:
		return formatTime(x)
	case map[string]any:
		return normalizeMap(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeValue(e)
		}
		return out
	case []map[string]any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeMap(e)
		}
		return out
	}
	// Only hand-built policies get here; JSON still has to be stable.
	return fmt.Sprint(v)
}

// normalizeFloat keeps finite floats; Load rejects nan and inf in requests,
// and a hand-built policy still must not break the canonical form.
func normalizeFloat(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Sprint(f)
	}
	if f == 0 {
		return 0.0 // -0.0 and 0.0 are the same number to a request
	}
	return f
}

// formatTime renders a TOML datetime by its kind, which toml v1.6 encodes in
// the time's location name.
func formatTime(t time.Time) string {
	switch t.Location().String() {
	case "datetime-local":
		return t.Format("2006-01-02T15:04:05.999999999")
	case "date-local":
		return t.Format("2006-01-02")
	case "time-local":
		return t.Format("15:04:05.999999999")
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// nonFinite finds a nan or inf float inside a request value, for the error.
func nonFinite(v any, where string) (string, bool) {
	switch x := v.(type) {
	case float64:
		return where, math.IsNaN(x) || math.IsInf(x, 0)
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if w, bad := nonFinite(x[k], where+"."+k); bad {
				return w, true
			}
		}
	case []any:
		for i, e := range x {
			if w, bad := nonFinite(e, fmt.Sprintf("%s[%d]", where, i)); bad {
				return w, true
			}
		}
	case []map[string]any:
		for i, e := range x {
			if w, bad := nonFinite(e, fmt.Sprintf("%s[%d]", where, i)); bad {
				return w, true
			}
		}
	}
	return "", false
}
