package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/backup"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// writeSnapshotFile writes a valid snapshot file of a state with one
// active generation.
func writeSnapshotFile(t *testing.T) string {
	t.Helper()
	st := raftstore.NewState()
	st.Generations[1] = raftstore.Generation{Number: 1, State: raftstore.GenerationActive, Commit: "c1",
		Files: map[string][]byte{"web/policy.toml": []byte("x")}}
	st.Active, st.Highest, st.LastIndex = 1, 1, 9
	var body bytes.Buffer
	if err := raftstore.WriteSnapshot(&body, st); err != nil {
		t.Fatal(err)
	}
	sum := raftstore.Summarize(st)
	h := backup.Header{Index: 9, Term: 2, ActiveGeneration: 1, Commit: "c1", Generations: sum.Generations,
		Size: int64(body.Len())}
	path := filepath.Join(t.TempDir(), "snap")
	var file bytes.Buffer
	if err := backup.Write(&file, h, &body); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, file.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSnapshotRestoreFlags(t *testing.T) {
	file := writeSnapshotFile(t)
	dir := filepath.Join(t.TempDir(), "data")
	for _, args := range [][]string{
		{"snapshot"},
		{"snapshot", "restore", file, "--data-dir", dir},
		{"snapshot", "restore", file, "--data-dir", dir, "--node-id", "a", "--raft-addr", "0.0.0.0:8300"},
		{"snapshot", "restore", file, "--data-dir", dir, "--node-id", "a", "--raft-addr", "h:1", "--peers", "b=h:2"},
		{"snapshot", "restore", file, "--data-dir", dir, "--node-id", "a", "--peers", "a=h:1,b=h:1"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != exitUsage {
			t.Errorf("%v: exit %d, want %d: %s", args, code, exitUsage, errb.String())
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a refused restore created %s", dir)
	}

	restore := []string{"snapshot", "restore", file, "--data-dir", dir, "--node-id", "a", "--raft-addr", "127.0.0.1:8300"}
	var out, errb bytes.Buffer
	if code := run(restore, &out, &errb); code != exitOK {
		t.Fatalf("restore: exit %d: %s", code, errb.String())
	}
	errb.Reset()
	if code := run(restore, &out, &errb); code != exitCheck || !strings.Contains(errb.String(), "not empty") {
		t.Fatalf("second restore without --force: exit %d: %s", code, errb.String())
	}
	out.Reset()
	if code := run(append(restore, "--force"), &out, &errb); code != exitOK || !strings.Contains(out.String(), "moved the old raft directory aside") {
		t.Fatalf("restore --force: exit %d: %s %s", code, out.String(), errb.String())
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "raft.replaced-*")); len(m) != 1 {
		t.Fatalf("the old raft directory was not kept aside: %v", m)
	}
}

// TestSnapshotSaveClientFlags: bad connection flags are a usage error (2)
// as for every other remote command, not a failed save (1), and nothing
// is written.
func TestSnapshotSaveClientFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "snap")
	for _, args := range [][]string{
		{"snapshot", "save", file, "--server", "http://127.0.0.1:1", "--timeout", "2h"},
		{"snapshot", "save", file, "--server", "http://127.0.0.1:1", "--token-file", filepath.Join(dir, "missing")},
		{"snapshot", "save", file, "--server", "http://127.0.0.1:1", "--ca-file", filepath.Join(dir, "missing")},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != exitUsage {
			t.Errorf("%v: exit %d, want %d: %s", args, code, exitUsage, errb.String())
		}
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("a refused save wrote %s", file)
	}
}
