package engine

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// TestPairsLookup compares Get, Len and All with a map's, on lists
// scanned and on lists searched (past scanPairs).
func TestPairsLookup(t *testing.T) {
	for _, n := range []int{0, 1, 2, scanPairs, scanPairs + 1, 40} {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("k%02d", 2*i+1)] = fmt.Sprint(i) // odd names: the even ones fall between
		}
		p := PairsOf(m)
		if p.Len() != len(m) || !p.Present() || p.IsZero() != (n == 0) {
			t.Fatalf("n=%d: Len %d, Present %v, IsZero %v", n, p.Len(), p.Present(), p.IsZero())
		}
		for i := range 2*n + 2 {
			name := fmt.Sprintf("k%02d", i)
			v, ok := p.Get(name)
			if want, wantOK := m[name]; v != want || ok != wantOK {
				t.Errorf("n=%d: Get(%q) = %q, %v; the map has %q, %v", n, name, v, ok, want, wantOK)
			}
		}
		prev, seen := "", 0
		for k, v := range p.All() {
			if seen > 0 && k <= prev || m[k] != v {
				t.Fatalf("n=%d: All yields %q=%q after %q", n, k, v, prev)
			}
			prev, seen = k, seen+1
		}
		if seen != n || !reflect.DeepEqual(p.Map(), m) {
			t.Fatalf("n=%d: All yields %d entries, Map %v", n, seen, p.Map())
		}
	}
}

// TestPairsAbsentOrEmpty: absent and empty are told apart, as a nil map
// and an empty one were (has(request.headers)), and both leave JSON out.
func TestPairsAbsentOrEmpty(t *testing.T) {
	absent, empty := PairsOf(nil), PairsOf(map[string]string{})
	if absent.Present() || !empty.Present() || !absent.IsZero() || !empty.IsZero() {
		t.Fatalf("absent: present %v; empty: present %v", absent.Present(), empty.Present())
	}
	if absent.Map() != nil || empty.Map() == nil || NewPairs(nil).Present() || !NewPairs([]Pair{}).Present() {
		t.Fatal("Map and NewPairs lose absent or empty")
	}
	for _, p := range []Pairs{absent, empty} {
		if b, _ := json.Marshal(&Request{Headers: p, Query: p}); string(b) != `{}` {
			t.Errorf("present %v: %s", p.Present(), b)
		}
	}
	for _, body := range []string{`{"headers":null}`, `{}`} {
		var r Request
		if err := json.Unmarshal([]byte(body), &r); err != nil || r.Headers.Present() {
			t.Errorf("%s: %v, headers present %v", body, err, r.Headers.Present())
		}
	}
}

// TestNewPairsLastWins: of repeated names the last stays, as in a map
// filled in the same order, whatever the list's order was.
func TestNewPairsLastWins(t *testing.T) {
	p := NewPairs([]Pair{{"b", "1"}, {"a", "x"}, {"b", "2"}, {"c", "y"}, {"b", "3"}, {"a", "z"}})
	if want := map[string]string{"a": "z", "b": "3", "c": "y"}; !reflect.DeepEqual(p.Map(), want) || p.Len() != 3 {
		t.Fatalf("NewPairs = %v, want %v", p.Map(), want)
	}
}

// TestPairsJSONAsMap: the JSON of Pairs is json.Marshal's of the map,
// escapes and invalid UTF-8 included, and reads back as the same entries.
func TestPairsJSONAsMap(t *testing.T) {
	m := map[string]string{"<b>": "a&b", "\u2028": "\xff", "z": "\"q\"", "A": "\x01", "é": ""}
	got, err := json.Marshal(PairsOf(m))
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := json.Marshal(m); string(got) != string(want) {
		t.Fatalf("JSON\n%s\nwant\n%s", got, want)
	}
	var back Pairs
	if err := json.Unmarshal([]byte(`{"b":"1","a":"2","b":"3"}`), &back); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"a": "2", "b": "3"}; !reflect.DeepEqual(back.Map(), want) {
		t.Fatalf("read back %v, want %v", back.Map(), want)
	}
}
