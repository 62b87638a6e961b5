package webhook

import "sync"

// recent remembers the last n delivery ids, so a redelivery (same
// X-GitHub-Delivery) does nothing twice. Oldest ids are forgotten first.
type recent struct {
	mu    sync.Mutex
	ids   map[string]struct{}
	ring  []string
	next  int
	limit int
}

// newRecent remembers up to n ids.
func newRecent(n int) *recent {
	return &recent{ids: make(map[string]struct{}, n), ring: make([]string, n), limit: n}
}

// add records id; false when it was already there.
func (r *recent) add(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.ids[id]; ok {
		return false
	}
	if old := r.ring[r.next]; old != "" {
		delete(r.ids, old)
	}
	r.ring[r.next] = id
	r.ids[id] = struct{}{}
	r.next = (r.next + 1) % r.limit
	return true
}
