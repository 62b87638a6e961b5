package preview

import (
	"sync"

	"github.com/policyrollout/reconciler/internal/engine"
)

// Recorder keeps the most recent live requests, bounded both in number
// and in (estimated) bytes, so that a new or updated experiment can be
// replayed against recent traffic at once instead of waiting for more.
// It is fed by the shadow workers, never by the live path.
type Recorder struct {
	mu       sync.Mutex
	ring     []recorded // circular; len(ring) is the request bound
	head, n  int        // oldest entry and entry count
	bytes    int64
	maxBytes int64
}

type recorded struct {
	policy string
	req    *engine.Request
	size   int64
}

// NewRecorder returns a recorder of at most maxRequests requests and
// maxBytes bytes (both must be positive).
func NewRecorder(maxRequests int, maxBytes int64) *Recorder {
	return &Recorder{ring: make([]recorded, max(1, maxRequests)), maxBytes: max(1, maxBytes)}
}

// Add records req for policyName, evicting the oldest requests as needed.
// A single request over the byte bound is not recorded. The recorder
// keeps req: callers must not modify it afterwards.
func (r *Recorder) Add(policyName string, req *engine.Request) {
	size := requestSize(req) + int64(len(policyName))
	if size > r.maxBytes {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.n > 0 && (r.n == len(r.ring) || r.bytes+size > r.maxBytes) {
		r.evict()
	}
	r.ring[(r.head+r.n)%len(r.ring)] = recorded{policy: policyName, req: req, size: size}
	r.n++
	r.bytes += size
}

func (r *Recorder) evict() {
	old := &r.ring[r.head]
	r.bytes -= old.size
	*old = recorded{}
	r.head = (r.head + 1) % len(r.ring)
	r.n--
}

// Requests returns the recorded requests of policyName, oldest first.
func (r *Recorder) Requests(policyName string) []*engine.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*engine.Request
	for i := range r.n {
		if e := &r.ring[(r.head+i)%len(r.ring)]; e.policy == policyName {
			out = append(out, e.req)
		}
	}
	return out
}

// Usage returns how many requests and estimated bytes are recorded.
func (r *Recorder) Usage() (requests int, bytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n, r.bytes
}

// requestSize estimates the memory a request holds: string bytes plus a
// fixed overhead per value. It need not be exact, only proportional, so
// that the byte bound holds up to a constant factor.
func requestSize(req *engine.Request) int64 {
	const value, entry = 16, 48
	n := int64(256) // the struct and its headers
	n += int64(len(req.Method) + len(req.Path) + len(req.RawPath) + len(req.Host) + len(req.Scheme) + len(req.SourceIP) + len(req.Principal))
	for k, v := range req.Query {
		n += int64(len(k)+len(v)) + entry
	}
	for k, v := range req.Headers {
		n += int64(len(k)+len(v)) + entry
	}
	for _, g := range req.Groups {
		n += int64(len(g)) + value
	}
	return n + valueSize(req.Attributes)
}

func valueSize(v any) int64 {
	const value, entry = 16, 48
	switch x := v.(type) {
	case string:
		return int64(len(x)) + value
	case map[string]any:
		n := int64(entry)
		for k, e := range x {
			n += int64(len(k)) + entry + valueSize(e)
		}
		return n
	case []any:
		n := int64(value)
		for _, e := range x {
			n += valueSize(e)
		}
		return n
	}
	return value
}
