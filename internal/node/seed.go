package node

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// git.init_from seeds only a brand-new node: one that has never held any
// replicated state. A node restarting with raft data is part of a cluster
// that may already serve generations of the real repository; re-creating
// a missing repository from the seed there would offer every node the
// seed policies as a new history (issue 14). Such a node leaves git.url
// missing: the leader's fetch fails (PullError in the status) and the
// active generation keeps serving until the repository is back. A brand-
// new node joining an existing cluster may still seed its own path, but
// that history does not descend from the active commit, so the leader
// never promotes it without an operator (reconcile, diverged.go).

// hasRaftState reports whether the node's raft directory holds a log or
// snapshots from an earlier run.
func hasRaftState(dataDir string) bool {
	dir := filepath.Join(dataDir, raftDir)
	for _, name := range []string{"raft.db", "snapshots"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil || !errors.Is(err, fs.ErrNotExist) {
			return true
		}
	}
	return false
}
