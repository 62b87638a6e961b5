package node

import (
	"sync"
	"sync/atomic"

	"github.com/policyrollout/reconciler/internal/api"
)

// generations holds the active generation and the one before it, as
// CONTRACT.md §4 requires for pinned decisions. Readers take an atomic
// snapshot; the loader publishes both in one step.
type generations struct {
	mu      sync.Mutex // serialises writers
	current atomic.Pointer[api.Snapshot]
	prev    atomic.Pointer[api.Snapshot]
}

var _ api.Generations = (*generations)(nil)

// Current returns the active generation, or nil before the first.
func (g *generations) Current() *api.Snapshot { return g.current.Load() }

// Get returns generation n if it is the active one or the one before it.
func (g *generations) Get(n uint64) *api.Snapshot {
	if s := g.current.Load(); s != nil && s.Generation == n {
		return s
	}
	if s := g.prev.Load(); s != nil && s.Generation == n {
		return s
	}
	return nil
}

// served returns the number of the active generation, 0 before the first.
func (g *generations) served() uint64 {
	if s := g.current.Load(); s != nil {
		return s.Generation
	}
	return 0
}

// publish makes cur the active generation and prev (which may be nil) the
// one before it.
func (g *generations) publish(cur, prev *api.Snapshot) {
	g.mu.Lock()
	defer g.mu.Unlock()
	// Publish prev first: a reader that sees the new current must also be
	// able to find the one before it.
	g.prev.Store(prev)
	g.current.Store(cur)
}
