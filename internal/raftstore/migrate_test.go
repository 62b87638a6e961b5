package raftstore

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// The tests below read testdata/v1-datadir, written by the build before
// the typed tables (testdata_gen_test.go says how).

// copyV1DataDir returns a writable copy of the committed data directory.
func copyV1DataDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	if b, err := exec.Command("cp", "-r", filepath.Join("testdata", "v1-datadir"), dir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, b)
	}
	return dir
}

// checkV1PhaseA checks a state holding exactly phase A of the generator.
func checkV1PhaseA(t *testing.T, s *State) {
	t.Helper()
	if _, ok := s.Experiments["policies/http/experiments/pr-7"]; !ok || len(s.Experiments) != 1 {
		t.Errorf("experiments: %v", keysOf(s.Experiments))
	}
	if s.Sources[SourceGit].Reason != "network" || len(s.Sources) != 1 {
		t.Errorf("sources: %+v", s.Sources)
	}
	if b := s.Branches["feature"]; b.HeadCommit != "2222222222222222222222222222222222222222" ||
		!b.Validation.Valid || len(s.Branches) != 1 {
		t.Errorf("branches: %+v", s.Branches)
	}
	if p := s.Pulls[7]; p.Author != "alice" || p.Etags["http"] != "5eb7f0e53a65e8ccbbba84d6f6747af3" || len(s.Pulls) != 1 {
		t.Errorf("pulls: %+v", s.Pulls)
	}
	if c := s.Claims[1002]; c.Verb != "preview stop" || len(s.Claims) != 1 {
		t.Errorf("claims: %+v", s.Claims)
	}
	if len(s.Operations) != 1 || len(s.Nodes) != 2 || s.Active != 1 || s.Staged != 3 ||
		s.Generations[2].State != GenerationInvalid {
		t.Errorf("operations %d, nodes %d, active %d, staged %d", len(s.Operations), len(s.Nodes), s.Active, s.Staged)
	}
}

