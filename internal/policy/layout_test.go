package policy

import (
	"reflect"
	"testing"
)

func TestScanLayout(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		rules []int // line of each element
		keys  map[string]int
	}{
		{"headers", "a = 1\n[[rules]]\nname = \"x\"\n\n[[rules]]\nname = \"y\"\n", []int{2, 5}, nil},
		{"spaces and quotes", "[[ rules ]]\nx=1\n[[\"rules\"]]\n[ [ 'x' ] ]\n", []int{1, 3}, nil},
		{"header in multi-line string", "[[rules]]\nmatch = \"\"\"\n[[rules]]\n\"\"\"\n[[rules]]\n", []int{1, 5}, nil},
		{"header in literal string", "[[rules]]\nmatch = '''\n[[rules]]\n'''\nname='a'\n", []int{1}, map[string]int{"match": 2, "name": 5}},
		{"header in comment", "# [[rules]]\n[[rules]] # [[rules]]\n", []int{2}, nil},
		{"escaped quote", "[[rules]]\nmatch = \"a\\\"\n[[rules]]\"\nname = 1\n", []int{1}, map[string]int{"match": 2, "name": 4}},
		{"inline array", "rules = [\n  { name = \"a\" },\n  {\n name = \"b\", x.y = 1 },\n]\n", []int{2, 3}, nil},
		{"sub-table", "[[rules]]\nname = 'a'\n[rules.extra]\nk = 1\n", []int{1}, map[string]int{"name": 2, "extra": 3}},
		{"dotted key", "[[rules]]\nfoo.bar = 1\n", []int{1}, map[string]int{"foo": 2}},
		{"datetime with space", "[[rules]]\nwhen = 1979-05-27 07:32:00Z\nname = 'a'\n", []int{1}, map[string]int{"when": 2, "name": 3}},
		{"crlf", "[[rules]]\r\nname = 'a'\r\n[[rules]]\r\n", []int{1, 3}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lay := scanLayout([]byte(tt.src))
			var lines []int
			for _, e := range lay.elems["rules"] {
				lines = append(lines, e.line)
			}
			if !reflect.DeepEqual(lines, tt.rules) {
				t.Errorf("rule lines = %v, want %v", lines, tt.rules)
			}
			for k, want := range tt.keys {
				if got := lay.element("rules", 0).keyLine(k); got != want {
					t.Errorf("key %s at line %d, want %d", k, got, want)
				}
			}
		})
	}
}

func TestScanLayoutTopKeys(t *testing.T) {
	lay := scanLayout([]byte("# c\ndefault_action = 'deny'\n\"odd key\" = 1\n[tbl]\nx = 1\ninclude = []\n"))
	want := map[string]int{"default_action": 2, "odd key": 3, "tbl": 4}
	if !reflect.DeepEqual(lay.top, want) {
		t.Errorf("top = %v, want %v", lay.top, want)
	}
	if lay.element("rules", 3).line != 0 {
		t.Error("a missing element must have line 0")
	}
}

func TestScanLayoutBOMAndBadElements(t *testing.T) {
	lay := scanLayout([]byte("\uFEFFdefault_action = 'deny'\n\nrules = [1, 2]\n"))
	if lay.top["default_action"] != 1 {
		t.Errorf("BOM hides the first key: %v", lay.top)
	}
	if got := lay.element("rules", 1).line; got != 3 {
		t.Errorf("element without a table at line %d, want the array's line 3", got)
	}
}
