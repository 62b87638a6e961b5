package policy

import (
	"sync"
	"weak"
)

// recentPerKey is how many values Recent keeps per key: a list file's
// active, previous and staged contents and an experiment's or two.
const recentPerKey = 6

// Recent remembers, weakly, the values last added under each key, newest
// first, while something else holds them: the bases a list file's next
// content is diffed against (its live generations' and experiments'
// contents differ, and any of them may be the one it extends).
type Recent[T any] struct {
	mu sync.Mutex
	m  map[string][]weak.Pointer[T]
}

// Add remembers v under key, forgetting the oldest past recentPerKey and
// any value collected.
func (r *Recent[T]) Add(key string, v *T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string][]weak.Pointer[T]{}
	}
	for k, ws := range r.m {
		if k != key && live(ws) == 0 {
			delete(r.m, k)
		}
	}
	w := weak.Make(v)
	ws := []weak.Pointer[T]{w}
	for _, o := range r.m[key] {
		if o != w && o.Value() != nil && len(ws) < recentPerKey {
			ws = append(ws, o)
		}
	}
	r.m[key] = ws
}

// Get returns the values under key still held, newest first.
func (r *Recent[T]) Get(key string) []*T {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*T
	for _, w := range r.m[key] {
		if v := w.Value(); v != nil {
			out = append(out, v)
		}
	}
	return out
}

func live[T any](ws []weak.Pointer[T]) int {
	n := 0
	for _, w := range ws {
		if w.Value() != nil {
			n++
		}
	}
	return n
}
