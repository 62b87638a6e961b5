package preview_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/preview"
)

func TestLogSamplesUnchangedOneInN(t *testing.T) {
	h := newHarness(t, preview.Config{UnchangedEvery: 10}, webPolicy())
	e := start(t, create(t, nil, "x", tightWeb()), t0)
	h.set(e)
	var reqs = craftedTraffic(1000)
	h.offer("web", reqs...)
	st := h.stats(e)
	changed, unchanged := 0, 0
	for _, l := range h.log.lines(t) {
		if l["changed"] == true {
			changed++
		} else {
			unchanged++
		}
		if l["experiment_etag"] != e.Etag || l["live_etag"] != webPolicy().Etag() ||
			!strings.HasPrefix(l["msg"].(string), preview.LogPrefix) {
			t.Fatalf("bad line %v", l)
		}
	}
	if uint64(changed) != st.Changed() {
		t.Errorf("%d changed lines, want one per change (%d)", changed, st.Changed())
	}
	if want := (st.Unchanged + 9) / 10; uint64(unchanged) != want {
		t.Errorf("%d unchanged lines, want 1 in 10 of %d = %d", unchanged, st.Unchanged, want)
	}
}

func TestLogNoUnchangedWhenNegative(t *testing.T) {
	h := newHarness(t, preview.Config{UnchangedEvery: -1}, webPolicy())
	h.set(start(t, create(t, nil, "x", webPolicy()), t0))
	h.offer("web", craftedTraffic(300)...)
	if s := h.log.String(); s != "" {
		t.Fatalf("unchanged decisions logged: %q", s)
	}
}

func TestRotatingFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, preview.LogFileName)
	f, err := preview.OpenRotating(path, 200, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := fmt.Fprintf(f, "line %02d %s\n", i, strings.Repeat("x", 50)); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	for _, name := range []string{path, path + ".1", path + ".2"} {
		st, err := os.Stat(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if st.Size() > 200 || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %d bytes, mode %v", name, st.Size(), st.Mode().Perm())
		}
	}
	if _, err := os.Stat(path + ".3"); !os.IsNotExist(err) {
		t.Errorf("kept more than 2 old files: %v", err)
	}
	cur, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(cur), "line 19 "+strings.Repeat("x", 50)+"\n") {
		t.Errorf("newest file ends with %q", cur)
	}
	// Reopening appends, and the size counts what is there.
	f, _ = preview.OpenRotating(path, 200, 2)
	fmt.Fprintf(f, "%s\n", strings.Repeat("y", 150))
	f.Close()
	if cur, _ := os.ReadFile(path); !strings.HasPrefix(string(cur), "yyy") {
		t.Errorf("a write that does not fit should start a new file: %q", cur)
	}
}

func TestRotatingFileKeepZeroAndOpenLog(t *testing.T) {
	dir := t.TempDir()
	f, err := preview.OpenLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := os.Stat(filepath.Join(dir, "preview.log")); err != nil {
		t.Fatal(err)
	}
	g, _ := preview.OpenRotating(filepath.Join(dir, "x.log"), 10, 0)
	g.Write([]byte("0123456789"))
	g.Write([]byte("abc"))
	g.Close()
	if b, _ := os.ReadFile(filepath.Join(dir, "x.log")); string(b) != "abc" {
		t.Fatalf("keep 0: %q", b)
	}
	if _, err := g.Write([]byte("late")); err == nil {
		t.Fatal("write after Close succeeded")
	}
}
