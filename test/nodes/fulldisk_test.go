//go:build linux

package nodes_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// fullDiskSize is the tmpfs under n3's data directory: room for the
// node's start, then filled to the last page.
const fullDiskSize = "size=64m"

// mountSmallDisk mounts a tmpfs of fullDiskSize on dir, unmounted at the
// end of the test after stop (which must end the process using it).
// Mounting needs root (CI runs as root): without it the test fails, it is
// not skipped.
func mountSmallDisk(t *testing.T, dir string, stop func()) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fullDiskSize); err != nil {
		t.Fatalf("mount a %s tmpfs on %s to give n3 a disk that fills up: %v (this test needs root, as CI runs it)",
			fullDiskSize, dir, err)
	}
	t.Cleanup(func() {
		stop()
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

// fillDisk writes dir's file system full and returns the filler's path
// and size.
func fillDisk(t *testing.T, dir string) (string, int64) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var size int64
	for {
		n, err := f.Write(buf)
		size += int64(n)
		if errors.Is(err, syscall.ENOSPC) {
			return path, size
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// pushUntilActivated pushes a new embargo list every two seconds, as a
// busy repository does, until n1 and n2 answer from a generation after
// before; it fails the test after limit.
func (e *env) pushUntilActivated(before uint64, limit time.Duration) uint64 {
	e.t.Helper()
	n1, n2 := e.node("n1"), e.node("n2")
	deadline := time.Now().Add(limit)
	for k := 0; time.Now().Before(deadline); k++ {
		changed := strings.Replace(e.files["edge-firewall/policy.toml"], embargo, fmt.Sprintf("['CU', 'IR', 'KP', 'SY', 'X%d']", k), 1)
		e.git.Commit(e.clone, map[string]string{"edge-firewall/policy.toml": changed}, fmt.Sprintf("embargo X%d", k))
		e.git.Push(e.clone, "main")
		e.post(n1, "/v1/cluster:reconcile", "{}", nil)
		next := time.Now().Add(2 * time.Second)
		for time.Now().Before(next) {
			_, d1 := e.evaluate(n1, denied)
			_, d2 := e.evaluate(n2, denied)
			if d1.Generation > before && d1.Generation == d2.Generation {
				return d1.Generation
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	e.t.Fatalf("no generation after %d activated on n1 and n2 in %s while n3's disk is full", before, limit)
	return 0
}

// TestNodeWithFullDiskIsLeftBehind is issue 22's finding 12 with real
// processes: n3's data directory is a small tmpfs, filled to the last
// page. n3 still heartbeats, but raft cannot store an entry there, and a
// commit arrives every two seconds, each superseding the last long before
// the staging timeout (60 s). The others promote once n3 has not followed
// the log for follow_timeout; n3 shows why (GET /v1/nodes/n3, /readyz),
// keeps answering from its generation, and once the disk is freed it
// catches up and rejoins rotation with the active generation.
func TestNodeWithFullDiskIsLeftBehind(t *testing.T) {
	e := newEnv(t, func(c *harness.Config) { c.NodeExtra = "follow_timeout = \"2s\"\n" })
	n1, n3 := e.node("n1"), e.node("n3")
	mountSmallDisk(t, n3.DataDir, n3.Kill)
	e.c.StartAll()
	_, before := e.evaluate(n1, denied)

	filler, size := fillDisk(t, n3.DataDir)
	fullAt := time.Now()
	t.Logf("n3's disk is full (%d MiB of filler)", size>>20)
	after := e.pushUntilActivated(before.Generation, 30*time.Second)
	t.Logf("generation %d active on n1 and n2 %s after n3's disk filled (follow_timeout 2s, commits every 2s)",
		after, time.Since(fullAt).Round(time.Millisecond))

	if code, d := e.evaluate(n3, denied); code != 200 || d.Generation != before.Generation {
		t.Errorf("n3 answers %d from generation %d, want its generation %d", code, d.Generation, before.Generation)
	}
	e.eventually("n3's reason in GET /v1/nodes/n3", func() error {
		var n struct {
			NotFollowing string `json:"notFollowing"`
		}
		err := client.GetJSON(n1.Base()+"/v1/nodes/n3", &n)
		if err == nil && !strings.Contains(n.NotFollowing, "not following the raft log since") {
			err = fmt.Errorf("notFollowing %q", n.NotFollowing)
		}
		if err == nil {
			t.Logf("n3: %s", n.NotFollowing)
		}
		return err
	})
	e.eventually("n3 out of rotation, saying why", func() error {
		code, body, err := client.Get(n3.Base() + "/readyz")
		if err == nil && (code != 503 || !strings.Contains(string(body), "not following the raft log")) {
			err = fmt.Errorf("readyz %d %s", code, body)
		}
		return err
	})
	e.eventually("the leader logs n3 as not following the log", func() error {
		var logged []string
		for _, n := range e.c.Nodes {
			logged = append(logged, n.LogLines("node does not follow the raft log")...)
		}
		if len(logged) == 0 || !strings.Contains(logged[0], `"n3"`) {
			return fmt.Errorf("logged %q", logged)
		}
		return nil
	})

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freedAt := time.Now()
	e.eventually("n3 serves the active generation", func() error {
		_, d1 := e.evaluate(n1, denied)
		code, d3 := e.evaluate(n3, denied)
		if code != 200 || d3.Generation <= before.Generation || d3.Generation != d1.Generation {
			return fmt.Errorf("n3 answers %d from generation %d, n1 from %d", code, d3.Generation, d1.Generation)
		}
		return nil
	})
	t.Logf("n3 serves the active generation %s after its disk was freed", time.Since(freedAt).Round(time.Millisecond))
	e.eventually("n3 back in rotation", func() error {
		if code := e.readyz(n3); code != 200 {
			return fmt.Errorf("readyz %d", code)
		}
		return nil
	})
}
