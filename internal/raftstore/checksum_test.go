package raftstore

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
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

// raftStableKeys are hashicorp/raft's own records in the stable store.
var raftStableKeys = []string{"CurrentTerm", "LastVoteTerm", "LastVoteCand"}

// rawBolt opens raft.db without checksum handling, to see what is stored.
func rawBolt(t *testing.T, dir string, readOnly bool) *raftboltdb.BoltStore {
	t.Helper()
	b, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, boltFile),
		BoltOptions: &bbolt.Options{ReadOnly: readOnly}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stableRecords reads raft's term and vote records.
func stableRecords(t *testing.T, st raft.StableStore) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range raftStableKeys {
		v, err := st.Get([]byte(k))
		if err != nil {
			t.Fatalf("stable key %s: %v", k, err)
		}
		out[k] = string(v)
	}
	return out
}

// TestOpenV1DataDirAddsChecksums: a data directory of an earlier build
// (no checksums) opens, keeps raft's term and vote and every entry's
// index, term, type and data, leaves the original file as a backup, and
// after that every stored entry carries a checksum that catches a change.
func TestOpenV1DataDirAddsChecksums(t *testing.T) {
	dir := copyV1DataDir(t)
	orig, err := os.ReadFile(filepath.Join(dir, boltFile))
	if err != nil {
		t.Fatal(err)
	}
	old := rawBolt(t, dir, true)
	wantStable := stableRecords(t, old)
	first, last, _ := logBounds(old)
	wantLogs := make([]raft.Log, 0, last)
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := old.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if hasChecksum(&l) {
			t.Fatalf("v1 entry %d already has a checksum", i)
		}
		wantLogs = append(wantLogs, l)
	}
	_ = old.Close()

	checkV1End(t, restoredAlone(t, dir)) // migrates

	backup, err := os.ReadFile(filepath.Join(dir, boltFile+backupSuffix))
	if err != nil || !bytes.Equal(backup, orig) {
		t.Fatalf("backup differs from the original raft.db (%v)", err)
	}
	now := rawBolt(t, dir, true)
	if got := stableRecords(t, now); !reflect.DeepEqual(got, wantStable) {
		t.Errorf("term and vote after migration %v, before %v", got, wantStable)
	}
	checked := &checkedStore{inner: now, path: "raft.db", mon: &writeMonitor{logger: hclog.NewNullLogger()}}
	for _, want := range wantLogs {
		var got raft.Log
		if err := checked.GetLog(want.Index, &got); err != nil {
			t.Fatalf("migrated entry: %v", err)
		}
		if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type ||
			!bytes.Equal(got.Data, want.Data) || len(got.Extensions) != 0 {
			t.Fatalf("entry %d changed by the migration", want.Index)
		}
	}
	_ = now.Close()

	// Migrated once: a later start neither copies nor rewrites again.
	if err := os.Remove(filepath.Join(dir, boltFile+backupSuffix)); err != nil {
		t.Fatal(err)
	}
	s := openTCP(t, "node-1", "127.0.0.1:0", dir, false)
	checkV1End(t, s.State())
	if _, err := os.Stat(filepath.Join(dir, boltFile+backupSuffix)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("second start made a backup again: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	replaceInFile(t, filepath.Join(dir, boltFile), []byte("authentication required"), []byte("authentication REQUIRED"))
	if _, err := Open(Config{NodeID: "node-1", RaftAddr: "127.0.0.1:0", DataDir: dir,
		Logger: testLogger(t, "node-1")}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("Open of a changed migrated entry: %v", err)
	}
}

// TestMigrationResumesAfterCrash: a migration interrupted after sealing
// part of the log (no completion record yet) finishes on the next start
// without sealing an entry twice, and keeps the first backup.
func TestMigrationResumesAfterCrash(t *testing.T) {
	dir := copyV1DataDir(t)
	orig, _ := os.ReadFile(filepath.Join(dir, boltFile))
	if err := os.WriteFile(filepath.Join(dir, boltFile+backupSuffix), orig, 0o600); err != nil {
		t.Fatal(err)
	}
	b := rawBolt(t, dir, false)
	for i := uint64(1); i <= 5; i++ {
		var l raft.Log
		if err := b.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if err := b.StoreLog(seal(&l)); err != nil {
			t.Fatal(err)
		}
	}
	_ = b.Close()
	checkV1End(t, restoredAlone(t, dir))
	b = rawBolt(t, dir, true)
	defer b.Close()
	for i := uint64(1); i <= 5; i++ {
		var l raft.Log
		if err := b.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if err := unseal(&l); err != nil || len(l.Extensions) != 0 {
			t.Fatalf("entry %d sealed twice or broken: %v, extensions %x", i, err, l.Extensions)
		}
	}
	if backup, _ := os.ReadFile(filepath.Join(dir, boltFile+backupSuffix)); !bytes.Equal(backup, orig) {
		t.Fatal("the first backup was replaced")
	}
}

// TestOpenRefusesEntryWithoutChecksum: once a log is checksummed, an
// entry without one (written by something else, or its prefix damaged)
// is refused, not taken for an entry of an earlier build.
func TestOpenRefusesEntryWithoutChecksum(t *testing.T) {
	dir := copyDir(t, singleNodeDir(t))
	b := rawBolt(t, dir, false)
	_, last, _ := logBounds(b)
	var l raft.Log
	if err := b.GetLog(last, &l); err != nil {
		t.Fatal(err)
	}
	l.Extensions = nil
	if err := b.StoreLog(&l); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	_, err := Open(Config{NodeID: "solo", RaftAddr: "127.0.0.1:0", DataDir: dir, Logger: testLogger(t, "solo")})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "has no checksum") {
		t.Fatalf("Open: %v", err)
	}
}

