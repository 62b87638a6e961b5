package system

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/test/harness"
)

// TestRestartRefusesCorruptLog: one byte of a follower's raft.db changed
// inside a stored entry (the commit of the active generation) while it
// was stopped. The build before checksums restarted on a generation with
// a commit no other node had; now the process exits with the file, the
// entry and the remedy in its log. Following the remedy (raft directory
// aside, same command line) the node gets the cluster's state back.
func TestRestartRefusesCorruptLog(t *testing.T) {
	c := startSystem(t, 3)
	c.Promote(1)
	gen := c.WaitServing(1, c.Nodes, harness.PromoteTimeout)
	c.WaitConverged(c.Nodes, gen, harness.PromoteTimeout)
	g, err := c.Client.Generation(c.Nodes[0], gen)
	if err != nil {
		t.Fatal(err)
	}
	victim := c.Nodes[1] // joined: restarted empty it joins again, it never bootstraps
	if err := victim.Terminate(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	raftDir := filepath.Join(victim.DataDir, "raft")
	db := filepath.Join(raftDir, "raft.db")
	data, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	commit := []byte(g.Commit)
	if len(commit) != 40 || !bytes.Contains(data, commit) {
		t.Fatalf("commit %q not in %s", g.Commit, db)
	}
	changed := append([]byte{}, commit...)
	changed[39] ^= 1 // another hex digit: the entry still decodes
	if err := os.WriteFile(db, bytes.ReplaceAll(data, commit, changed), 0o600); err != nil {
		t.Fatal(err)
	}

	if err := victim.StartRefused(c.Bin); err != nil {
		t.Fatal(err)
	}
	if err := harness.Eventually(harness.ReadyTimeout, func() error {
		if victim.Running() {
			return errors.New("still running")
		}
		return nil
	}); err != nil {
		t.Fatalf("%s started on a corrupt log: %v", victim.ID, err)
	}
	lines := victim.LogLines("fails its checksum")
	if victim.ExitErr() == nil || len(lines) == 0 || !strings.Contains(lines[0], db) ||
		!strings.Contains(lines[0], "move the directory aside") {
		t.Fatalf("exit %v, log %q", victim.ExitErr(), lines)
	}
	t.Logf("refused: %s", lines[0])

	if err := os.Rename(raftDir, raftDir+".corrupt"); err != nil {
		t.Fatal(err)
	}
	c.Restart(victim)
	c.WaitServing(1, []*harness.Node{victim}, harness.PromoteTimeout)
	c.Promote(2)
	gen = c.WaitServing(2, c.Nodes, harness.PromoteTimeout)
	c.WaitConverged(c.Nodes, gen, harness.PromoteTimeout)
}