// checkV1End checks a state holding phases A and B.
func checkV1End(t *testing.T, s *State) {
	t.Helper()
	if _, ok := s.Experiments["policies/http/experiments/branch-feature"]; !ok || len(s.Experiments) != 1 {
		t.Errorf("experiments: %v", keysOf(s.Experiments))
	}
	if s.Sources[SourceGit].Reason != "auth" {
		t.Errorf("sources: %+v", s.Sources)
	}
	if _, ok := s.Branches["feature"]; !ok || s.Branches["broken"].Validation.Valid || len(s.Branches) != 2 {
		t.Errorf("branches: %+v", s.Branches)
	}
	if s.Pulls[8].Preview != "SUSPENDED" || len(s.Pulls) != 1 {
		t.Errorf("pulls: %+v", s.Pulls)
	}
	if s.Claims[1003].User != "bob" || len(s.Claims) != 1 {
		t.Errorf("claims: %+v", s.Claims)
	}
	if len(s.Operations) != 0 || len(s.Nodes) != 1 || s.Active != 3 || s.Previous != 1 {
		t.Errorf("operations %d, nodes %d, active %d, previous %d", len(s.Operations), len(s.Nodes), s.Active, s.Previous)
	}
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestRestoreV1Snapshot: a format-1 snapshot is migrated on restore.
func TestRestoreV1Snapshot(t *testing.T) {
	snaps, err := raft.NewFileSnapshotStore(copyV1DataDir(t), 1, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	list, err := snaps.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("snapshots %v, %v", list, err)
	}
	_, rc, err := snaps.Open(list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	fsm := NewFSM(FSMConfig{Logger: testLogger(t, "fsm")})
	if err := fsm.Restore(rc); err != nil {
		t.Fatal(err)
	}
	checkV1PhaseA(t, fsm.State())
	// The migrated state is written as the whole-value encoder did.
	sameSnapshotBytes(t, "migrated v1 state", fsm.State())
}

// TestReplayV1Log: every entry of the old log, replayed from index 1 on
// an empty state, lands in the typed tables; no entry is rejected.
func TestReplayV1Log(t *testing.T) {
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(copyV1DataDir(t), "raft.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	first, last, err := logBounds(bolt)
	if err != nil || first != 1 {
		t.Fatalf("log [%d, %d]: %v", first, last, err)
	}
	fsm := NewFSM(FSMConfig{Logger: testLogger(t, "fsm")})
	commands := 0
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := bolt.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if res := fsm.Apply(&l); res != nil {
			t.Errorf("entry %d rejected: %v", i, res)
		}
		if l.Type == raft.LogCommand {
			commands++
		}
	}
	if want := len(v1PhaseA()) + len(v1PhaseB()); commands != want {
		t.Fatalf("%d commands in the log, the generator wrote %d", commands, want)
	}
	checkV1End(t, fsm.State())
}

// TestOpenV1DataDir: a node upgraded in place restores the old snapshot
// and replays the old tail after it, and keeps going with new commands.
func TestOpenV1DataDir(t *testing.T) {
	dir := copyV1DataDir(t)
	st := restoredAlone(t, dir)
	checkV1End(t, st)
	s := openTCP(t, "node-1", "127.0.0.1:0", dir, false)
	checkV1End(t, s.State())
	if s.State().LastIndex != st.LastIndex {
		t.Fatalf("opened at %d, restored alone at %d", s.State().LastIndex, st.LastIndex)
	}
	// The old configuration has this node as its only voter: it leads
	// again, and new commands apply on top of the migrated tables.
	if _, _, err := s.WaitForLeader(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	propose(t, s, &DeletePull{Number: 8})
	propose(t, s, &PutClaim{Claim: CommandClaim{CommentID: 1004, PR: 8, User: "bob", Verb: "status", Time: at(1)}})
	if st := s.State(); len(st.Pulls) != 0 || len(st.Claims) != 2 || len(st.Branches) != 2 || len(st.Experiments) != 1 {
		t.Fatalf("after new commands: %s", jsonOf(t, st))
	}
}

// TestSnapshotV2RoundTripsTables: the new format keeps every table.
func TestSnapshotV2RoundTripsTables(t *testing.T) {
	h := newHarness(t, false)
	h.mustApply(expPut("policies/http/experiments/pr-1"))
	h.mustApply(&PutSourceStatus{Source: SourceGit, Status: SourceStatus{Error: "down", Since: at(1)}})
	h.mustApply(&PutBranch{Record: branchRec("feature", 1)})
	h.mustApply(&PutPull{Record: pullRec(7)})
	h.mustApply(&PutClaim{Claim: CommandClaim{CommentID: 4, PR: 7, User: "u", Verb: "status", Time: at(2)}})
	buf := new(bytes.Buffer)
	if err := WriteSnapshot(buf, h.fsm.State()); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSnapshot(buf)
	if err != nil {
		t.Fatal(err)
	}
	if !sameExceptIndex(got, h.fsm.State()) {
		t.Fatalf("round trip:\n got %s\nwant %s", jsonOf(t, got), jsonOf(t, h.fsm.State()))
	}
}

// TestMigrateStateDropsWhatNoTableTakes: documents the old readers skipped
// (undecodable, of no known prefix, a record under another record's name)
// do not survive the migration, and do not stop it.
func TestMigrateStateDropsWhatNoTableTakes(t *testing.T) {
	s := NewState()
	for name, doc := range map[string]string{
		"policies/http/experiments/pr-1": `{"name":"policies/http/experiments/pr-1"}`,
		"policies/http/experiments/BAD":  `{}`,
		"pulls/x":                        `{}`,
		"pulls/2":                        `{"number":3,"headCommit":"` + shaA + `"}`,
		"somewhere/else":                 `{}`,
		"branches/b":                     `not json`,
		"commands/5":                     `{"commentId":5,"pr":1,"user":"u","verb":"help","time":"2026-01-01T00:00:00Z"}`,
	} {
		s.Experiments[name] = Experiment{Name: name, Data: []byte(doc)}
	}
	dropped := migrateState(s)
	want := []string{"branches/b", "policies/http/experiments/BAD", "pulls/2", "pulls/x", "somewhere/else"}
	if !slices.Equal(dropped, want) {
		t.Errorf("dropped %v, want %v", dropped, want)
	}
	if len(s.Experiments) != 1 || len(s.Claims) != 1 || len(s.Pulls)+len(s.Branches) != 0 {
		t.Errorf("migrated: %s", jsonOf(t, s))
	}
}