// FuzzUnseal: whatever a damaged file hands back, verifying an entry never
// panics, and a sealed entry always verifies to exactly what was stored.
func FuzzUnseal(f *testing.F) {
	f.Add(uint64(7), uint64(2), uint8(raft.LogCommand), []byte(`{"type":1}`), []byte(nil))
	f.Add(uint64(1), uint64(1), uint8(raft.LogConfiguration), []byte{0x81}, []byte("rcs1\x00\x00\x00\x00x"))
	f.Fuzz(func(t *testing.T, index, term uint64, typ uint8, data, ext []byte) {
		l := raft.Log{Index: index, Term: term, Type: raft.LogType(typ), Data: data, Extensions: ext}
		stored := l
		_ = unseal(&stored) // arbitrary bytes: an error or a value, never a panic
		sealed := seal(&l)
		if err := unseal(sealed); err != nil {
			t.Fatalf("a sealed entry does not verify: %v", err)
		}
		if !bytes.Equal(sealed.Data, l.Data) || !bytes.Equal(sealed.Extensions, l.Extensions) ||
			sealed.Index != l.Index || sealed.Term != l.Term || sealed.Type != l.Type {
			t.Fatal("seal then unseal changed the entry")
		}
		if len(data) > 0 {
			sealed = seal(&l)
			sealed.Data = append([]byte{}, data...)
			sealed.Data[0] ^= 1
			if err := unseal(sealed); !errors.Is(err, errChecksum) {
				t.Fatalf("a changed byte passed: %v", err)
			}
		}
	})
}

// TestCorruptNodeRejoinsEmpty: a follower of a real cluster whose log
// entry was changed on disk refuses to start; following the error's
// remedy (directory aside, start empty under the same id and address)
// it gets the cluster's state back from the leader, the generation the
// corruption had changed included.
func TestCorruptNodeRejoinsEmpty(t *testing.T) {
	c := startTCPCluster(t)
	leader := c.leader(t)
	for gen := uint64(1); gen <= 3; gen++ {
		promote(t, leader, gen, c.ids...)
	}
	res := proposeVia(t, leader, &UpsertNode{ID: "n1", Voter: true})
	applied(t, res.Index, c.stores...)
	want := jsonOf(t, c.stores[1].State())
	if err := c.stores[1].Close(); err != nil {
		t.Fatal(err)
	}
	replaceInFile(t, filepath.Join(c.dirs[1], boltFile), []byte(`"c0ffeec"`), []byte(`"c0ffeeX"`))
	_, err := Open(Config{NodeID: "n1", RaftAddr: c.addrs[1], DataDir: c.dirs[1], Timeouts: testTimeouts,
		Logger: testLogger(t, "n1")})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "move the directory aside") {
		t.Fatalf("Open of the corrupt follower: %v", err)
	}
	if err := os.Rename(c.dirs[1], c.dirs[1]+".corrupt"); err != nil {
		t.Fatal(err)
	}
	c.stores[1] = openTCP(t, "n1", c.addrs[1], c.dirs[1], false)
	applied(t, res.Index, c.stores[1])
	if got := jsonOf(t, c.stores[1].State()); got != want {
		t.Fatalf("rejoined empty:\n got %s\nwant %s", got, want)
	}
}
