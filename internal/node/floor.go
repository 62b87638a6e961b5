package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// floorFile is the name, inside node.data_dir, of the record of the
// generation this node served last.
const floorFile = "served-generation"

// floor durably records the generation this node served last (number and
// commit). It bridges a window of raftstore: the store persists the FSM's
// applied index asynchronously, after the state is published, so a node
// killed right after it swapped to a new generation can restart with a
// restored state one activation behind, and would serve the older
// generation again. The loader writes the floor before every swap; at
// startup, when the restored state lags behind it and still holds that
// generation STAGED with its files (its Stage entry is older and was
// persisted), the node serves it again until raft catches up. The
// generation was active cluster-wide: a node applies only committed
// entries. So a node's served generation never goes down, across crashes
// too.
type floor struct {
	path string
}

// served is what a floor records.
type served struct {
	Generation uint64
	Commit     string
}

// load returns the record, zero when there is none.
func (f floor) load() (served, error) {
	data, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return served{}, nil
	}
	if err != nil {
		return served{}, err
	}
	num, commit, _ := strings.Cut(strings.TrimSpace(string(data)), " ")
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return served{}, fmt.Errorf("%s: %q is not a generation number", f.path, num)
	}
	return served{Generation: n, Commit: commit}, nil
}

// store replaces the record atomically and durably: a temporary file,
// fsync, rename, fsync of the directory.
func (f floor) store(s served) error {
	tmp := f.path + ".tmp"
	file, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(file, "%d %s\n", s.Generation, s.Commit)
	if err == nil {
		err = file.Sync()
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, f.path)
	}
	if err != nil {
		return err
	}
	dir, err := os.Open(filepath.Dir(f.path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}
