package backup

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// openStore starts a one-node cluster on disk and waits until it leads.
func openStore(t *testing.T, dir, id string, bootstrap bool) *raftstore.Store {
	t.Helper()
	s, err := raftstore.Open(raftstore.Config{NodeID: id, RaftAddr: "127.0.0.1:0", DataDir: dir, Bootstrap: bootstrap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, _, err := s.WaitForLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func propose(t *testing.T, s *raftstore.Store, payloads ...raftstore.Payload) {
	t.Helper()
	for _, p := range payloads {
		if _, err := s.Propose(context.Background(), p); err != nil {
			t.Fatalf("%T: %v", p, err)
		}
	}
}

// savedFile saves a snapshot of a node holding an active generation, an
// experiment and a node record, and returns the file's bytes.
func savedFile(t *testing.T) ([]byte, *raftstore.State) {
	t.Helper()
	s := openStore(t, filepath.Join(t.TempDir(), "raft"), "a", true)
	files := map[string][]byte{"web/policy.toml": bytes.Repeat([]byte("# padding\n"), 5000)}
	propose(t, s,
		&raftstore.UpsertNode{ID: "a", RaftAddr: s.Addr(), HTTPAddr: "127.0.0.1:1", Voter: true},
		&raftstore.StageGeneration{Generation: 1, Commit: "c0ffee", Files: files, Etags: map[string]string{"web": "e1"}},
		&raftstore.ReportReady{Generation: 1, NodeID: "a"},
		&raftstore.ActivateGeneration{Generation: 1},
		&raftstore.PutExperiment{Name: "policies/web/experiments/x", Data: []byte(`{"etag":"e2"}`)},
	)
	var buf bytes.Buffer
	h, err := Save(&buf, s, "a", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if h.ActiveGeneration != 1 || h.Commit != "c0ffee" || h.Experiments != 1 || len(h.Servers) != 1 {
		t.Fatalf("header %+v", h)
	}
	return buf.Bytes(), s.State()
}

func TestSaveInspectRestoreRoundTrip(t *testing.T) {
	t.Parallel()
	data, want := savedFile(t)
	h, st, err := Inspect(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if st.Active != 1 || st.Generations[1].Commit != "c0ffee" || len(st.Experiments) != 1 || h.Index < want.LastIndex {
		t.Fatalf("inspect: header %+v, state active %d", h, st.Active)
	}

	path := filepath.Join(t.TempDir(), "snap")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	raftDir := filepath.Join(t.TempDir(), "raft")
	// Restored as "b" on another address: a new one-node cluster.
	servers := []raft.Server{{ID: "b", Address: "127.0.0.1:0", Suffrage: raft.Voter}}
	if _, err := Restore(path, RestoreOptions{RaftDir: raftDir, Servers: servers}); err != nil {
		t.Fatal(err)
	}
	s, err := raftstore.Open(raftstore.Config{NodeID: "b", RaftAddr: "127.0.0.1:0", DataDir: raftDir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := s.State() // served from the restored snapshot before any leader
	if got.Active != 1 || string(got.Generations[1].Files["web/policy.toml"]) != string(want.Generations[1].Files["web/policy.toml"]) ||
		got.Experiments["policies/web/experiments/x"].Name != want.Experiments["policies/web/experiments/x"].Name {
		t.Fatalf("restored state: active %d, %d experiments", got.Active, len(got.Experiments))
	}
}

// TestDamagedFilesAreRefused: a file cut anywhere, or with any byte
// changed, is refused by inspect and by restore, which writes nothing.
func TestDamagedFilesAreRefused(t *testing.T) {
	t.Parallel()
	data, _ := savedFile(t)
	cases := map[string][]byte{
		"empty":           nil,
		"cut in header":   data[:30],
		"cut in body":     data[:len(data)/2],
		"no checksum":     data[:len(data)-72],
		"cut in checksum": data[:len(data)-10],
		"body byte":       flip(data, len(data)/2),
		"header byte":     flip(data, 40),
		"checksum byte":   flip(data, len(data)-5),
		"checksum case":   []byte(string(data[:len(data)-65]) + strings.ToUpper(string(data[len(data)-65:]))),
		"appended":        append(bytes.Clone(data), 'x'),
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			if _, _, err := Inspect(bytes.NewReader(bad)); !errors.Is(err, ErrInvalid) {
				t.Fatalf("inspect: %v, want ErrInvalid", err)
			}
			path := filepath.Join(t.TempDir(), "snap")
			if err := os.WriteFile(path, bad, 0o600); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			raftDir := filepath.Join(dir, "raft")
			servers := []raft.Server{{ID: "b", Address: "127.0.0.1:1", Suffrage: raft.Voter}}
			if _, err := Restore(path, RestoreOptions{RaftDir: raftDir, Servers: servers}); !errors.Is(err, ErrInvalid) {
				t.Fatalf("restore: %v, want ErrInvalid", err)
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Fatalf("restore of a bad file left %v", left)
			}
		})
	}
}

func flip(data []byte, i int) []byte {
	c := bytes.Clone(data)
	c[i] ^= 0x20
	return c
}

// FuzzInspect: whatever the file, inspect returns an error or a state
// whose header it checked; it never panics.
func FuzzInspect(f *testing.F) {
	state := raftstore.NewState()
	var body bytes.Buffer
	_ = raftstore.WriteSnapshot(&body, state)
	var file bytes.Buffer
	_ = Write(&file, Header{Size: int64(body.Len()), NodeID: "a"}, bytes.NewReader(body.Bytes()))
	f.Add(file.Bytes())
	f.Add([]byte("reconciler-snapshot 1\n{\"format\":1,\"size\":9223372036854775807}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, st, err := Inspect(bytes.NewReader(data))
		if err == nil && (st == nil || h.Format != FileFormat) {
			t.Fatalf("accepted without a state or header: %+v", h)
		}
	})
}

// TestSaveOfflineFromAStoppedNode: with no leader to ask (lost quorum),
// the state a stopped node holds is saved from its raft directory; a
// running node's directory is refused (its lock is held).
func TestSaveOfflineFromAStoppedNode(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "raft")
	s := openStore(t, dir, "a", true)
	propose(t, s,
		&raftstore.StageGeneration{Generation: 1, Commit: "c0ffee", Files: map[string][]byte{"web/policy.toml": []byte("x")}},
		&raftstore.ReportReady{Generation: 1, NodeID: "a"},
		&raftstore.ActivateGeneration{Generation: 1},
	)
	if _, err := SaveOffline(io.Discard, dir, "a", time.Now()); !errors.Is(err, raftstore.ErrDataDirLocked) {
		t.Fatalf("offline save of a running node's directory: %v, want ErrDataDirLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	h, err := SaveOffline(&buf, dir, "a", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, st, err := Inspect(&buf)
	if err != nil || st.Active != 1 || h.Commit != "c0ffee" || h.Term == 0 || h.Index != st.LastIndex {
		t.Fatalf("offline save: %v, header %+v", err, h)
	}
}

// TestSaveOfflineHoldsNoCopyOfTheSnapshot: an offline save costs reading
// the state and little more; the snapshot is not encoded into memory
// first. Not parallel: it reads the process's allocation counter.
func TestSaveOfflineHoldsNoCopyOfTheSnapshot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "raft")
	s := openStore(t, dir, "a", true)
	files := map[string][]byte{"web/policy.toml": bytes.Repeat([]byte("# padding 0123456789\n"), 200_000)}
	propose(t, s,
		&raftstore.StageGeneration{Generation: 1, Commit: "c0ffee", Files: files},
		&raftstore.ReportReady{Generation: 1, NodeID: "a"},
		&raftstore.ActivateGeneration{Generation: 1},
	)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	read := allocated(t, func() error { _, err := raftstore.ReadOffline(dir); return err })
	var file countWriter
	saved := allocated(t, func() error { _, err := SaveOffline(&file, dir, "a", time.Now()); return err })
	t.Logf("file of %d bytes: reading the state allocated %d bytes, saving it %d", file, read, saved)
	if saved > read+uint64(file)/4 {
		t.Fatalf("saving a %d byte file allocated %d bytes, reading its state %d", file, saved, read)
	}
}

// allocated returns the bytes the process allocated while f ran.
func allocated(t *testing.T, f func() error) uint64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := f(); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

type countWriter int

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }
