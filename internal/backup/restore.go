package backup

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/hashicorp/raft"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Inspect reads a whole snapshot file: its header, the state it holds
// (decoded, as a node would restore it) and its checksum. The decoded
// state must agree with the header's counts.
func Inspect(r io.Reader) (Header, *raftstore.State, error) {
	fr, err := NewReader(r)
	if err != nil {
		return Header{}, nil, err
	}
	h := fr.Header
	st, err := raftstore.ReadSnapshot(fr)
	if err != nil {
		// A damaged file fails to decode before its end: say so when
		// the checksum says so too, rather than blame the decoder.
		if verr := fr.Verify(); verr != nil {
			return h, nil, verr
		}
		return h, nil, fmt.Errorf("%w: the state does not decode: %v", ErrInvalid, err)
	}
	if err := fr.Verify(); err != nil {
		return h, nil, err
	}
	if err := agrees(h, st); err != nil {
		return h, nil, err
	}
	return h, st, nil
}

func agrees(h Header, st *raftstore.State) error {
	got := raftstore.Summarize(st)
	if got.Active != h.ActiveGeneration || got.Commit != h.Commit || got.Generations != h.Generations ||
		got.Experiments != h.Experiments || got.Nodes != h.Nodes {
		return fmt.Errorf("%w: the header says generation %d (%s), %d generations, %d experiments, %d nodes; "+
			"the state holds generation %d (%s), %d, %d, %d", ErrInvalid,
			h.ActiveGeneration, h.Commit, h.Generations, h.Experiments, h.Nodes,
			got.Active, got.Commit, got.Generations, got.Experiments, got.Nodes)
	}
	return nil
}

// RestoreOptions say where and as what a snapshot file is restored.
type RestoreOptions struct {
	// RaftDir is the node's raft directory ({node.data_dir}/raft); it
	// must not exist.
	RaftDir string
	// Servers is the raft configuration of the new cluster; it must
	// hold the node being restored as a voter.
	Servers []raft.Server
	// Prepare, when set, runs once the file is known good and before
	// anything is written (the CLI moves an old raft directory aside).
	Prepare func() error
}

// Restore checks the whole file at path (Inspect), then writes a raft
// directory that starts from its state with o.Servers as the cluster.
// The file is read twice, and the second read is checked again while it
// is written: a file changed in between leaves nothing behind.
func Restore(path string, o RestoreOptions) (Header, error) {
	h, err := inspectFile(path)
	if err != nil {
		return h, err
	}
	if o.Prepare != nil {
		if err := o.Prepare(); err != nil {
			return h, err
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return h, err
	}
	defer f.Close()
	fr, err := NewReader(f)
	if err != nil {
		return h, err
	}
	if fr.Header.Index != h.Index || fr.Header.Size != h.Size {
		return h, errors.New("the file changed while it was being restored")
	}
	if err := raftstore.SeedDataDir(o.RaftDir, h.Index, h.Term, o.Servers, fr); err != nil {
		return h, err
	}
	return h, nil
}

func inspectFile(path string) (Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return Header{}, err
	}
	defer f.Close()
	h, _, err := Inspect(f)
	return h, err
}
