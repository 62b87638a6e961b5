package raftstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"
)

func openTCP(t *testing.T, id, addr, dir string, bootstrap bool) *Store {
	t.Helper()
	s, err := Open(Config{NodeID: id, RaftAddr: addr, DataDir: dir, Bootstrap: bootstrap,
		Timeouts: testTimeouts, Logger: testLogger(t, id)})
	if err != nil {
		t.Fatalf("open %s: %v", id, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// tcpCluster is three Stores on loopback with bolt on disk.
type tcpCluster struct {
	ids, dirs, addrs []string
	stores           []*Store
}

func (c *tcpCluster) leader(t *testing.T) func() *Store {
	return func() *Store { return waitLeader(t, c.stores) }
}

// startTCPCluster bootstraps n0 and joins n1 and n2 with AddVoter.
func startTCPCluster(t *testing.T) *tcpCluster {
	c := &tcpCluster{ids: []string{"n0", "n1", "n2"}, dirs: []string{t.TempDir(), t.TempDir(), t.TempDir()},
		addrs: make([]string, 3), stores: make([]*Store, 3)}
	c.stores[0] = openTCP(t, c.ids[0], "127.0.0.1:0", c.dirs[0], true)
	for i := range c.stores {
		if i > 0 {
			c.stores[i] = openTCP(t, c.ids[i], "127.0.0.1:0", c.dirs[i], false)
			if err := c.leader(t)().AddVoter(c.ids[i], c.stores[i].Addr()); err != nil {
				t.Fatal(err)
			}
		}
		c.addrs[i] = c.stores[i].Addr()
	}
	return c
}

func (c *tcpCluster) closeAll(t *testing.T) {
	for i, s := range c.stores {
		if err := s.Close(); err != nil {
			t.Fatalf("close %s: %v", c.ids[i], err)
		}
	}
}

// TestTCPClusterRestart: a real cluster promotes generations, stops, and
// comes back with its state, first one node alone (no leader possible) and
// then all of them.
func TestTCPClusterRestart(t *testing.T) {
	c := startTCPCluster(t)
	leader := c.leader(t)
	for _, id := range c.ids {
		proposeVia(t, leader, &UpsertNode{ID: id, Voter: true})
	}
	res := promote(t, leader, 1, c.ids...)
	applied(t, res.Index, c.stores[1])
	if err := c.stores[1].Snapshot(); err != nil { // n1 restarts from snapshot + log tail
		t.Fatal(err)
	}
	promote(t, leader, 2, c.ids...)
	res = proposeVia(t, leader, stage(3, 3))
	applied(t, res.Index, c.stores...)
	want := jsonOf(t, c.stores[0].State())
	c.closeAll(t)

	// Alone, without any peer: the state must be there when Open returns.
	for _, i := range []int{1, 2} {
		s := openTCP(t, c.ids[i], c.addrs[i], c.dirs[i], false)
		if got := jsonOf(t, s.State()); got != want {
			t.Fatalf("%s restarted alone:\n got %s\nwant %s", c.ids[i], got, want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range c.stores {
		c.stores[i] = openTCP(t, c.ids[i], c.addrs[i], c.dirs[i], i == 0) // bootstrap again: harmless
		if got := jsonOf(t, c.stores[i].State()); got != want {
			t.Fatalf("%s restarted: state differs", c.ids[i])
		}
	}
	res = proposeVia(t, leader, &ActivateGeneration{Generation: 3})
	applied(t, res.Index, c.stores...)
	// Raft re-delivers the replayed entries once a leader commits them;
	// the FSM must skip them, so every node still holds the same state.
	want = jsonOf(t, c.stores[0].State())
	for i, s := range c.stores {
		if got := jsonOf(t, s.State()); got != want || s.State().Active != 3 {
			t.Fatalf("%s after restart and activation:\n got %s\nwant %s", c.ids[i], got, want)
		}
	}
}

func waitLeader(t *testing.T, stores []*Store) *Store {
	t.Helper()
	var leader *Store
	eventually(t, 10*time.Second, "a leader", func() bool {
		for _, s := range stores {
			if s != nil && s.IsLeader() {
				leader = s
				return true
			}
		}
		return false
	})
	return leader
}

// singleNodeDir leaves a stopped single-node store in a fresh directory,
// with a snapshot and a log tail after it.
func singleNodeDir(t *testing.T) string {
	dir := t.TempDir()
	s := openTCP(t, "solo", "127.0.0.1:0", dir, true)
	if _, _, err := s.WaitForLeader(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for gen := uint64(1); gen <= 3; gen++ {
		st := stage(gen, int(gen))
		st.Files["big.bin"] = make([]byte, 256<<10) // spread the file over many pages
		propose(t, s, st)
		propose(t, s, &ActivateGeneration{Generation: gen})
		if gen == 2 {
			if err := s.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// damages are ways raft data gets broken on disk.
var damages = map[string]func(t *testing.T, dir string){
	"truncated to half": func(t *testing.T, dir string) {
		truncate(t, filepath.Join(dir, boltFile), func(size int64) int64 { return size / 2 })
	},
	"truncated mid-page": func(t *testing.T, dir string) {
		truncate(t, filepath.Join(dir, boltFile), func(int64) int64 { return 3*4096 + 100 })
	},
	"truncated to one page": func(t *testing.T, dir string) {
		truncate(t, filepath.Join(dir, boltFile), func(int64) int64 { return 4096 })
	},
	"log tree root overwritten": func(t *testing.T, dir string) {
		path := filepath.Join(dir, boltFile)
		overwrite(t, path, int64(logsRootPage(t, path))*4096, 4096)
	},
	"meta pages overwritten": func(t *testing.T, dir string) {
		overwrite(t, filepath.Join(dir, boltFile), 0, 2*4096)
	},
	"raft.db deleted": func(t *testing.T, dir string) {
		if err := os.Remove(filepath.Join(dir, boltFile)); err != nil {
			t.Fatal(err)
		}
	},
	"snapshot damaged": func(t *testing.T, dir string) {
		files, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "state.bin"))
		if len(files) == 0 {
			t.Fatal("no snapshot to damage")
		}
		overwrite(t, files[0], 10, 20)
	},
}

func TestOpenRefusesCorruptData(t *testing.T) {
	base := singleNodeDir(t)
	for name, fn := range damages {
		t.Run(name, func(t *testing.T) {
			dir := copyDir(t, base)
			fn(t, dir)
			_, err := Open(Config{NodeID: "solo", RaftAddr: "127.0.0.1:0", DataDir: dir,
				Timeouts: testTimeouts, Logger: testLogger(t, "solo")})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "move the directory aside") ||
				!strings.Contains(err.Error(), dir) {
				t.Fatalf("Open on damaged data: %v", err)
			}
			t.Log(err)
		})
	}
	// The undamaged copy opens and serves generation 3 without a leader.
	dir := copyDir(t, base)
	s := openTCP(t, "solo", "127.0.0.1:0", dir, false)
	if s.State().Active != 3 || s.State().Previous != 2 {
		t.Fatalf("undamaged copy: active=%d previous=%d", s.State().Active, s.State().Previous)
	}
	// A second process on the same directory is refused, not blocked.
	_, err := Open(Config{NodeID: "solo", RaftAddr: "127.0.0.1:0", DataDir: dir, Logger: testLogger(t, "twin")})
	if !errors.Is(err, ErrDataDirLocked) {
		t.Fatalf("second Open on a live directory: %v", err)
	}
}

// logsRootPage finds the root page of bolt's "logs" bucket.
func logsRootPage(t *testing.T, path string) uint64 {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var root uint64
	_ = db.View(func(tx *bbolt.Tx) error {
		root = uint64(tx.Bucket([]byte("logs")).Root())
		return nil
	})
	if root == 0 {
		t.Fatal("logs bucket is inline")
	}
	return root
}

func truncate(t *testing.T, path string, size func(int64) int64) {
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size(info.Size())); err != nil {
		t.Fatal(err)
	}
}

func overwrite(t *testing.T, path string, off, n int64) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	junk := []byte(strings.Repeat("\xa5", int(n)))
	if _, err := f.WriteAt(junk, off); err != nil {
		t.Fatal(err)
	}
}

func copyDir(t *testing.T, src string) string {
	dst := t.TempDir()
	err := filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}
