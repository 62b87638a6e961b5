package node

import (
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// stateReader is what storeLists needs of the store.
type stateReader interface {
	State() *raftstore.State
}

// storeLists finds the data of an experiment's list in the replicated
// state (engine.Options.FindList): the chunks an experiment that changes
// the list carries, or the file of a kept generation. The engine checks
// the content against the list's hash, so a candidate of another content
// (the same file in another generation) is only a wasted look.
func storeLists(store stateReader) func(*policy.List) []byte {
	return func(l *policy.List) []byte {
		st := store.State()
		for _, e := range st.Experiments {
			if refs, ok := e.Lists[l.Hash]; ok {
				if data, ok := st.ListData(refs); ok {
					return data
				}
			}
		}
		for _, n := range []uint64{st.Staged, st.Active, st.Previous} {
			if g, ok := st.Generations[n]; ok && g.Files != nil {
				if data, ok := g.Files[l.File]; ok && len(data) > 0 && policy.ContentHash(data) == l.Hash {
					return data
				}
			}
		}
		return nil
	}
}
