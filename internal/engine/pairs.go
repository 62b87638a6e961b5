package engine

import (
	"encoding/json"
	"iter"
	"slices"
	"strings"

	"github.com/policyrollout/reconciler/internal/jsonenc"
)

// Headers and query as a short list rather than a map.
//
// A decision request carries a handful of headers and query parameters,
// and a decision reads a few of them by name. A Go map per request cost
// the decoder a table allocation and a hashed insert per entry, and its
// readers a hashed lookup or a randomised iteration (issue 26: about 1 µs
// and 400 bytes of a 16 µs decision over HTTP). Pairs is the entries in
// one slice, sorted by name, looked up by a scan that stops at the first
// larger name (a binary search past scanPairs). CEL still sees a
// map(string, string): the environment declares the fields so (memo.go)
// and programs read them through a pairsMap (pairsmap.go).

// Pair is one entry of Pairs.
type Pair struct {
	Name, Value string
}

// Pairs is the headers or the query of a Request: names distinct and in
// ascending byte order (as encoding/json orders a map's keys), header
// names lower-cased by the decoders. Its JSON is an object of strings, as
// a map[string]string's. The zero value is absent, as a nil map; present
// but empty ({} in JSON) is distinct from it, as has() in CEL tells them
// apart. A Pairs is never modified once built, so copies share it.
type Pairs struct {
	list []Pair
}

// scanPairs is the most entries Get looks through one by one.
const scanPairs = 8

// PairsOf returns the entries of m; a nil m is absent.
func PairsOf(m map[string]string) Pairs {
	if m == nil {
		return Pairs{}
	}
	list := make([]Pair, 0, len(m))
	for k, v := range m {
		list = append(list, Pair{k, v})
	}
	slices.SortFunc(list, comparePairs)
	return Pairs{list: list}
}

// NewPairs returns list as a Pairs, sorting it in place: of equal names,
// the one last in list stays, as assigning them to a map in order would
// keep it. A nil list is absent. The Pairs owns list afterwards.
func NewPairs(list []Pair) Pairs {
	if list == nil {
		return Pairs{}
	}
	sortPairs(list)
	return Pairs{list: dropShadowed(list)}
}

func comparePairs(a, b Pair) int { return strings.Compare(a.Name, b.Name) }

// dropShadowed removes from a sorted list every entry followed by one of
// the same name, keeping the last of each name.
func dropShadowed(list []Pair) []Pair {
	out := list[:0]
	for i, p := range list {
		if i+1 < len(list) && list[i+1].Name == p.Name {
			continue
		}
		out = append(out, p)
	}
	return out
}

// Get returns the value of name, and whether there is one.
func (p Pairs) Get(name string) (string, bool) {
	l := p.list
	if len(l) > scanPairs {
		i, found := slices.BinarySearchFunc(l, name, func(e Pair, n string) int { return strings.Compare(e.Name, n) })
		if found {
			return l[i].Value, true
		}
		return "", false
	}
	for i := range l {
		switch c := strings.Compare(l[i].Name, name); {
		case c == 0:
			return l[i].Value, true
		case c > 0:
			return "", false
		}
	}
	return "", false
}

// Len is the number of entries.
func (p Pairs) Len() int { return len(p.list) }

// Present reports whether the request has the field at all, even with no
// entry (has(request.headers) in CEL).
func (p Pairs) Present() bool { return p.list != nil }

// IsZero reports whether p has no entry, so that the field's omitzero
// leaves it out of JSON as omitempty left out an empty map.
func (p Pairs) IsZero() bool { return len(p.list) == 0 }

// All yields the entries in ascending order of names.
func (p Pairs) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, e := range p.list {
			if !yield(e.Name, e.Value) {
				return
			}
		}
	}
}

// names returns the names in ascending order, in a new slice.
func (p Pairs) names() []string {
	out := make([]string, len(p.list))
	for i, e := range p.list {
		out[i] = e.Name
	}
	return out
}

// Map returns the entries as a new map; nil when p is absent.
func (p Pairs) Map() map[string]string {
	if p.list == nil {
		return nil
	}
	m := make(map[string]string, len(p.list))
	for _, e := range p.list {
		m[e.Name] = e.Value
	}
	return m
}

// MarshalJSON writes what json.Marshal writes for p.Map().
func (p Pairs) MarshalJSON() ([]byte, error) {
	if p.list == nil {
		return []byte("null"), nil
	}
	return p.AppendJSON(nil), nil
}

// AppendJSON appends p as a JSON object, names in ascending order, each
// string as json.Marshal writes it.
func (p Pairs) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	for i, e := range p.list {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(b, e.Name)
		b = append(b, ':')
		b = jsonenc.AppendString(b, e.Value)
	}
	return append(b, '}')
}

// UnmarshalJSON reads what json.Unmarshal reads into a map[string]string
// (of repeated names the last wins); null leaves p as it is.
func (p *Pairs) UnmarshalJSON(data []byte) error {
	var m map[string]string
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	if m != nil {
		*p = PairsOf(m)
	}
	return nil
}
