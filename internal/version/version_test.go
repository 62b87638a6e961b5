package version

import "testing"

func TestParse(t *testing.T) {
	for in, want := range map[string]V{"1.0.0": {1, 0, 0}, "v1.10.2": {1, 10, 2}, "2.0.1-rc.1": {2, 0, 1}, "1.1.0+abc": {1, 1, 0}} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "dev", "fca736b", "1.0", "1.0.0.0", "1.x.0", "01.0.0", "-1.0.0"} {
		if v, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", in, v)
		}
	}
}

// A node of v1.0.0 reports "dev" or a commit: it counts as the oldest
// release, so the cluster version never claims a feature it lacks.
func TestLowestCountsUnversionedAsOldest(t *testing.T) {
	if got := Lowest([]string{Current, "dev"}); got != Must(Oldest) {
		t.Fatalf("Lowest = %v, want %s", got, Oldest)
	}
	if got := Lowest([]string{Current, "fca736b-dirty", "1.1.0"}); got != Must(Oldest) {
		t.Fatalf("Lowest = %v, want %s", got, Oldest)
	}
	if got := Lowest([]string{"1.1.0", "1.2.0"}); got != Must("1.1.0") {
		t.Fatalf("Lowest = %v, want 1.1.0", got)
	}
	if got := Lowest(nil); got != This() {
		t.Fatalf("Lowest(nil) = %v, want %s", got, Current)
	}
}

func TestSkew(t *testing.T) {
	cases := []struct {
		v, cluster string
		ok         bool
	}{
		{"1.1.0", "1.0.0", true}, {"1.0.0", "1.0.0", true}, {"1.1.5", "1.1.0", true},
		{"1.0.0", "1.1.0", true}, // the last node of a rolling upgrade
		{"1.2.0", "1.0.0", false}, {"2.0.0", "1.9.0", false}, {"0.9.0", "1.0.0", false},
	}
	for _, c := range cases {
		if got := Skew(Must(c.v), Must(c.cluster)); (got == "") != c.ok {
			t.Errorf("Skew(%s, %s) = %q, want ok=%v", c.v, c.cluster, got, c.ok)
		}
	}
}
