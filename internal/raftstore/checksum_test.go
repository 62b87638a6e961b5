package raftstore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// replaceInFile rewrites every occurrence of old with new (same length) in
// path and fails the test when there is none: the bytes a disk or a
// careless hand changes inside a stored entry's payload, leaving the
// file's structure whole.
func replaceInFile(t *testing.T, path string, old, new []byte) {
	t.Helper()
	if len(old) != len(new) {
		t.Fatal("replacement must keep the length")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, old) {
		t.Fatalf("%q not found in %s", old, path)
	}
	if err := os.WriteFile(path, bytes.ReplaceAll(data, old, new), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestOpenRefusesCorruptEntryPayload: bytes changed inside a log entry's
// payload (the commit of generation 3, in the log tail after the snapshot)
// leave raft.db structurally valid. Without checksums the node restarted
// with a generation 3 whose commit no other node has: diverged state,
// silently. Open must refuse it and say which entry of which file.
func TestOpenRefusesCorruptEntryPayload(t *testing.T) {
	dir := copyDir(t, singleNodeDir(t))
	replaceInFile(t, filepath.Join(dir, boltFile), []byte(`"c0ffeed"`), []byte(`"c0ffeee"`))
	s, err := Open(Config{NodeID: "solo", RaftAddr: "127.0.0.1:0", DataDir: dir,
		Timeouts: testTimeouts, Logger: testLogger(t, "solo")})
	if err == nil {
		g := s.State().Generations[3]
		_ = s.Close()
		t.Fatalf("Open accepted a corrupt entry: generation 3 has commit %q (written as c0ffeed)", g.Commit)
	}
	for _, want := range []string{"checksum", filepath.Join(dir, boltFile), "move the directory aside"} {
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Open: %v; want ErrCorrupt mentioning %q", err, want)
		}
	}
	t.Log(err)
}
